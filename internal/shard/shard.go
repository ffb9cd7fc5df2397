// Package shard reads the samples of one WebDataset tar shard by random
// access: Open indexes the shard (key → member offsets and sizes, cached
// by internal/shardindex), and ReadSample fetches a whole sample with one
// ReadAt. The process keeps a bounded number of shards' files and indexes
// loaded, letting go of the least recently read. decode.Dataset is a
// sorted set of these shards.
package shard

import (
	"container/list"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/datahelix/datahelix/internal/decoding"
	"github.com/datahelix/datahelix/internal/shardindex"
)

// defaultMaxSampleBytes bounds the byte span ReadSample reads for one
// sample unless Shard.MaxSampleBytes says otherwise: a forged or absurd
// member size fails with ErrSampleTooLarge instead of allocating it.
const defaultMaxSampleBytes = 1 << 30

// ErrSampleTooLarge reports a sample whose byte span exceeds the shard's
// MaxSampleBytes.
var ErrSampleTooLarge = errors.New("decode: sample too large")

// Shard is one WebDataset tar file with its index. Its methods are safe
// for concurrent use.
//
// A shard holds its sample count and warnings from Open on, but its
// index entries (a few hundred bytes a sample) only while it is being
// read: ReadSample and Entry load them with the file, from the index
// cache, and both are let go when the shard has not been read for a
// while (see ReadSample). A rank that reads a quarter of a dataset's
// shards thus holds about a quarter of its index, not all of it. An
// index that could not be cached stays in memory instead.
type Shard struct {
	// MaxSampleBytes is the largest sample span ReadSample will read;
	// Open sets it to defaultMaxSampleBytes.
	MaxSampleBytes int64

	// loadHook, when not nil, is called as a load of the shard begins
	// (wait true when the caller joins a load already in flight): for
	// tests, which set it on the shard they watch.
	loadHook func(wait bool)

	path      string
	index     shardindex.Location // where its index is cached, resolved once by Open
	size      int64
	mtime     int64 // Unix ns
	n         int   // samples
	warnings  []string
	kept      *shardindex.Index // the index when it could not be cached, else nil
	fromCache bool              // the index was loaded from its cache file
	cacheErr  error             // why the freshly built index could not be cached, or nil

	// Guarded by shardFiles.mu: open is the file and index while read;
	// loading is the load in flight, if any; closes counts Close calls, so
	// that a load that Close overtook is not kept.
	open    *shardFile
	loading *loadCall
	closes  int
}

// Open indexes the tar shard at path. The index is loaded from its
// cache when the cache matches the shard's size and modification time, and
// otherwise built by reading the tar headers and saved to the cache: beside
// the shard (path + ".dhidx") when cacheDir is empty, else in cacheDir.
// Failing to write the cache is not an error (the shard may sit on a
// read-only file system): the index is then kept in memory. A garbage or truncated
// shard is a *ShardError naming the file and the offset.
func Open(path string, cacheDir string) (*Shard, error) {
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
	s := &Shard{MaxSampleBytes: defaultMaxSampleBytes, path: path, index: shardindex.Locate(path, cacheDir), size: st.Size(), mtime: st.ModTime().UnixNano()}
	idx, err := s.index.Load(s.size, s.mtime)
	if err == nil {
		s.fromCache = true
	} else {
		if idx, err = shardindex.Build(path, f, s.size); err != nil {
			return nil, err
		}
		if s.cacheErr = s.index.Save(idx, s.size, s.mtime); s.cacheErr != nil {
			s.kept = idx // building it again for every read would cost more
		}
	}
	s.n, s.warnings = len(idx.Entries), idx.Warnings
	return s, nil
}

// Path returns the shard's file name as given to Open.
func (s *Shard) Path() string { return s.path }

// Len returns the number of samples in the shard.
func (s *Shard) Len() int { return s.n }

// Entry returns the index entry of sample i, 0 <= i < Len(). Its Members
// slice is shared with the shard and must not be modified. It fails as
// ReadSample does when the index cannot be loaded.
func (s *Shard) Entry(i int) (shardindex.Entry, error) {
	if i < 0 || i >= s.n {
		return shardindex.Entry{}, fmt.Errorf("decode: shard %s: sample %d out of range [0,%d)", s.path, i, s.n)
	}
	sf, err := s.acquire()
	if err != nil {
		return shardindex.Entry{}, err
	}
	defer s.release(sf)
	return sf.idx.Entries[i], nil
}

