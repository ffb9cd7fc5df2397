package decode

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"hash/fnv"
	"os"
	"path/filepath"
)

// The index cache file is little-endian binary:
//
//	magic "DHIDX\x00\x02\n"                    indexMagic
//	shard size, shard mtime (Unix ns)          int64 each
//	entry count                                uvarint
//	per entry: member count, then per member:  name (uvarint length + bytes),
//	                                           data offset, data size (uvarints)
//	warning count, warnings                    uvarint, strings
//	CRC-32C of everything above                uint32
//
// Keys, extensions and spans are recomputed from member names and offsets
// on load, so a cache file cannot contradict the rules of buildIndex.

// indexMagic starts a cache file. Its last byte before the newline is the
// version of buildIndex's rules: 2 skips repeated extensions and
// WebDataset's metadata names and reads contiguous files, so that an index
// an older version built is rebuilt rather than trusted.
const indexMagic = "DHIDX\x00\x02\n"

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

// IndexCacheDir is where the shard indexes of a cache directory (such as
// DefaultCacheDir) are kept: the cacheDir every command passes to
// OpenDataset, so that they share the indexes and none writes beside the
// shards.
func IndexCacheDir(cacheRoot string) string { return filepath.Join(cacheRoot, "index") }

// indexSuffix ends the name of an index cache file (cachePath); its
// temporary files while it is written add ".tmp" and more.
const indexSuffix = ".dhidx"

// errIndexCache reports a cache file that cannot be used; the index is
// then rebuilt from the shard.
var errIndexCache = errors.New("decode: unusable index cache")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// cachePath returns where the index of the shard at shardPath is cached:
// beside the shard, or in cacheDir under a name that keeps shards of the
// same base name in different directories apart.
func cachePath(shardPath, cacheDir string) string {
	if cacheDir == "" {
		return shardPath + indexSuffix
	}
	abs, err := filepath.Abs(shardPath)
	if err != nil {
		abs = shardPath
	}
	h := fnv.New64a()
	h.Write([]byte(abs))
	return filepath.Join(cacheDir, fmt.Sprintf("%s.%016x%s", filepath.Base(shardPath), h.Sum64(), indexSuffix))
}

// encodeIndex serializes idx for a shard of the given size and mtime.
func encodeIndex(idx *shardIndex, size, mtime int64) []byte {
	b := make([]byte, 0, 64+len(idx.entries)*48)
	b = append(b, indexMagic...)
	b = binary.LittleEndian.AppendUint64(b, uint64(size))
	b = binary.LittleEndian.AppendUint64(b, uint64(mtime))
	b = binary.AppendUvarint(b, uint64(len(idx.entries)))
	for _, e := range idx.entries {
		b = binary.AppendUvarint(b, uint64(len(e.Members)))
		for _, m := range e.Members {
			b = binary.AppendUvarint(b, uint64(len(m.Name)))
			b = append(b, m.Name...)
			b = binary.AppendUvarint(b, uint64(m.Offset))
			b = binary.AppendUvarint(b, uint64(m.Size))
		}
	}
	b = binary.AppendUvarint(b, uint64(len(idx.warnings)))
	for _, w := range idx.warnings {
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

// decodeIndex parses a cache file written by encodeIndex for a shard of
// the given size and mtime. It fails when the file is corrupt, belongs to
// another version of the shard, or describes members that do not fit the
// shard or break the grouping rules.
func decodeIndex(data []byte, size, mtime int64) (*shardIndex, error) {
	if len(data) < len(indexMagic)+16+4 || string(data[:len(indexMagic)]) != indexMagic {
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
	idx := &shardIndex{}
	n := r.count("entry count", 4)
	idx.entries = make([]IndexEntry, 0, n)
	var end int64 // end of the previous member's data
	for i := 0; i < n && r.err == nil; i++ {
		nm := r.count("member count", 3)
		if nm == 0 {
			r.fail("empty sample")
			break
		}
		e := IndexEntry{Members: make([]MemberEntry, 0, nm)}
		var exts extIndex
		for j := 0; j < nm && r.err == nil; j++ {
			name := r.str("member name")
			off, sz := r.uvarint("member offset"), r.uvarint("member size")
			if r.err != nil {
				break
			}
			key, ext, ok := SplitKey(name)
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
			e.Members = append(e.Members, MemberEntry{Name: name, Ext: ext, Offset: int64(off), Size: int64(sz)})
			end = int64(off + sz)
			e.Size = end - e.Offset
		}
		if r.err == nil && i > 0 && idx.entries[i-1].Key == e.Key {
			r.fail("sample grouping")
		}
		idx.entries = append(idx.entries, e)
	}
	nw := r.count("warning count", 1)
	for i := 0; i < nw && r.err == nil; i++ {
		idx.warnings = append(idx.warnings, r.str("warning"))
	}
	if r.err == nil && len(r.b) != 0 {
		r.fail("trailing bytes")
	}
	if r.err != nil {
		return nil, r.err
	}
	return idx, nil
}

// loadIndexCache reads the cached index at p if it matches the shard.
func loadIndexCache(p string, size, mtime int64) (*shardIndex, error) {
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	return decodeIndex(data, size, mtime)
}

// saveIndexCache writes the index atomically (temporary file, then rename)
// so that concurrent ranks opening the same shard never read a partial
// file.
func saveIndexCache(p string, idx *shardIndex, size, mtime int64) error {
	// A cache directory is made on first use (run passes <cache>/index,
	// which nothing else creates); beside a shard it exists already.
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(p), filepath.Base(p)+".tmp*")
	if err != nil {
		return err
	}
	_, err = f.Write(encodeIndex(idx, size, mtime))
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
