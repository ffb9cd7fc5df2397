package shardindex

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"hash/fnv"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The index cache file is little-endian binary:
//
//	magic "DHIDX\x00\x02\n" or "DHIDX\x00\x03\n"  indexMagic, indexMagicPath
//	shard size, shard mtime (Unix ns)          int64 each
//	shard path (indexMagicPath only)           uvarint length + bytes
//	entry count                                uvarint
//	per entry: member count, then per member:  name (uvarint length + bytes),
//	                                           data offset, data size (uvarints)
//	warning count, warnings                    uvarint, strings
//	CRC-32C of everything above                uint32
//
// Keys, extensions and spans are recomputed from member names and offsets
// on load, so a cache file cannot contradict the rules of Build.

// indexMagic starts a cache file that does not record its shard's path.
// Its last byte before the newline is the version of Build's rules:
// 2 skips repeated extensions and WebDataset's metadata names and reads
// contiguous files, so that an index an older version built is rebuilt
// rather than trusted. An index beside its shard is written so (its name
// is its shard's), byte for byte as older binaries write and read it.
const indexMagic = "DHIDX\x00\x02\n"

// indexMagicPath starts a cache file that records its shard's absolute
// path after the shard's mtime, so that datahelix cache can tell a stale
// index (shard gone or changed) from a live one: version 3, with the rules
// of 2. It is written in cache directories, under names of their own
// (pathIndexSuffix), which older binaries never open.
const indexMagicPath = "DHIDX\x00\x03\n"

// DefaultCacheDir is where datahelix keeps what it can rebuild — shard
// index caches (under its index directory), generated datasets and the
// benchmark's calibration — when no directory is given:
// $DATAHELIX_CACHE, else the user cache directory's datahelix, else a
// directory under the system's temporary one.
func DefaultCacheDir() string {
	if d := os.Getenv("DATAHELIX_CACHE"); d != "" {
		return d
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "datahelix")
	}
	return filepath.Join(os.TempDir(), "datahelix-cache")
}

// Dir is where the shard indexes of a cache directory (such as
// DefaultCacheDir) are kept: the cacheDir every command passes to
// OpenDataset, so that they share the indexes and none writes beside the
// shards.
func Dir(cacheRoot string) string { return filepath.Join(cacheRoot, "index") }

// indexSuffix ends the name of an index cache file (CachePath); its
// temporary files while it is written add ".tmp" and more.
const indexSuffix = ".dhidx"

// IsCacheFile reports whether the file name base is an index cache file
// or one being written, which a dataset directory listing skips.
func IsCacheFile(base string) bool {
	return strings.HasSuffix(base, indexSuffix) || strings.Contains(base, indexSuffix+".tmp")
}

// pathIndexSuffix ends the name of an index in a cache directory, which
// records its shard's path (indexMagicPath). Older binaries named theirs
// "<shard>.<hash>.dhidx" and wrote no path: the names differ so that jobs
// of both can share a cache directory without replacing each other's
// indexes (this binary does not read theirs: it builds its own once).
const pathIndexSuffix = ".v3" + indexSuffix

// abandonedIndexAfter is how long a temporary index file stays unchanged
// before Scan calls it stale: writing one takes
// milliseconds, so it was left by a killed process.
const abandonedIndexAfter = 24 * time.Hour

// errIndexCache reports a cache file that cannot be used; the index is
// then rebuilt from the shard.
var errIndexCache = errors.New("decode: unusable index cache")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// CachePath returns where the index of the shard at shardPath is cached:
// beside the shard, or in cacheDir under a name that keeps shards of the
// same base name in different directories apart
// ("<base>.<FNV-1a of the resolved absolute path>.v3.dhidx").
func CachePath(shardPath, cacheDir string) string {
	return Locate(shardPath, cacheDir).file
}

// Location is where the index of a shard is cached. A shard works it out
// once (Locate) and keeps it: resolving a path costs a few lstats, and
// loading the index again after it was let go must not look it up under
// another name when the job changed directory or a link changed.
type Location struct {
	file     string // the index file (CachePath)
	recorded string // the shard path it records: "" beside the shard, written as older binaries write it
}