// Warnings lists what building the index noticed without failing: members
// skipped because they are not regular files, are sparse, have no key,
// have a name WebDataset keeps for metadata ("__meta__/...") or repeat an
// extension of their sample, keys reused by non-adjacent samples, and
// data after the end-of-archive marker.
func (s *Shard) Warnings() []string { return s.warnings }

// ReadSample reads sample i with a single ReadAt of its byte span and
// slices the members out of that buffer. The shard's file and index stay
// loaded for the next ReadSample until Close, or until too many shards of
// the process (256, or those of 262,144 samples) hold theirs while nobody
// reads them: the least recently read is then let go, and loaded again
// when read again, so that a dataset of many thousand shards runs the
// process out of neither file descriptors nor memory.
func (s *Shard) ReadSample(i int) (*decoding.Sample, error) {
	if i < 0 || i >= s.n {
		return nil, fmt.Errorf("decode: shard %s: sample %d out of range [0,%d)", s.path, i, s.n)
	}
	sf, err := s.acquire()
	if err != nil {
		return nil, err
	}
	defer s.release(sf)
	e := &sf.idx.Entries[i]
	if e.Size > s.MaxSampleBytes {
		return nil, fmt.Errorf("%w: shard %s sample %q spans %d bytes, limit %d", ErrSampleTooLarge, s.path, e.Key, e.Size, s.MaxSampleBytes)
	}
	buf := make([]byte, e.Size)
	if n, err := sf.f.ReadAt(buf, e.Offset); n < len(buf) {
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, &shardindex.ShardError{Path: s.path, Offset: e.Offset + int64(n),
			Reason: fmt.Sprintf("short read of sample %q (shard changed since it was indexed?)", e.Key), Err: err}
	}
	smp := &decoding.Sample{Shard: s.path, Key: e.Key, Members: make([]decoding.Member, len(e.Members))}
	for j, m := range e.Members {
		lo := m.Offset - e.Offset
		hi := lo + m.Size
		smp.Members[j] = decoding.Member{Name: m.Name, Ext: m.Ext, Data: buf[lo:hi:hi]}
	}
	return smp, nil
}

// maxIdleShardFiles bounds the shards whose file and index the process
// keeps loaded while no ReadSample reads them, over all shards of all
// datasets (ranks run as goroutines share the process's file
// descriptors), and maxIdleShardSamples the samples of their indexes.
// What is being read is never let go, so at most these plus the
// concurrent reads are loaded. The minIdleShardFiles most recently read
// stay loaded whatever their samples, so that a shard larger than
// maxIdleShardSamples is not loaded again for every read.
var (
	maxIdleShardFiles   = 256
	maxIdleShardSamples = 1 << 18
	minIdleShardFiles   = 16
)

// shardFile is a shard's open file and loaded index, and how many
// ReadSample calls use them.
type shardFile struct {
	f       *os.File
	idx     *shardindex.Index
	samples int // in idx, 0 when it is the shard's kept one, which stays anyway
	users   int
	idle    *list.Element // in shardFiles.idle while users == 0 and its shard holds it
}

// shardFiles holds the loaded shards nobody reads, least recently read
// first, and guards every Shard's open field and every shardFile.
var shardFiles struct {
	mu      sync.Mutex
	idle    list.List // of *Shard
	samples int       // in the indexes of the idle shards
}

// loadCall is a load of a shard's file and index in flight. done is
// closed when it ends, err then being why it failed, so that the readers
// who waited for it fail alike rather than each loading the shard again.
type loadCall struct {
	done chan struct{}
	err  error
}

// acquire returns the shard's open file and index, loading them when it
// has none, for one read; release gives them back. They are loaded
// without the lock held, so that a slow file system does not hold up
// other shards, and once: readers that come during a load wait for it,
// and get its error when it fails (a later read tries again). A load
// that a Close overtook serves its own read only: its waiters load again.
func (s *Shard) acquire() (*shardFile, error) {
	shardFiles.mu.Lock()
	for s.open == nil && s.loading != nil {
		c := s.loading
		shardFiles.mu.Unlock()
		if s.loadHook != nil {
			s.loadHook(true)
		}
		<-c.done
		if c.err != nil {
			return nil, c.err
		}
		shardFiles.mu.Lock()
	}
	if sf := s.open; sf != nil {
		s.use(sf)
		shardFiles.mu.Unlock()
		return sf, nil
	}
	c := &loadCall{done: make(chan struct{})}
	s.loading = c
	closes := s.closes
	shardFiles.mu.Unlock()
	return s.loadFor(c, closes)
}

