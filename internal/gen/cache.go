package gen

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// CacheState says whether a dataset directory found in a cache is one
// this binary uses.
type CacheState int

const (
	// CacheCurrent is a finished dataset named with this binary's
	// FormatVersion (CacheName) and stamped with it: in use.
	CacheCurrent CacheState = iota
	// CacheOtherFormat is a finished dataset named or stamped with
	// another format version, or with none (made before versions): this
	// binary never reads it, but a job of an older binary may.
	CacheOtherFormat
	// CacheScratch is the scratch directory of a generation that was
	// killed: unchanged for a day, so no process is filling it.
	CacheScratch
	// CacheFilling is a scratch directory changed within the last day: a
	// generation may be filling it now, on this node or another.
	CacheFilling
)

// String names the state as datahelix cache prints it.
func (s CacheState) String() string {
	switch s {
	case CacheCurrent:
		return "current"
	case CacheOtherFormat:
		return "older format"
	case CacheScratch:
		return "abandoned"
	case CacheFilling:
		return "being written"
	}
	return fmt.Sprintf("CacheState(%d)", int(s))
}

// Removable reports whether Prune removes datasets in state s.
func (s CacheState) Removable() bool { return s == CacheOtherFormat || s == CacheScratch }

// CachedDataset is one dataset directory found under a cache directory.
type CachedDataset struct {
	Dir   string
	State CacheState
	Bytes int64 // of its files, symbolic links counted as links
}

// ScanCache lists the dataset directories under root — those holding a
// DONE marker, and the scratch directories generations write into
// first — sorted by path, with their sizes. It does not look inside a
// dataset for others, and a missing root is an empty cache.
func ScanCache(root string) ([]CachedDataset, error) {
	var out []CachedDataset
	stale := time.Now().Add(-abandonedAfter)
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		switch {
		case errors.Is(err, fs.ErrNotExist) && path == root:
			return fs.SkipAll
		case errors.Is(err, fs.ErrNotExist):
			return nil // removed by another process since its parent was read
		case err != nil:
			return err
		}
		if !d.IsDir() || path == root {
			return nil
		}
		var state CacheState
		switch name := d.Name(); {
		case strings.Contains(name, ".tmp-"):
			state = CacheFilling
			if info, err := d.Info(); err == nil && info.ModTime().Before(stale) {
				state = CacheScratch
			}
		case fileExists(filepath.Join(path, doneFile)):
			// The name says which binaries use it, the DONE stamp who
			// made it (link directories of some binaries of format 2
			// carry a date only, and Install refuses them).
			state = CacheOtherFormat
			if strings.HasSuffix(name, CacheName("")) && Current(path) {
				state = CacheCurrent
			}
		default:
			return nil // a directory of datasets: look inside
		}
		size, err := dirBytes(path)
		if errors.Is(err, fs.ErrNotExist) {
			return filepath.SkipDir // installed or removed meanwhile
		}
		if err != nil {
			return err
		}
		out = append(out, CachedDataset{Dir: path, State: state, Bytes: size})
		return filepath.SkipDir
	})
	if err != nil {
		return nil, fmt.Errorf("gen: cache %s: %w", root, err)
	}
	slices.SortFunc(out, func(a, b CachedDataset) int { return strings.Compare(a.Dir, b.Dir) })
	return out, nil
}

// Prune removes the datasets of ds that are Removable and returns the
// bytes it freed. It stops at the first one it cannot remove.
func Prune(ds []CachedDataset) (int64, error) {
	var freed int64
	for _, d := range ds {
		if !d.State.Removable() {
			continue
		}
		if err := os.RemoveAll(d.Dir); err != nil {
			return freed, fmt.Errorf("gen: remove %s: %w", d.Dir, err)
		}
		freed += d.Bytes
	}
	return freed, nil
}

func fileExists(path string) bool {
	info, err := os.Lstat(path)
	return err == nil && info.Mode().IsRegular()
}

// dirBytes sums the sizes of the entries under dir, without following
// symbolic links (a link directory's shards belong to another dataset).
func dirBytes(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		n += info.Size()
		return nil
	})
	return n, err
}
