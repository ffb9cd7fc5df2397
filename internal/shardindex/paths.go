package shardindex

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// This file names a dataset's shards: the paths a dataset argument (a
// directory, a glob or a file) stands for, and which names are shards.

// ErrNoShards reports a dataset path or glob that names no shard.
var ErrNoShards = errors.New("decode: no shards found")

// Paths expands a dataset path, as decode.OpenDataset takes it, into the
// sorted list of its shard files: a directory's *.tar files (refusing a
// directory of compressed ones), the regular files a glob matches other
// than index caches, or the path itself. It fails with ErrNoShards when
// there are none.
func Paths(pathOrGlob string) ([]string, error) {
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
		if IsCacheFile(filepath.Base(p)) {
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
// opens such names with shard.Open, whose error says that a compressed
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
			msg: fmt.Sprintf("%v: directory %s has no *.tar files; %s must be decompressed first (%s)", ErrNoShards, dir, what, UncompressedOnly)}
	}
	tars := fmt.Sprintf("%d *.tar shards", nTar)
	if nTar == 1 {
		tars = "1 *.tar shard"
	}
	return &kindError{kinds: []error{ErrCompressedShard},
		msg: fmt.Sprintf("decode: directory %s mixes %s with %s such as %s: decompress them first (%s) "+
			"or move them out of the directory, rather than train on part of the dataset", dir, tars, what, filepath.Join(dir, compressed[0]), UncompressedOnly)}
}

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

// MaxWarningLines is the max that run's log, inspect and decode give
// WarningLines: how many warnings of one shard they print before one line
// counting the rest.
const MaxWarningLines = 5

// WarningLines formats the warnings of the index of the shard at path
// (shard.Shard.Warnings) as lines "warning: shard PATH: WARNING": the
// first max of them (all when max <= 0 or there is one more), then
// one line saying how many more there are, so that a shard of a million
// unnamed members does not flood the log.
func WarningLines(path string, warnings []string, max int) []string {
	n := len(warnings)
	if max > 0 && n > max+1 { // a count line in place of one warning would say less
		n = max
	}
	lines := make([]string, 0, n+1)
	for _, s := range warnings[:n] {
		lines = append(lines, fmt.Sprintf("warning: shard %s: %s", path, s))
	}
	if rest := len(warnings) - n; rest > 0 {
		lines = append(lines, fmt.Sprintf("warning: shard %s: and %d more warnings", path, rest))
	}
	return lines
}

// kindError is an error with its own message that unwraps to sentinel
// kinds without repeating their text.
type kindError struct {
	msg   string
	kinds []error
}

func (e *kindError) Error() string   { return e.msg }
func (e *kindError) Unwrap() []error { return e.kinds }