// loadFor loads the shard for the load c, which began after closes Close
// calls, and ends c: the shard keeps what it loaded unless Close came
// meanwhile. A load that panics ends c too, failed, so that its waiters
// do not hang.
func (s *Shard) loadFor(c *loadCall, closes int) (sf *shardFile, err error) {
	ended := false
	defer func() {
		if !ended {
			err = fmt.Errorf("decode: shard %s: loading its file and index panicked", s.path)
		}
		shardFiles.mu.Lock()
		s.loading = nil
		if err == nil && s.closes == closes {
			s.open = sf
		}
		shardFiles.mu.Unlock()
		c.err = err
		close(c.done)
	}()
	if s.loadHook != nil {
		s.loadHook(false)
	}
	sf, err = s.load()
	ended = true
	return sf, err
}

// load opens the shard's file and loads its index: the one kept in
// memory, else the cached one, else one built again from the file (the
// cache file was removed or replaced). The file must still be the one
// Open indexed (same size and modification time): one replaced
// since would be read at the old index's offsets.
func (s *Shard) load() (*shardFile, error) {
	f, err := os.Open(s.path)
	if err != nil {
		return nil, fmt.Errorf("decode: read shard: %w", err)
	}
	idx, err := s.loadIndex(f)
	if err != nil {
		f.Close()
		return nil, err
	}
	sf := &shardFile{f: f, idx: idx, users: 1}
	if idx != s.kept {
		sf.samples = len(idx.Entries)
	}
	return sf, nil
}

// loadIndex checks that f is the file Open indexed and returns its
// index.
func (s *Shard) loadIndex(f *os.File) (*shardindex.Index, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("decode: read shard: %w", err)
	}
	if st.Size() != s.size || st.ModTime().UnixNano() != s.mtime {
		return nil, fmt.Errorf("%w: shard %s changed since it was opened (size %d, was %d; modified %s)",
			shardindex.ErrCorruptShard, s.path, st.Size(), s.size, st.ModTime().Format(time.RFC3339Nano))
	}
	if s.kept != nil {
		return s.kept, nil
	}
	idx, err := s.index.Load(s.size, s.mtime)
	if err != nil {
		if idx, err = shardindex.Build(s.path, f, s.size); err != nil {
			return nil, err
		}
		s.index.Save(idx, s.size, s.mtime) // as Open: a cache that cannot be written is no error
	}
	if len(idx.Entries) != s.n {
		return nil, fmt.Errorf("decode: shard %s: its index now holds %d samples, %d when it was opened", s.path, len(idx.Entries), s.n)
	}
	return idx, nil
}

// use counts one more user of sf, the shard's open file, taking it off
// the idle list. The caller holds shardFiles.mu.
func (s *Shard) use(sf *shardFile) {
	if sf.idle != nil {
		shardFiles.idle.Remove(sf.idle)
		shardFiles.samples -= sf.samples
		sf.idle = nil
	}
	sf.users++
}

// release ends one use of sf. When it was the last, sf joins the idle
// shards (or is closed, if Close let go of it meanwhile), and the least
// recently read idle shards beyond the bounds are let go.
func (s *Shard) release(sf *shardFile) {
	var closing []*os.File
	shardFiles.mu.Lock()
	if sf.users--; sf.users == 0 {
		if s.open == sf {
			sf.idle = shardFiles.idle.PushBack(s)
			shardFiles.samples += sf.samples
		} else {
			closing = append(closing, sf.f)
		}
	}
	for n := shardFiles.idle.Len(); n > max(maxIdleShardFiles, 0) || n > minIdleShardFiles && shardFiles.samples > maxIdleShardSamples; n-- {
		o := shardFiles.idle.Remove(shardFiles.idle.Front()).(*Shard)
		shardFiles.samples -= o.open.samples
		closing = append(closing, o.open.f)
		o.open = nil
	}
	shardFiles.mu.Unlock()
	for _, f := range closing {
		f.Close()
	}
}

// Close releases the shard's file handle and loaded index; a later
// ReadSample loads them again. A file that a ReadSample is reading is
// closed when that read ends.
func (s *Shard) Close() error {
	shardFiles.mu.Lock()
	s.closes++
	sf := s.open
	if sf == nil {
		shardFiles.mu.Unlock()
		return nil
	}
	s.open = nil
	if sf.users > 0 {
		shardFiles.mu.Unlock()
		return nil // its last release closes it
	}
	shardFiles.idle.Remove(sf.idle)
	shardFiles.samples -= sf.samples
	sf.idle = nil
	shardFiles.mu.Unlock()
	return sf.f.Close()
}
