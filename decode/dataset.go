package decode

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/datahelix/datahelix/internal/shardindex"
)

// ErrNoShards reports a dataset path or glob that names no shard.
var ErrNoShards = errors.New("decode: no shards found")

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
	paths, err := ShardPaths(pathOrGlob)
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

// ShardPaths expands a dataset path, as OpenDataset takes it, into the
// sorted list of its shard files: a directory's *.tar files (refusing a
// directory of compressed ones), the regular files a glob matches other
// than index caches, or the path itself. It fails with ErrNoShards when
// there are none.
func ShardPaths(pathOrGlob string) ([]string, error) {
	if pathOrGlob == "" {
		return nil, fmt.Errorf("%w: empty dataset path", ErrNoShards)
	}
	st, err := os.Stat(pathOrGlob)
	switch {
	case err == nil && st.IsDir():
		// Listed with ReadDir, not Glob, so that an unreadable directory
		// says so instead of "no *.tar files" (Glob drops the error).
		entries, err := os.ReadDir(pathOrGlob)
		if err != nil {
			return nil, fmt.Errorf("%w: cannot list directory %s: %v", ErrNoShards, pathOrGlob, err)
		}
		var paths, compressed []string
		for _, e := range entries {
			switch {
			case strings.HasSuffix(strings.ToLower(e.Name()), ".tar"):
				// In any letter case, as IsShardName takes a shard named
				// alone or by a glob: a.tar beside B.TAR is two shards.
				paths = append(paths, filepath.Join(pathOrGlob, e.Name()))
			case compressedTarSuffix(e.Name()) != "":
				compressed = append(compressed, e.Name())
			}
		}
		if len(compressed) > 0 {
			// Refused rather than skipped: training on the *.tar part of
			// a dataset without a word is worse than stopping.
			sort.Strings(compressed)
			return nil, compressedDirError(pathOrGlob, len(paths), compressed)
		}
		if len(paths) == 0 {
			return nil, fmt.Errorf("%w: directory %s has no *.tar files", ErrNoShards, pathOrGlob)
		}
		sort.Strings(paths)
		return paths, nil
	case err == nil:
		return []string{pathOrGlob}, nil
	}
	paths, gerr := filepath.Glob(pathOrGlob)
	if gerr != nil {
		return nil, fmt.Errorf("decode: dataset pattern %q: %w", pathOrGlob, gerr)
	}
	var files []string
	indexes := 0
	for _, p := range paths {
		if isIndexFile(p) {
			// datahelix's own index caches, written beside the shards
			// when no cache directory is given: 'DIR/*' must still mean
			// the shards only.
			indexes++
			continue
		}
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			files = append(files, p)
		}
	}
	if len(files) == 0 {
		if len(paths) == 0 && !IsGlob(pathOrGlob) {
			return nil, fmt.Errorf("%w: %s: %v", ErrNoShards, pathOrGlob, err)
		}
		if indexes > 0 {
			return nil, fmt.Errorf("%w: pattern %q matches only index cache files (*.dhidx)", ErrNoShards, pathOrGlob)
		}
		return nil, fmt.Errorf("%w: pattern %q matches no files", ErrNoShards, pathOrGlob)
	}
	sort.Strings(files)
	return files, nil
}

// isIndexFile reports whether p is named like an index cache file
// ("*.dhidx") or a temporary one being written ("*.dhidx.tmp*").
func isIndexFile(p string) bool { return shardindex.IsCacheFile(filepath.Base(p)) }

// compressedTarSuffixes are the names of compressed tar archives, which
// cannot be shards: samples are read by random access.
var compressedTarSuffixes = []string{
	".tar.gz", ".tgz", ".tar.zst", ".tar.zstd", ".tzst", ".tar.xz", ".txz", ".tar.bz2", ".tbz2", ".tbz",
}

// compressedTarSuffix returns the compressed-tar suffix name ends with,
// or "".
func compressedTarSuffix(name string) string {
	lower := strings.ToLower(name)
	for _, suf := range compressedTarSuffixes {
		if strings.HasSuffix(lower, suf) {
			return suf
		}
	}
	return ""
}

// IsShardName reports whether name, a path or file name in any letter
// case, names a tar shard: a *.tar file or a compressed tar archive
// (*.tar.gz, *.tgz, *.tar.zst, *.tar.zstd, *.tzst, *.tar.xz, *.txz,
// *.tar.bz2, *.tbz2, *.tbz). A command given media files and shards
// opens such names with OpenShard, whose error says that a compressed
// one must be decompressed, rather than reading them as media files.
func IsShardName(name string) bool {
	return strings.HasSuffix(strings.ToLower(name), ".tar") || compressedTarSuffix(name) != ""
}

