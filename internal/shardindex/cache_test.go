package shardindex

import (
	"archive/tar"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/datahelix/datahelix/internal/tartest"
)

// TestIndexCacheDirIsCreated checks that a cache directory that does not
// exist yet (run passes <cache>/index on a fresh machine) is made, so the
// second open reads the index from it instead of the whole tar again.
func TestIndexCacheDirIsCreated(t *testing.T) {
	data := tartest.Write(t, tar.FormatPAX, []tartest.File{{Name: "000001.txt", Data: "one"}, {Name: "000002.txt", Data: "two"}})
	p := tartest.WriteFile(t, t.TempDir(), "s.tar", data)
	cache := filepath.Join(t.TempDir(), "datahelix", "index")
	s1, err := openShard(p, cache)
	if err != nil {
		t.Fatal(err)
	}
	if s1.FromCache() || s1.CacheError() != nil {
		t.Fatalf("first open: FromCache %v, CacheError %v; want false, nil", s1.FromCache(), s1.CacheError())
	}
	files, err := filepath.Glob(filepath.Join(cache, "s.tar.*.v3.dhidx"))
	if err != nil || len(files) != 1 {
		t.Fatalf("index files in %s: %v, %v; want one", cache, files, err)
	}
	if _, err := os.Stat(p + ".dhidx"); !os.IsNotExist(err) {
		t.Errorf("an index was written beside the shard too (stat: %v)", err)
	}
	s2, err := openShard(p, cache)
	if err != nil {
		t.Fatal(err)
	}
	if !s2.FromCache() || s2.Len() != 2 {
		t.Errorf("second open: FromCache %v, %d samples; want the cached index of 2", s2.FromCache(), s2.Len())
	}
}

// TestIndexCacheName checks the names of indexes in a cache directory:
// "<base>.<FNV-1a of the absolute path>.v3.dhidx", the name older binaries
// used ("<base>.<hash>.dhidx", with hash/fnv) but with ".v3", so that the
// two never read or replace each other's files.
func TestIndexCacheName(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "s.tar")
	h := fnv.New64a()
	h.Write([]byte(p))
	legacy := filepath.Join("cache", fmt.Sprintf("s.tar.%016x.dhidx", h.Sum64()))
	want := strings.TrimSuffix(legacy, ".dhidx") + ".v3.dhidx"
	if got := CachePath(p, "cache"); got != want {
		t.Errorf("CachePath = %s, want %s", got, want)
	}
	if got := CachePath(p, ""); got != p+".dhidx" {
		t.Errorf("CachePath beside the shard = %s, want %s", got, p+".dhidx")
	}
}

// TestIndexCacheRecordsShardPath checks that an index in a cache
// directory records its shard's absolute path, given relative, and that
// one beside its shard is written as older binaries write it (format 2,
// no path).
func TestIndexCacheRecordsShardPath(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	tartest.WriteFile(t, dir, "s.tar", tartest.Write(t, tar.FormatPAX, []tartest.File{{Name: "000001.txt", Data: "one"}}))
	cache := filepath.Join(t.TempDir(), "index")
	if _, err := openShard("s.tar", cache); err != nil {
		t.Fatal(err)
	}
	p := CachePath("s.tar", cache)
	shard, _, _, state := readIndexHeader(p, make([]byte, indexHeaderMax))
	if want := filepath.Join(dir, "s.tar"); shard != want || state != headerRead {
		t.Errorf("index %s records %q (header %d), want %q", p, shard, state, want)
	}
	if _, err := openShard("s.tar", ""); err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile("s.tar.dhidx"); err != nil || !strings.HasPrefix(string(data), indexMagic) {
		t.Errorf("index beside the shard: %q..., %v; want format 2 (%q)", data[:min(len(data), 8)], err, indexMagic)
	}
}

