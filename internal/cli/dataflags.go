package cli

import (
	"flag"
	"fmt"

	"github.com/datahelix/datahelix/decode"
	"github.com/datahelix/datahelix/internal/shape"
	"github.com/datahelix/datahelix/internal/shardindex"
)

// CacheDirDefault ends the help of every --cache-dir: where
// shardindex.DefaultCacheDir looks (a relative $XDG_CACHE_HOME counts as unset,
// as os.UserCacheDir has it).
const CacheDirDefault = " (default $DATAHELIX_CACHE, else $XDG_CACHE_HOME/datahelix, else ~/.cache/datahelix, else datahelix-cache in the temporary directory)"

// CacheRoot is where the default dataset and shard indexes live: the
// --cache-dir flag, else shardindex.DefaultCacheDir.
func CacheRoot(flagDir string) string {
	if flagDir != "" {
		return flagDir
	}
	return shardindex.DefaultCacheDir()
}

// indexCacheUsage is the help of inspect's and decode's --cache.
const indexCacheUsage = "`directory` for shard index caches (default: the index directory under run's cache, $DATAHELIX_CACHE/index when set; " +
	"never beside the shards, whose directory may be read-only or shared)"

// IndexCacheFlags are the --cache and --cache-dir flags of inspect,
// decode and costmodel: where they keep shard indexes.
type IndexCacheFlags struct{ index, root string }

// AddIndexCacheFlags defines --cache, the index directory itself, and
// --cache-dir, a cache directory as run takes it (its indexes in its
// index directory), so that the --cache-dir a job ran with finds the
// indexes it built.
func AddIndexCacheFlags(fs *flag.FlagSet) *IndexCacheFlags {
	var f IndexCacheFlags
	fs.StringVar(&f.index, "cache", "", indexCacheUsage)
	fs.StringVar(&f.root, "cache-dir", "", "cache `dir`ectory as for run: shard index caches in its index directory")
	return &f
}

// Dir is where the command keeps shard indexes: --cache when given, else
// where run keeps them (the index directory of --cache-dir or of the
// default cache), so that a checking command writes nothing into the
// dataset's directory.
func (f *IndexCacheFlags) Dir(command string) (string, error) {
	switch {
	case f.index != "" && f.root != "":
		return "", Usagef("%s: --cache names the index directory itself and --cache-dir the cache holding it: give one of them", command)
	case f.index != "":
		return f.index, nil
	}
	return shardindex.Dir(CacheRoot(f.root)), nil
}

// ShapeFlags registers --frames and --size (run, decode, costmodel,
// inspect), with decode's bounds in their help; CheckShape checks them.
func ShapeFlags(fs *flag.FlagSet, frames, size *int) {
	fs.IntVar(frames, "frames", decode.DefaultFrames, fmt.Sprintf("frames `F` sampled per clip, 1..%d", shape.MaxFrames))
	fs.IntVar(size, "size", decode.DefaultSize, fmt.Sprintf("output side `S` in pixels, %d..%d: frames and images become S x S RGB (one clip, F x S x S x 3 bytes, at most %d GiB)",
		shape.MinSize, shape.MaxSize, shape.MaxClipBytes>>30))
}

// CheckShape checks --frames and --size (run, decode, costmodel,
// inspect) and the size of one decoded clip with shape.Check, as a
// usage error naming the flags.
func CheckShape(frames, size int) error {
	if err := shape.Check(frames, size, "--frames", "--size"); err != nil {
		return Usagef("%w", err)
	}
	return nil
}
