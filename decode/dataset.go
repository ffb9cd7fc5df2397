package decode

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
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
// error wrapping ErrNoShards; a corrupt shard fails the whole open with
// its *ShardError. cacheDir is passed to OpenShard.
func OpenDataset(pathOrGlob string, cacheDir string) (*Dataset, error) {
	paths, err := shardPaths(pathOrGlob)
	if err != nil {
		return nil, err
	}
	d := &Dataset{Shards: make([]*Shard, 0, len(paths))}
	for _, p := range paths {
		s, err := OpenShard(p, cacheDir)
		if err != nil {
			d.Close()
			return nil, err
		}
		d.Shards = append(d.Shards, s)
	}
	return d, nil
}

// shardPaths expands pathOrGlob into a sorted list of shard files.
func shardPaths(pathOrGlob string) ([]string, error) {
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
		var paths []string
		for _, e := range entries {
			if strings.HasSuffix(e.Name(), ".tar") {
				paths = append(paths, filepath.Join(pathOrGlob, e.Name()))
			}
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
	for _, p := range paths {
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			files = append(files, p)
		}
	}
	if len(files) == 0 {
		if len(paths) == 0 && !hasMeta(pathOrGlob) {
			return nil, fmt.Errorf("%w: %s: %v", ErrNoShards, pathOrGlob, err)
		}
		return nil, fmt.Errorf("%w: pattern %q matches no files", ErrNoShards, pathOrGlob)
	}
	sort.Strings(files)
	return files, nil
}

// hasMeta reports whether p contains glob metacharacters.
func hasMeta(p string) bool {
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
		errs = append(errs, s.Close())
	}
	return errors.Join(errs...)
}
