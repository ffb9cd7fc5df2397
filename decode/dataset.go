package decode

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/datahelix/datahelix/internal/shardindex"
)

// ErrNoShards reports a dataset path or glob that names no shard.
var ErrNoShards = shardindex.ErrNoShards

// Dataset is an ordered set of shards.
type Dataset struct {
	Shards []*Shard
}

// OpenDataset opens the shards named by pathOrGlob: a directory (every
// *.tar file directly inside it), a glob pattern, or one tar file. Shards
// are sorted by path so that every rank sees the same order. A missing
// path, a pattern matching nothing or a directory without shards is an
// error wrapping ErrNoShards. A shard that cannot be opened (unreadable,
// corrupt, truncated) fails the whole open, with its error (a
// *ShardError for a corrupt one); when several cannot, the error names
// the first 5 of them in shard order, counts the rest and
// wraps them all, so that one run tells what to mend. A glob leaves out
// datahelix's index cache files (*.dhidx). Compressed tar files
// (*.tar.gz, *.tgz, *.tar.zst, ...) in a directory are an error wrapping
// ErrCompressedShard rather than being skipped. cacheDir is passed to
// OpenShard.
func OpenDataset(pathOrGlob string, cacheDir string) (*Dataset, error) {
	return OpenDatasetPart(pathOrGlob, cacheDir, 0, 1)
}

// OpenDatasetPart opens the dataset as OpenDataset does, with the same
// result, but indexes its shards starting with the part-th of parts
// equal runs of them and going on in order, wrapping around. Ranks that
// open one dataset at the same time pass their rank and the rank count:
// on a cold index cache each then builds the indexes of its own run
// first and finds most of the others' in the cache when it gets there,
// instead of every rank building every index (and reading every shard's
// headers) at once.
func OpenDatasetPart(pathOrGlob string, cacheDir string, part, parts int) (*Dataset, error) {
	paths, err := shardindex.Paths(pathOrGlob)
	if err != nil {
		return nil, err
	}
	n := len(paths)
	first := partStart(n, part, parts)
	d := &Dataset{Shards: make([]*Shard, n)}
	var failed []shardOpenError
	for k := range n {
		i := (first + k) % n
		s, err := OpenShard(paths[i], cacheDir)
		if err != nil {
			failed = append(failed, shardOpenError{i, err})
			continue
		}
		d.Shards[i] = s
	}
	if len(failed) > 0 {
		d.Close()
		return nil, openError(failed, n)
	}
	return d, nil
}

// partStart returns the first shard of the part-th of parts equal runs
// of n shards (0 for a part out of range).
func partStart(n, part, parts int) int {
	if parts <= 1 || part <= 0 || part >= parts {
		return 0
	}
	return int(int64(part) * int64(n) / int64(parts))
}

// maxOpenErrors is how many of the shards that cannot be opened the error
// of OpenDataset names; it counts the others.
const maxOpenErrors = 5

// shardOpenError is why shard i of a dataset cannot be opened.
type shardOpenError struct {
	i   int
	err error
}

// openError is the error of a dataset of n shards of which failed cannot
// be opened: the one error, or one naming the first maxOpenErrors in
// shard order and wrapping all of them.
func openError(failed []shardOpenError, n int) error {
	if len(failed) == 1 {
		return failed[0].err
	}
	slices.SortFunc(failed, func(a, b shardOpenError) int { return a.i - b.i })
	errs := make([]error, len(failed))
	var b strings.Builder
	fmt.Fprintf(&b, "decode: %d of %d shards cannot be opened: ", len(failed), n)
	for k, f := range failed {
		errs[k] = f.err
		if k < maxOpenErrors {
			if k > 0 {
				b.WriteString("; ")
			}
			b.WriteString(strings.TrimPrefix(f.err.Error(), "decode: "))
		}
	}
	if rest := len(failed) - maxOpenErrors; rest > 0 {
		fmt.Fprintf(&b, "; and %d more", rest)
	}
	return &kindError{msg: b.String(), kinds: errs}
}

// kindError is an error with its own message that unwraps to sentinel
// kinds, or to the errors it sums up, without repeating their text.
type kindError struct {
	msg   string
	kinds []error
}

func (e *kindError) Error() string   { return e.msg }
func (e *kindError) Unwrap() []error { return e.kinds }

// Len returns the number of samples over all shards.
func (d *Dataset) Len() int {
	n := 0
	for _, s := range d.Shards {
		n += s.Len()
	}
	return n
}

// Close releases the file handles of all shards.
func (d *Dataset) Close() error {
	var errs []error
	for _, s := range d.Shards {
		if s != nil { // a shard OpenDataset could not open
			errs = append(errs, s.Close())
		}
	}
	return errors.Join(errs...)
}