// Locate returns where the index of the shard at shardPath is cached:
// beside the shard when cacheDir is "", else in cacheDir, named after
// the shard's resolved path (resolveShardPath).
func Locate(shardPath, cacheDir string) Location {
	if cacheDir == "" {
		return Location{file: shardPath + indexSuffix}
	}
	real := resolveShardPath(shardPath)
	loc := Location{file: filepath.Join(cacheDir, indexFileName(real))}
	if filepath.IsAbs(real) {
		loc.recorded = real
	}
	return loc
}

// resolveShardPath returns the absolute path of the shard at p with its
// symbolic links resolved, so that the path an index records names the
// shard from any working directory. filepath.Abs alone would join a
// working directory reached through a link with a p holding "..",
// lexically, into a path that names no file, and 'datahelix cache
// --prune' would then take a live index for one whose shard is gone.
// Where p cannot be resolved (it does not exist yet), it is the absolute
// path as filepath.Abs gives it; p cleaned when there is no working
// directory.
func resolveShardPath(p string) string {
	q, abs := p, filepath.Clean(p)
	if !filepath.IsAbs(p) {
		wd, err := os.Getwd()
		if err != nil {
			return abs
		}
		abs = filepath.Join(wd, p) // as filepath.Abs, without asking for the directory again
		// Joined by hand, not by filepath.Join, which would clean
		// "link/.." away before the link is resolved.
		q = wd + string(filepath.Separator) + p
	}
	if r, err := filepath.EvalSymlinks(q); err == nil && filepath.IsAbs(r) {
		return r
	}
	return abs
}

// indexFileName is the name of the index of the shard at abs in a cache
// directory.
func indexFileName(abs string) string {
	return fmt.Sprintf("%s.%016x%s", filepath.Base(abs), fnv64a(abs), pathIndexSuffix)
}

// fnv64a is the 64-bit FNV-1a hash of s.
func fnv64a(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

// encodeIndex serializes idx for a shard of the given size and mtime,
// without its path (indexMagic).
func encodeIndex(idx *Index, size, mtime int64) []byte {
	return encodeIndexOf(idx, "", size, mtime)
}

// encodeIndexOf serializes idx for the shard at path, of the given size
// and mtime: with the path (indexMagicPath) unless it is "".
func encodeIndexOf(idx *Index, path string, size, mtime int64) []byte {
	b := make([]byte, 0, 64+len(path)+len(idx.Entries)*48)
	if path == "" {
		b = append(b, indexMagic...)
	} else {
		b = append(b, indexMagicPath...)
	}
	b = binary.LittleEndian.AppendUint64(b, uint64(size))
	b = binary.LittleEndian.AppendUint64(b, uint64(mtime))
	if path != "" {
		b = binary.AppendUvarint(b, uint64(len(path)))
		b = append(b, path...)
	}
	b = binary.AppendUvarint(b, uint64(len(idx.Entries)))
	for _, e := range idx.Entries {
		b = binary.AppendUvarint(b, uint64(len(e.Members)))
		for _, m := range e.Members {
			b = binary.AppendUvarint(b, uint64(len(m.Name)))
			b = append(b, m.Name...)
			b = binary.AppendUvarint(b, uint64(m.Offset))
			b = binary.AppendUvarint(b, uint64(m.Size))
		}
	}
	b = binary.AppendUvarint(b, uint64(len(idx.Warnings)))
	for _, w := range idx.Warnings {
		b = binary.AppendUvarint(b, uint64(len(w)))
		b = append(b, w...)
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// cacheReader reads the fields of a cache file, remembering the first
// error; every count is checked against the bytes left before anything is
// allocated.
type cacheReader struct {
	b   []byte
	err error
}

func (r *cacheReader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: bad %s", errIndexCache, what)
	}
}

func (r *cacheReader) uvarint(what string) uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail(what)
		return 0
	}
	r.b = r.b[n:]
	return v
}

// count reads a count of items that each take at least minBytes.
func (r *cacheReader) count(what string, minBytes int) int {
	v := r.uvarint(what)
	if r.err == nil && v > uint64(len(r.b)/minBytes) {
		r.fail(what)
		return 0
	}
	return int(v)
}