// TestIndexCacheWithPathRoundTrip checks that an index recording its
// shard's path decodes to the same entries, and still fails for another
// version of the shard.
func TestIndexCacheWithPathRoundTrip(t *testing.T) {
	data := tartest.Write(t, tar.FormatPAX, []tartest.File{{Name: "a.txt", Data: "AA"}, {Name: "a.json", Data: "{}"}, {Name: "b.txt", Data: "B"}})
	idx, err := Build("s.tar", bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	enc := encodeIndexOf(idx, "/data/s.tar", int64(len(data)), 9)
	if !bytes.HasPrefix(enc, []byte(indexMagicPath)) {
		t.Fatalf("encoded with a path: starts %q, want %q", enc[:8], indexMagicPath)
	}
	back, err := decodeIndex(enc, int64(len(data)), 9)
	if err != nil || !reflect.DeepEqual(back, idx) {
		t.Errorf("decode: %+v, %v; want %+v", back, err, idx)
	}
	if _, err := decodeIndex(enc, int64(len(data)), 10); !errors.Is(err, errIndexCache) {
		t.Errorf("decode for another mtime: err %v, want errIndexCache", err)
	}
}

// TestScanAndPruneIndexCache checks which files of an index cache
// directory Scan calls stale, and that Prune removes those and only
// those: an index whose shard exists and matches stays and is still read
// from the cache, and so do a file being written and one recording no
// path.
func TestScanAndPruneIndexCache(t *testing.T) {
	data, cache := t.TempDir(), t.TempDir()
	shard := func(name, content string) string {
		return tartest.WriteFile(t, data, name, tartest.Write(t, tar.FormatPAX, []tartest.File{{Name: "k.txt", Data: content}}))
	}
	current, gone, changed := shard("current.tar", "1"), shard("gone.tar", "2"), shard("changed.tar", "3")
	for _, p := range []string{current, gone, changed} {
		if _, err := openShard(p, cache); err != nil {
			t.Fatal(err)
		}
	}
	os.Remove(gone)
	shard("changed.tar", "rewritten") // another size
	cached := func(p string) string { return filepath.Base(CachePath(p, cache)) }
	// An index of an older binary; one without a path (written by code
	// that did not go through CachePath); one copied under another name.
	old := time.Now().Add(-abandonedIndexAfter - time.Hour)
	idx := &Index{}
	files := map[string][]byte{
		"x.tar.0123456789abcdef.dhidx":       encodeIndex(idx, 1, 1),
		"y.tar.0123456789abcdef.v3.dhidx":    encodeIndex(idx, 1, 1),
		"z.tar.0123456789abcdef.v3.dhidx":    encodeIndexOf(idx, current, 1, 1),
		"junk.tar.0123456789abcdef.v3.dhidx": []byte("DHIDX"),
		cached(current) + ".tmp123":          []byte("partial"),
		cached(gone) + ".tmp456":             []byte("left by a killed job"),
		"notes.txt":                          []byte("not an index"),
	}
	for name, b := range files {
		tartest.WriteFile(t, cache, name, b)
	}
	if err := os.Chtimes(filepath.Join(cache, cached(gone)+".tmp456"), old, old); err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{ // listed file → stale
		cached(current):                      false,
		cached(gone):                         true,
		cached(changed):                      true,
		"x.tar.0123456789abcdef.dhidx":       true,
		"y.tar.0123456789abcdef.v3.dhidx":    false,
		"z.tar.0123456789abcdef.v3.dhidx":    true,
		"junk.tar.0123456789abcdef.v3.dhidx": true,
		cached(gone) + ".tmp456":             true,
	}
	ix, err := Scan(cache)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	var wantFreed int64
	for _, x := range ix {
		got[filepath.Base(x.Path)] = x.Stale
		if fi, err := os.Stat(x.Path); err != nil || fi.Size() != x.Bytes {
			t.Errorf("%s: %d bytes, want its size (%v)", x.Path, x.Bytes, err)
		}
		if filepath.Base(x.Path) == cached(current) && x.Shard != current {
			t.Errorf("%s: shard %q, want %q", x.Path, x.Shard, current)
		}
		if x.Stale {
			wantFreed += x.Bytes
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("stale:\n got %v\nwant %v", got, want)
	}

	n, freed, err := Prune(ix)
	if err != nil || n != 6 || freed != wantFreed {
		t.Errorf("Prune: %d files, %d bytes, %v; want 6 files, %d bytes", n, freed, err, wantFreed)
	}
	left, _ := os.ReadDir(cache)
	var names []string
	for _, e := range left {
		names = append(names, e.Name())
	}
	wantLeft := []string{cached(current), cached(current) + ".tmp123", "notes.txt", "y.tar.0123456789abcdef.v3.dhidx"}
	sort.Strings(wantLeft)
	if !reflect.DeepEqual(names, wantLeft) {
		t.Errorf("after prune the cache holds %v, want %v", names, wantLeft)
	}
	if s, err := openShard(current, cache); err != nil || !s.FromCache() {
		t.Errorf("reopen after prune: err %v; want the index read from the cache", err)
	}
	if ix, err := Scan(filepath.Join(cache, "missing")); err != nil || len(ix) != 0 {
		t.Errorf("scan of a missing directory: %v, %v; want an empty cache", ix, err)
	}
}

// TestIndexCacheOlderName checks that an index an older binary cached
// under its name ("<base>.<hash>.dhidx") is not read: the index is built
// again under this binary's name, and Scan calls the old one stale.
func TestIndexCacheOlderName(t *testing.T) {
	data := tartest.Write(t, tar.FormatPAX, []tartest.File{{Name: "a.txt", Data: "A"}, {Name: "b.txt", Data: "B"}})
	p := tartest.WriteFile(t, t.TempDir(), "s.tar", data)
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := Build(p, bytes.NewReader(data), st.Size())
	if err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	older := strings.TrimSuffix(CachePath(p, cache), pathIndexSuffix) + indexSuffix
	if err := os.WriteFile(older, encodeIndex(idx, st.Size(), st.ModTime().UnixNano()), 0o644); err != nil {
		t.Fatal(err)
	}
	if s, err := openShard(p, cache); err != nil || s.FromCache() || s.Len() != 2 {
		t.Fatalf("open beside an older binary's index: err %v; want the index built", err)
	}
	ix, err := Scan(cache)
	if err != nil || len(ix) != 2 {
		t.Fatalf("scan: %+v, %v; want two indexes", ix, err)
	}
	for _, x := range ix {
		if x.Stale != (x.Path == older) {
			t.Errorf("%s: stale %v, want %v", x.Path, x.Stale, x.Path == older)
		}
	}
}

// TestPruneIndexCacheKeepsReplaced checks that an index a job rebuilt
// after Scan found it stale is not removed: prune removes the
// file it examined only.
func TestPruneIndexCacheKeepsReplaced(t *testing.T) {
	p := tartest.WriteFile(t, t.TempDir(), "s.tar", tartest.Write(t, tar.FormatPAX, []tartest.File{{Name: "k.txt", Data: "1"}}))
	cache := t.TempDir()
	if _, err := openShard(p, cache); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(p, later, later); err != nil {
		t.Fatal(err)
	}
	ix, err := Scan(cache)
	if err != nil || len(ix) != 1 || !ix[0].Stale {
		t.Fatalf("scan: %+v, %v; want one stale index (shard changed)", ix, err)
	}
	if s, err := openShard(p, cache); err != nil || s.FromCache() { // a job rebuilds it meanwhile
		t.Fatalf("reopen: %v", err)
	}
	if n, _, err := Prune(ix); err != nil || n != 0 {
		t.Errorf("Prune removed %d files (%v); want none, the index was rebuilt since the scan", n, err)
	}
	if s, err := openShard(p, cache); err != nil || !s.FromCache() {
		t.Errorf("open after prune: err %v; want the rebuilt index read from the cache", err)
	}
}

// TestIndexCacheRecordsResolvedPath checks that the path an index records
// names its shard when the job ran in a directory reached through a
// symbolic link and named the shard with "..": resolved, not joined
// lexically (which names no file, so that 'cache' would call the index's
// shard gone and --prune would remove a live index), and that the shard
// named through a link shares the index of the shard named directly.
func TestIndexCacheRecordsResolvedPath(t *testing.T) {
	root := t.TempDir()
	real := filepath.Join(root, "real")
	for _, d := range []string{filepath.Join(real, "work"), filepath.Join(real, "data"), filepath.Join(root, "elsewhere")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	shard := tartest.WriteFile(t, filepath.Join(real, "data"), "s.tar", tartest.Write(t, tar.FormatPAX, []tartest.File{{Name: "000001.txt", Data: "one"}}))
	link := filepath.Join(root, "elsewhere", "work")
	if err := os.Symlink(filepath.Join(real, "work"), link); err != nil {
		t.Skipf("symlink: %v", err)
	}
	t.Chdir(link)
	t.Setenv("PWD", link) // as a shell that cd'd through the link leaves it
	if wd, err := os.Getwd(); err != nil || wd != link {
		t.Skipf("working directory reads %q (%v), not the link %q", wd, err, link)
	}
	if abs, _ := filepath.Abs("../data/s.tar"); abs == shard {
		t.Fatalf("filepath.Abs resolves the link here; the test shows nothing")
	}
	cache := filepath.Join(root, "cache")
	if _, err := openShard("../data/s.tar", cache); err != nil {
		t.Fatal(err)
	}
	ix, err := Scan(cache)
	if err != nil {
		t.Fatal(err)
	}
	if len(ix) != 1 || ix[0].Stale || ix[0].Shard != shard {
		t.Fatalf("cache after opening ../data/s.tar from %s: %+v; want one live index of %s", link, ix, shard)
	}
	if n, _, err := Prune(ix); n != 0 || err != nil {
		t.Errorf("prune removed %d files (%v); want none, the shard exists", n, err)
	}
	if s, err := openShard(shard, cache); err != nil || !s.FromCache() {
		t.Errorf("opening %s directly: err %v; want the index written for ../data/s.tar", shard, err)
	}
}

// TestReadIndexHeaderEdges reads the headers of index files cut short or
// recording paths of every length up to the bound: reading the header,
// then only the recorded path, must give the states reading the first
// indexHeaderMax bytes of the file gave.
func TestReadIndexHeaderEdges(t *testing.T) {
	dir := t.TempDir()
	// pathOf returns an absolute path of n bytes (n >= 7).
	pathOf := func(n int) string {
		m := n - len("/s.tar")
		return "/" + strings.Repeat("e", m%2) + strings.Repeat("d/", m/2) + "s.tar"
	}
	full := func(path string) []byte { return encodeIndexOf(&Index{}, path, 7, 9) }
	const maxPath = indexHeaderMax - len(indexMagicPath) - 16 - 3 // its length takes 3 bytes
	ok := pathOf(200)
	long := pathOf(5000) // longer than Scan's buffer
	overflow := append([]byte(indexMagicPath+strings.Repeat("\x00", 16)), bytes.Repeat([]byte{0xff}, 11)...)
	for _, c := range []struct {
		what  string
		shard string // whose index name the file gets
		data  []byte
		want  header
	}{
		{"index", ok, full(ok), headerRead},
		{"short path", pathOf(7), full(pathOf(7)), headerRead},
		{"path beyond the buffer", long, full(long), headerRead},
		{"longest path", pathOf(maxPath), full(pathOf(maxPath)), headerRead},
		{"path a byte too long", pathOf(maxPath + 1), full(pathOf(maxPath + 1)), headerBad},
		{"cut in the path", ok, full(ok)[:len(indexMagicPath)+16+2+100], headerBad},
		{"cut after the path", ok, full(ok)[:len(indexMagicPath)+16+2+200], headerRead},
		{"cut in the path's length", long, full(long)[:len(indexMagicPath)+16+1], headerBad},
		{"cut after mtime", ok, full(ok)[:len(indexMagicPath)+16], headerBad},
		{"cut in mtime", ok, full(ok)[:len(indexMagicPath)+15], headerBad},
		{"path length overflows", ok, overflow, headerBad},
		{"path length of 2^63", ok, append([]byte(indexMagicPath+strings.Repeat("\x00", 16)), binary.AppendUvarint(nil, 1<<63)...), headerBad},
		{"no path recorded", ok, encodeIndex(&Index{}, 7, 9), headerNone},
		{"empty", ok, nil, headerNone},
		{"another name", ok + "x", full(ok), headerBad},
	} {
		p := filepath.Join(dir, indexFileName(c.shard))
		if err := os.WriteFile(p, c.data, 0o644); err != nil {
			t.Fatal(err)
		}
		shard, size, mtime, state := readIndexHeader(p, make([]byte, indexHeaderBuf))
		if state != c.want {
			t.Errorf("%s: header %d, want %d", c.what, state, c.want)
		}
		if state == headerRead && (shard != c.shard || size != 7 || mtime != 9) {
			t.Errorf("%s: shard %.40q... size %d mtime %d, want %.40q... 7 9", c.what, shard, size, mtime, c.shard)
		}
		os.Remove(p)
	}
}
