package shardindex

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// shardsDir holds the shards GNU tar and Python's tarfile wrote, which
// package decode's tests read too.
const shardsDir = "../../decode/testdata/shards"

// tarFile is one member written by writeTar.
type tarFile struct {
	name string
	data string
	typ  byte // tar.TypeReg when zero; members of other types than TypeCont have no data
}

// writeTar returns a tar archive of files written with archive/tar in the
// given format.
func writeTar(t testing.TB, format tar.Format, files []tarFile) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := tar.NewWriter(&buf)
	for _, f := range files {
		typ := f.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		h := &tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.data)), Typeflag: typ, Format: format,
			ModTime: time.Unix(1700000000, 0)}
		hasData := typ == tar.TypeReg || typ == tar.TypeCont
		if !hasData {
			h.Size = 0
			h.Linkname = "target"
		}
		if err := w.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if hasData {
			if _, err := w.Write([]byte(f.data)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// writeFile writes data to dir/name and returns the path.
func writeFile(t testing.TB, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// gzipBytes returns data gzip-compressed.
func gzipBytes(t testing.TB, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// testShard is the index of a shard as decode.OpenShard gets it, for
// the tests of the cache.
type testShard struct {
	idx       *Index
	fromCache bool
	cacheErr  error
}

// openShard indexes the shard at path as decode.OpenShard does: from its
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
