package shardindex

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

// This file lists and prunes an index cache directory (datahelix cache),
// reading the header of each of its files.

// File is one file of an index cache directory, as Scan found it.
type File struct {
	Path  string // the cache file
	Shard string // the shard it indexes, when recorded, else ""
	Bytes int64
	// Stale is true for a file no job of this binary reads: an index
	// whose shard is gone (deleted, moved, or on another node's local
	// disk) or changed since (a job rebuilds it anyway), one of another
	// format or name (an older datahelix's, or damaged), and a temporary
	// file unchanged for a day (left by a killed job). Every other index
	// is kept: its shard matches it, or cannot be examined.
	Stale bool

	info fs.FileInfo // as scanned: Prune removes only this file
}

// Scan lists the index files of the cache directory dir (such as Dir's)
// in name order, comparing each index's recorded shard path, size and
// modification time with the shard on disk. Other files, and temporary
// ones being written, are not listed; a missing dir is an empty cache.
func Scan(dir string) ([]File, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("decode: index cache: %w", err)
	}
	old := time.Now().Add(-abandonedIndexAfter)
	buf := make([]byte, indexHeaderBuf)
	var out []File
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
		if !info.Mode().IsRegular() || temp && !info.ModTime().Before(old) {
			continue
		}
		x := File{Path: filepath.Join(dir, name), Bytes: info.Size(), info: info, Stale: true}
		if !temp && strings.HasSuffix(name, pathIndexSuffix) {
			x.Shard, x.Stale = check(x.Path, buf)
		}
		out = append(out, x)
	}
	return out, nil
}

// check reads the header of the index file p and compares it with its
// shard's size and modification time.
func check(p string, buf []byte) (shard string, stale bool) {
	shard, size, mtime, h := readIndexHeader(p, buf)
	if h != headerRead {
		return shard, h == headerBad
	}
	st, err := os.Stat(shard)
	switch {
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR):
		return shard, true
	case err != nil:
		return shard, false // cannot be examined (permissions): kept
	case !st.Mode().IsRegular():
		return shard, true // a shard refuses it
	}
	return shard, st.Size() != size || st.ModTime().UnixNano() != mtime
}

// indexHeaderMax bounds the header of an index that records its shard's
// path: magic, size, mtime, and a path of up to 64 KiB.
const indexHeaderMax = len(indexMagicPath) + 16 + binary.MaxVarintLen64 + 1<<16

// indexHeaderFixed is the part of the header readIndexHeader reads first:
// magic, size, mtime and room for the path's length.
const indexHeaderFixed = len(indexMagicPath) + 16 + binary.MaxVarintLen64

// indexHeaderBuf is the scratch space Scan gives readIndexHeader: room
// for a path of PATH_MAX bytes.
const indexHeaderBuf = indexHeaderFixed + 4096

// header says what readIndexHeader made of an index file.
type header int

const (
	headerRead header = iota // the shard's path, size and mtime were read
	headerNone               // the file records no path, or cannot be opened: kept
	headerBad                // no index this binary reads: stale
)

// readIndexHeader reads the shard path, size and modification time the
// index file p records, using buf (at least indexHeaderFixed bytes) and a
// larger buffer of its own for a path that does not fit in it. It reads
// the fixed part of the header, then the bytes of the path it records and
// no more (an index holds megabytes). It returns headerBad when the file
// is no index this binary reads, records a path longer than
// indexHeaderMax allows, or its path does not give its name (a file
// copied under another name: CachePath never looks it up).
func readIndexHeader(p string, buf []byte) (shard string, size, mtime int64, h header) {
	f, err := os.Open(p)
	if err != nil {
		return "", 0, 0, headerNone
	}
	defer f.Close()
	n, err := io.ReadFull(f, buf[:indexHeaderFixed])
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return "", 0, 0, headerNone
	}
	b := buf[:n]
	if len(b) < len(indexMagic)+16 {
		return "", 0, 0, headerBad
	}
	switch string(b[:len(indexMagic)]) {
	case indexMagic:
		return "", 0, 0, headerNone
	case indexMagicPath:
	default:
		return "", 0, 0, headerBad
	}
	size, mtime = int64(binary.LittleEndian.Uint64(b[len(indexMagicPath):])), int64(binary.LittleEndian.Uint64(b[len(indexMagicPath)+8:]))
	start := len(indexMagicPath) + 16
	plen, vlen := binary.Uvarint(b[start:])
	if vlen <= 0 {
		return "", 0, 0, headerBad
	}
	start += vlen
	if plen > uint64(indexHeaderMax-start) {
		return "", 0, 0, headerBad
	}
	end := start + int(plen)
	if end > len(buf) {
		buf = make([]byte, end)
		copy(buf, b)
	}
	if end > n {
		if _, err := io.ReadFull(f, buf[n:end]); errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return "", 0, 0, headerBad // truncated in its path
		} else if err != nil {
			return "", 0, 0, headerNone
		}
	}
	shard = string(buf[start:end])
	if !filepath.IsAbs(shard) || indexFileName(shard) != filepath.Base(p) {
		return "", 0, 0, headerBad
	}
	return shard, size, mtime, headerRead
}

// Prune removes the stale files of ix that are still the files Scan
// examined (a job may have rebuilt one since), and returns how many it
// removed and their bytes. It stops at the first one it cannot remove.
//
// Removing an index a job reads is safe: a job reads an index whole when
// it opens a shard or loads it again, and one that finds none rebuilds it
// from the shard; the index of a shard that is gone or changed is of no
// use to any job.
func Prune(ix []File) (removed int, freed int64, err error) {
	for _, x := range ix {
		if !x.Stale {
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
