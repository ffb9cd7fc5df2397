package decode

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
)

// DefaultMaxSampleBytes bounds the byte span ReadSample reads for one
// sample unless Shard.MaxSampleBytes says otherwise: a forged or absurd
// member size fails with ErrSampleTooLarge instead of allocating it.
const DefaultMaxSampleBytes = 1 << 30

// ErrSampleTooLarge reports a sample whose byte span exceeds the shard's
// MaxSampleBytes.
var ErrSampleTooLarge = errors.New("decode: sample too large")

// Shard is one WebDataset tar file with its index. Its methods are safe
// for concurrent use.
type Shard struct {
	// MaxSampleBytes is the largest sample span ReadSample will read;
	// OpenShard sets it to DefaultMaxSampleBytes.
	MaxSampleBytes int64

	path      string
	size      int64
	idx       *shardIndex
	fromCache bool
	cacheErr  error

	mu sync.Mutex
	f  *os.File // opened by the first ReadSample, released by Close
}

// OpenShard indexes the tar shard at path. The index is loaded from its
// cache when the cache matches the shard's size and modification time, and
// otherwise built by reading the tar headers and saved to the cache: beside
// the shard (path + ".dhidx") when cacheDir is empty, else in cacheDir.
// Failing to write the cache is not an error (the shard may sit on a
// read-only file system); CacheError reports it. A garbage or truncated
// shard is a *ShardError naming the file and the offset.
func OpenShard(path string, cacheDir string) (*Shard, error) {
	// Checked before opening: opening a FIFO for reading blocks until a
	// writer comes, which hung the job at start-up.
	if st, err := os.Stat(path); err == nil && !st.Mode().IsRegular() {
		return nil, fmt.Errorf("decode: open shard %s: not a regular file", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("decode: open shard: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("decode: open shard: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("decode: open shard %s: not a regular file", path)
	}
	s := &Shard{MaxSampleBytes: DefaultMaxSampleBytes, path: path, size: st.Size()}
	mtime := st.ModTime().UnixNano()
	cp := cachePath(path, cacheDir)
	if idx, err := loadIndexCache(cp, s.size, mtime); err == nil {
		s.idx, s.fromCache = idx, true
		return s, nil
	}
	s.idx, err = buildIndex(path, f, s.size)
	if err != nil {
		return nil, err
	}
	s.cacheErr = saveIndexCache(cp, s.idx, s.size, mtime)
	return s, nil
}

// Path returns the shard's file name as given to OpenShard.
func (s *Shard) Path() string { return s.path }

// Len returns the number of samples in the shard.
func (s *Shard) Len() int { return len(s.idx.entries) }

// Entry returns the index entry of sample i, 0 <= i < Len(). Its Members
// slice is shared with the shard and must not be modified.
func (s *Shard) Entry(i int) IndexEntry { return s.idx.entries[i] }

// Warnings lists what building the index noticed without failing: members
// skipped because they are not regular files, are sparse, have no key,
// have a name WebDataset keeps for metadata ("__meta__/...") or repeat an
// extension of their sample, keys reused by non-adjacent samples, and
// data after the end-of-archive marker.
func (s *Shard) Warnings() []string { return s.idx.warnings }

// FromCache reports whether the index was loaded from its cache file.
func (s *Shard) FromCache() bool { return s.fromCache }

// CacheError returns why the freshly built index could not be cached, or
// nil.
func (s *Shard) CacheError() error { return s.cacheErr }

// ReadSample reads sample i with a single ReadAt of its byte span and
// slices the members out of that buffer.
func (s *Shard) ReadSample(i int) (*Sample, error) {
	if i < 0 || i >= len(s.idx.entries) {
		return nil, fmt.Errorf("decode: shard %s: sample %d out of range [0,%d)", s.path, i, len(s.idx.entries))
	}
	e := &s.idx.entries[i]
	if e.Size > s.MaxSampleBytes {
		return nil, fmt.Errorf("%w: shard %s sample %q spans %d bytes, limit %d", ErrSampleTooLarge, s.path, e.Key, e.Size, s.MaxSampleBytes)
	}
	f, err := s.file()
	if err != nil {
		return nil, err
	}
	buf := make([]byte, e.Size)
	if n, err := f.ReadAt(buf, e.Offset); n < len(buf) {
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, &ShardError{Path: s.path, Offset: e.Offset + int64(n),
			Reason: fmt.Sprintf("short read of sample %q (shard changed since it was indexed?)", e.Key), Err: err}
	}
	smp := &Sample{Shard: s.path, Key: e.Key, Members: make([]Member, len(e.Members))}
	for j, m := range e.Members {
		lo := m.Offset - e.Offset
		hi := lo + m.Size
		smp.Members[j] = Member{Name: m.Name, Ext: m.Ext, Data: buf[lo:hi:hi]}
	}
	return smp, nil
}

// file returns the shard's open file, opening it on first use.
func (s *Shard) file() (*os.File, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		f, err := os.Open(s.path)
		if err != nil {
			return nil, fmt.Errorf("decode: read shard: %w", err)
		}
		s.f = f
	}
	return s.f, nil
}

// Close releases the shard's file handle; a later ReadSample reopens it.
func (s *Shard) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		return nil
	}
	err := s.f.Close()
	s.f = nil
	return err
}