// compressedDirError describes a dataset directory holding compressed tar
// files (sorted names) beside nTar *.tar shards. It wraps
// ErrCompressedShard, and ErrNoShards as well when there is no *.tar.
func compressedDirError(dir string, nTar int, compressed []string) error {
	var sufs []string
	for _, c := range compressed {
		if suf := "*" + compressedTarSuffix(c); !slices.Contains(sufs, suf) {
			sufs = append(sufs, suf)
		}
	}
	sort.Strings(sufs)
	what := fmt.Sprintf("%d compressed shards (%s)", len(compressed), strings.Join(sufs, ", "))
	if len(compressed) == 1 {
		what = fmt.Sprintf("1 compressed shard (%s)", sufs[0])
	}
	if nTar == 0 {
		return &kindError{kinds: []error{ErrNoShards, ErrCompressedShard},
			msg: fmt.Sprintf("%v: directory %s has no *.tar files; %s must be decompressed first (%s)", ErrNoShards, dir, what, shardindex.UncompressedOnly)}
	}
	tars := fmt.Sprintf("%d *.tar shards", nTar)
	if nTar == 1 {
		tars = "1 *.tar shard"
	}
	return &kindError{kinds: []error{ErrCompressedShard},
		msg: fmt.Sprintf("decode: directory %s mixes %s with %s such as %s: decompress them first (%s) "+
			"or move them out of the directory, rather than train on part of the dataset", dir, tars, what, filepath.Join(dir, compressed[0]), shardindex.UncompressedOnly)}
}

// kindError is an error with its own message that unwraps to sentinel
// kinds, or to the errors it sums up, without repeating their text.
type kindError struct {
	msg   string
	kinds []error
}

func (e *kindError) Error() string   { return e.msg }
func (e *kindError) Unwrap() []error { return e.kinds }

// IsGlob reports whether p contains glob metacharacters (filepath.Match's
// *, ?, [ and \), so that a dataset argument is a pattern to expand.
func IsGlob(p string) bool {
	for _, c := range p {
		switch c {
		case '*', '?', '[', '\\':
			return true
		}
	}
	return false
}

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

// ShardWarnings are the warnings of one shard's index (Shard.Warnings):
// members skipped or grouped oddly while it was built.
type ShardWarnings struct {
	Shard    string // the shard's path
	Warnings []string
}

// Warnings returns the index warnings of the dataset's shards that have
// any, in shard order.
func (d *Dataset) Warnings() []ShardWarnings {
	var ws []ShardWarnings
	for _, s := range d.Shards {
		if w := s.Warnings(); len(w) > 0 {
			ws = append(ws, ShardWarnings{Shard: s.Path(), Warnings: w})
		}
	}
	return ws
}

// MaxWarningLines is the max that run's log, inspect and decode give
// Lines: how many warnings of one shard they print before one line
// counting the rest.
const MaxWarningLines = 5

// Lines formats the warnings as lines "warning: shard PATH: WARNING":
// the first max of them (all when max <= 0 or there is one more), then
// one line saying how many more there are, so that a shard of a million
// unnamed members does not flood the log.
func (w ShardWarnings) Lines(max int) []string {
	n := len(w.Warnings)
	if max > 0 && n > max+1 { // a count line in place of one warning would say less
		n = max
	}
	lines := make([]string, 0, n+1)
	for _, s := range w.Warnings[:n] {
		lines = append(lines, fmt.Sprintf("warning: shard %s: %s", w.Shard, s))
	}
	if rest := len(w.Warnings) - n; rest > 0 {
		lines = append(lines, fmt.Sprintf("warning: shard %s: and %d more warnings", w.Shard, rest))
	}
	return lines
}

// IsMediaFile reports whether path names an existing regular file that
// is not a shard (IsShardName) and whose extension names a video or image
// format, read or refused: a clip or picture given alone, which inspect
// and decode take as a one-member sample (FileSample).
func IsMediaFile(path string) bool {
	if IsShardName(path) {
		return false
	}
	ext := strings.ToLower(strings.TrimPrefix(filepath.Ext(path), "."))
	switch {
	case memberKind(ext) == kindVideo || memberKind(ext) == kindImage:
	case unreadMedia(ext) == "image" || unreadMedia(ext) == "video":
	default:
		return false
	}
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}

// ExpandMediaGlob returns the paths a dataset argument stands for when
// clips and pictures may be given alone: the sorted matches of a glob
// that matches a media file (IsMediaFile), each a path of its own, so
// that 'clips/*.mp4' is every clip and 'dir/*' its shards and media
// files; otherwise the argument itself, which OpenDataset takes (a
// directory, a glob of shards, a shard, or a path that names nothing,
// which it reports).
func ExpandMediaGlob(arg string) []string {
	if _, err := os.Stat(arg); err == nil || !IsGlob(arg) {
		return []string{arg}
	}
	matches, err := ShardPaths(arg)
	if err != nil || !slices.ContainsFunc(matches, IsMediaFile) {
		return []string{arg}
	}
	return matches
}