func (r *cacheReader) str(what string) string {
	n := r.count(what, 1)
	if r.err != nil {
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

// decodeIndex parses a cache file written by encodeIndex or
// encodeIndexOf for a shard of the given size and mtime. It fails when
// the file is corrupt, belongs to another version of the shard, or
// describes members that do not fit the shard or break the grouping
// rules.
func decodeIndex(data []byte, size, mtime int64) (*Index, error) {
	if len(data) < len(indexMagic)+16+4 {
		return nil, fmt.Errorf("%w: not an index cache file", errIndexCache)
	}
	withPath := false
	switch string(data[:len(indexMagic)]) {
	case indexMagic:
	case indexMagicPath:
		withPath = true
	default:
		return nil, fmt.Errorf("%w: not an index cache file", errIndexCache)
	}
	body, sum := data[:len(data)-4], binary.LittleEndian.Uint32(data[len(data)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return nil, fmt.Errorf("%w: checksum mismatch", errIndexCache)
	}
	b := body[len(indexMagic):]
	if int64(binary.LittleEndian.Uint64(b)) != size || int64(binary.LittleEndian.Uint64(b[8:])) != mtime {
		return nil, fmt.Errorf("%w: stale (shard size or mtime changed)", errIndexCache)
	}
	r := &cacheReader{b: b[16:]}
	if withPath {
		r.str("shard path") // for datahelix cache (Scan)
	}
	idx := &Index{}
	n := r.count("entry count", 4)
	idx.Entries = make([]Entry, 0, n)
	var end int64 // end of the previous member's data
	for i := 0; i < n && r.err == nil; i++ {
		nm := r.count("member count", 3)
		if nm == 0 {
			r.fail("empty sample")
			break
		}
		e := Entry{Members: make([]Member, 0, nm)}
		var exts extIndex
		for j := 0; j < nm && r.err == nil; j++ {
			name := r.str("member name")
			off, sz := r.uvarint("member offset"), r.uvarint("member size")
			if r.err != nil {
				break
			}
			key, ext, ok := splitKey(name)
			switch {
			case !ok:
				r.fail("member name")
			case off < uint64(end) || off%tarBlock != 0 || off > uint64(size) || sz > uint64(size)-off:
				r.fail("member offset")
			case j > 0 && key != e.Key:
				r.fail("member key")
			case exts.find(e.Members, ext) >= 0:
				r.fail("repeated extension")
			}
			if r.err != nil {
				break
			}
			if j == 0 {
				e.Key, e.Offset = key, int64(off)
			}
			e.Members = append(e.Members, Member{Name: name, Ext: ext, Offset: int64(off), Size: int64(sz)})
			end = int64(off + sz)
			e.Size = end - e.Offset
		}
		if r.err == nil && i > 0 && idx.Entries[i-1].Key == e.Key {
			r.fail("sample grouping")
		}
		idx.Entries = append(idx.Entries, e)
	}
	nw := r.count("warning count", 1)
	for i := 0; i < nw && r.err == nil; i++ {
		idx.Warnings = append(idx.Warnings, r.str("warning"))
	}
	if r.err == nil && len(r.b) != 0 {
		r.fail("trailing bytes")
	}
	if r.err != nil {
		return nil, r.err
	}
	return idx, nil
}

// Load reads the index cached at l if it matches a shard of the given
// size and modification time (Unix ns). Any error means the index must
// be built again (Build) and saved (Save).
func (l Location) Load(size, mtime int64) (*Index, error) {
	data, err := os.ReadFile(l.file)
	if err != nil {
		return nil, err
	}
	return decodeIndex(data, size, mtime)
}

// Save writes idx, the index of a shard of the given size and
// modification time (Unix ns), to l atomically (temporary file, then
// rename) so that concurrent ranks opening the same shard never read a
// partial file. In a cache directory it records the shard's path. A
// reader that cannot save an index (the shard may sit on a read-only
// file system) keeps it in memory instead.
func (l Location) Save(idx *Index, size, mtime int64) error {
	p := l.file
	// A cache directory is made on first use (run passes <cache>/index,
	// which nothing else creates); beside a shard it exists already.
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(p), filepath.Base(p)+".tmp*")
	if err != nil {
		return err
	}
	_, err = f.Write(encodeIndexOf(idx, l.recorded, size, mtime))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), p)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}
