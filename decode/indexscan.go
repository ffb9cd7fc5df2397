package decode

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// This file lists and prunes an index cache directory (datahelix cache):
// the state of each of its files, read from their headers.

// IndexState says whether a file of an index cache directory is one a job
// may still read, as datahelix cache lists them.
type IndexState int

const (
	// IndexCurrent is an index whose shard exists with the size and
	// modification time the index was built for: in use, never pruned.
	IndexCurrent IndexState = iota
	// IndexShardGone is an index whose shard no longer exists (deleted,
	// or moved: moved shards get indexes of their own), or not on this
	// node: a shard on another node's local disk looks gone.
	IndexShardGone
	// IndexShardChanged is an index whose shard was rewritten since: a job
	// opening it rebuilds the index anyway.
	IndexShardChanged
	// IndexSuperseded is an index that records, and is named after, its
	// shard's path through a symbolic link, as binaries before links
	// were resolved wrote it, beside the index named after the resolved
	// path, which this binary reads instead. Until that one exists, this
	// binary copies the other into its name when it opens the shard: the
	// other is then current, never pruned.
	IndexSuperseded
	// IndexOtherFormat is an index named by an older datahelix, which a job
	// of such a binary may read (this one copies it once into its own
	// name), or a damaged one this binary cannot read.
	IndexOtherFormat
	// IndexUnchecked is an index whose shard is not known (no path
	// recorded) or cannot be examined (permissions): kept.
	IndexUnchecked
	// IndexWriting is the temporary file of an index being written.
	IndexWriting
	// IndexAbandoned is a temporary file unchanged for a day, left by a
	// killed process.
	IndexAbandoned
)

// String names the state as datahelix cache prints it.
func (s IndexState) String() string {
	switch s {
	case IndexCurrent:
		return "current"
	case IndexShardGone:
		return "shard gone"
	case IndexShardChanged:
		return "shard changed"
	case IndexSuperseded:
		return "superseded"
	case IndexOtherFormat:
		return "older format"
	case IndexUnchecked:
		return "unchecked"
	case IndexWriting:
		return "being written"
	case IndexAbandoned:
		return "abandoned"
	}
	return fmt.Sprintf("IndexState(%d)", int(s))
}

// Removable reports whether PruneIndexCache removes files in state s: a
// job that needs one again rebuilds it from its shard.
func (s IndexState) Removable() bool {
	switch s {
	case IndexShardGone, IndexShardChanged, IndexSuperseded, IndexOtherFormat, IndexAbandoned:
		return true
	}
	return false
}

// CachedIndex is one file of an index cache directory.
type CachedIndex struct {
	Path  string // the cache file
	Shard string // the shard it indexes, when recorded, else ""
	State IndexState
	Bytes int64

	info fs.FileInfo // as scanned: PruneIndexCache removes only this file
}

// ScanIndexCache lists the index files of the cache directory dir (such
// as IndexCacheDir's) in name order, with their states: it compares each
// index's recorded shard path, size and modification time with the shard
// on disk, and the recorded path with the shard's resolved path. Other
// files are not listed; a missing dir is an empty cache.
func ScanIndexCache(dir string) ([]CachedIndex, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("decode: index cache: %w", err)
	}
	old := time.Now().Add(-abandonedIndexAfter)
	sc := &indexScan{buf: make([]byte, indexHeaderBuf), names: make(map[string]bool, len(entries)), dirs: map[string]string{}}
	for _, e := range entries {
		sc.names[e.Name()] = true
	}
	var out []CachedIndex
	for _, e := range entries {
		name := e.Name()
		temp := strings.Contains(name, indexSuffix+".tmp")
		if !temp && !strings.HasSuffix(name, indexSuffix) {
			continue
		}
		info, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue // renamed or removed since the directory was read
		}
		if err != nil {
			return out, fmt.Errorf("decode: index cache: %w", err)
		}
		if !info.Mode().IsRegular() {
			continue
		}
		x := CachedIndex{Path: filepath.Join(dir, name), Bytes: info.Size(), info: info}
		switch {
		case temp && info.ModTime().Before(old):
			x.State = IndexAbandoned
		case temp:
			x.State = IndexWriting
		case !strings.HasSuffix(name, pathIndexSuffix):
			x.State = IndexOtherFormat
		default:
			x.Shard, x.State = sc.check(x.Path)
		}
		out = append(out, x)
	}
	return out, nil
}

// indexScan is what ScanIndexCache keeps while it examines the files of
// an index cache directory.
type indexScan struct {
	buf   []byte            // for readIndexHeader
	names map[string]bool   // the directory's files
	dirs  map[string]string // shard directory -> resolved, "" when it cannot be
}

