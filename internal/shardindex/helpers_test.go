package shardindex

import (
	"fmt"
	"os"
)

// shardsDir holds the shards GNU tar and Python's tarfile wrote, which
// package decode's tests read too.
const shardsDir = "../../decode/testdata/shards"

// testShard is the index of a shard as shard.Open gets it, for
// the tests of the cache.
type testShard struct {
	idx       *Index
	fromCache bool
	cacheErr  error
}

// openShard indexes the shard at path as shard.Open does: from its
// cache at Locate(path, cacheDir) when it matches, else built and saved.
func openShard(path, cacheDir string) (*testShard, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	loc := Locate(path, cacheDir)
	size, mtime := st.Size(), st.ModTime().UnixNano()
	if idx, err := loc.Load(size, mtime); err == nil {
		return &testShard{idx: idx, fromCache: true}, nil
	}
	idx, err := Build(path, f, size)
	if err != nil {
		return nil, err
	}
	return &testShard{idx: idx, cacheErr: loc.Save(idx, size, mtime)}, nil
}

func (s *testShard) Len() int          { return len(s.idx.Entries) }
func (s *testShard) FromCache() bool   { return s.fromCache }
func (s *testShard) CacheError() error { return s.cacheErr }
func (s *testShard) Close()            {}

func (s *testShard) Entry(i int) (Entry, error) {
	if i < 0 || i >= len(s.idx.Entries) {
		return Entry{}, fmt.Errorf("sample %d out of range", i)
	}
	return s.idx.Entries[i], nil
}