// check reads the header of the index file p and compares it with its
// shard: the shard's size and modification time, and its path with the
// shard's resolved path, whose index (when the directory holds it)
// supersedes this one. A shard directory is resolved once per scan; a
// shard that is itself a link is resolved whole.
func (sc *indexScan) check(p string) (shard string, state IndexState) {
	shard, size, mtime, state := readIndexHeader(p, sc.buf)
	if state != IndexCurrent {
		return shard, state
	}
	st, err := os.Lstat(shard)
	link := err == nil && st.Mode()&fs.ModeSymlink != 0
	if link {
		st, err = os.Stat(shard)
	}
	switch {
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR):
		return shard, IndexShardGone
	case err != nil:
		return shard, IndexUnchecked
	case !st.Mode().IsRegular():
		return shard, IndexShardGone // OpenShard refuses it
	case st.Size() != size || st.ModTime().UnixNano() != mtime:
		return shard, IndexShardChanged
	}
	var real string
	if link {
		if r, err := filepath.EvalSymlinks(shard); err == nil && filepath.IsAbs(r) {
			real = r
		}
	} else {
		dir := filepath.Dir(shard)
		rd, ok := sc.dirs[dir]
		if !ok {
			if r, err := filepath.EvalSymlinks(dir); err == nil && filepath.IsAbs(r) {
				rd = r
			}
			sc.dirs[dir] = rd
		}
		if rd != "" {
			real = filepath.Join(rd, filepath.Base(shard))
		}
	}
	if real != "" && real != shard && sc.names[indexFileName(real)] {
		return shard, IndexSuperseded
	}
	return shard, IndexCurrent
}

// indexHeaderMax bounds the header of an index that records its shard's
// path: magic, size, mtime, and a path of up to 64 KiB.
const indexHeaderMax = len(indexMagicPath) + 16 + binary.MaxVarintLen64 + 1<<16

// indexHeaderFixed is the part of the header readIndexHeader reads first:
// magic, size, mtime and room for the path's length.
const indexHeaderFixed = len(indexMagicPath) + 16 + binary.MaxVarintLen64

// indexHeaderBuf is the scratch space ScanIndexCache gives
// readIndexHeader: room for a path of PATH_MAX bytes.
const indexHeaderBuf = indexHeaderFixed + 4096

// readIndexHeader reads the shard path, size and modification time the
// index file p records, using buf (at least indexHeaderFixed bytes) and a
// larger buffer of its own for a path that does not fit in it. It reads
// the fixed part of the header, then the bytes of the path it records and
// no more (an index holds megabytes). Its state is IndexCurrent when they
// were read, IndexUnchecked when the file records no path, IndexOtherFormat
// when it is no index this binary reads, records a path longer than
// indexHeaderMax allows, or its path does not give its name (a file copied
// under another name: cachePath never looks it up).
func readIndexHeader(p string, buf []byte) (shard string, size, mtime int64, state IndexState) {
	f, err := os.Open(p)
	if err != nil {
		return "", 0, 0, IndexUnchecked
	}
	defer f.Close()
	n, err := io.ReadFull(f, buf[:indexHeaderFixed])
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return "", 0, 0, IndexUnchecked
	}
	b := buf[:n]
	if len(b) < len(indexMagic)+16 {
		return "", 0, 0, IndexOtherFormat
	}
	switch string(b[:len(indexMagic)]) {
	case indexMagic:
		return "", 0, 0, IndexUnchecked
	case indexMagicPath:
	default:
		return "", 0, 0, IndexOtherFormat
	}
	size, mtime = int64(binary.LittleEndian.Uint64(b[len(indexMagicPath):])), int64(binary.LittleEndian.Uint64(b[len(indexMagicPath)+8:]))
	start := len(indexMagicPath) + 16
	plen, vlen := binary.Uvarint(b[start:])
	if vlen <= 0 {
		return "", 0, 0, IndexOtherFormat
	}
	start += vlen
	if plen > uint64(indexHeaderMax-start) {
		return "", 0, 0, IndexOtherFormat
	}
	end := start + int(plen)
	if end > len(buf) {
		buf = make([]byte, end)
		copy(buf, b)
	}
	if end > n {
		if _, err := io.ReadFull(f, buf[n:end]); errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return "", 0, 0, IndexOtherFormat // truncated in its path
		} else if err != nil {
			return "", 0, 0, IndexUnchecked
		}
	}
	shard = string(buf[start:end])
	if !filepath.IsAbs(shard) || indexFileName(shard) != filepath.Base(p) {
		return "", 0, 0, IndexOtherFormat
	}
	return shard, size, mtime, IndexCurrent
}

// PruneIndexCache removes the files of ix that are Removable and still the
// files ScanIndexCache examined (a job may have rebuilt one since), and
// returns how many it removed and their bytes. It stops at the first one
// it cannot remove.
//
// Removing an index a job reads is safe: a job reads an index whole when
// it opens a shard or loads it again, and one that finds none rebuilds it
// from the shard; the index of a shard that is gone or changed is of no
// use to any job.
func PruneIndexCache(ix []CachedIndex) (removed int, freed int64, err error) {
	for _, x := range ix {
		if !x.State.Removable() {
			continue
		}
		st, err := os.Lstat(x.Path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err == nil && (!os.SameFile(st, x.info) || !st.ModTime().Equal(x.info.ModTime()) || st.Size() != x.info.Size()) {
			continue // replaced since the scan: look again next time
		}
		if err == nil {
			err = os.Remove(x.Path)
		}
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return removed, freed, fmt.Errorf("decode: prune index cache: %w", err)
		}
		removed++
		freed += x.Bytes
	}
	return removed, freed, nil
}
