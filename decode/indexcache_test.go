package decode

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
)

// TestIndexCacheDirIsCreated checks that a cache directory that does not
// exist yet (run passes <cache>/index on a fresh machine) is made, so the
// second open reads the index from it instead of the whole tar again.
func TestIndexCacheDirIsCreated(t *testing.T) {
	data := writeTar(t, tar.FormatPAX, []tarFile{{name: "000001.txt", data: "one"}, {name: "000002.txt", data: "two"}})
	p := writeFile(t, t.TempDir(), "s.tar", data)
	cache := filepath.Join(t.TempDir(), "datahelix", "index")
	s1, err := OpenShard(p, cache)
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
	s2, err := OpenShard(p, cache)
	if err != nil {
		t.Fatal(err)
	}
	if !s2.FromCache() || s2.Len() != 2 {
		t.Errorf("second open: FromCache %v, %d samples; want the cached index of 2", s2.FromCache(), s2.Len())
	}
}

// TestIndexCacheName checks the names of indexes in a cache directory:
// "<base>.<FNV-1a of the absolute path>.v3.dhidx", the name older binaries
// used ("<base>.<hash>.dhidx", with hash/fnv) without ".v3", so that the
// two never read or replace each other's files.
func TestIndexCacheName(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "s.tar")
	h := fnv.New64a()
	h.Write([]byte(p))
	legacy := filepath.Join("cache", fmt.Sprintf("s.tar.%016x.dhidx", h.Sum64()))
	want := strings.TrimSuffix(legacy, ".dhidx") + ".v3.dhidx"
	if got := cachePath(p, "cache"); got != want {
		t.Errorf("cachePath = %s, want %s", got, want)
	}
	if got, ok := legacyCachePath(want); !ok || got != legacy {
		t.Errorf("legacyCachePath(%s) = %s, %v; want %s", want, got, ok, legacy)
	}
	if got := cachePath(p, ""); got != p+".dhidx" {
		t.Errorf("cachePath beside the shard = %s, want %s", got, p+".dhidx")
	}
}

// TestIndexCacheRecordsShardPath checks that an index in a cache
// directory records its shard's absolute path, given relative, and that
// one beside its shard is written as older binaries write it (format 2,
// no path).
func TestIndexCacheRecordsShardPath(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	writeFile(t, dir, "s.tar", writeTar(t, tar.FormatPAX, []tarFile{{name: "000001.txt", data: "one"}}))
	cache := filepath.Join(t.TempDir(), "index")
	if _, err := OpenShard("s.tar", cache); err != nil {
		t.Fatal(err)
	}
	p := cachePath("s.tar", cache)
	shard, _, _, state := readIndexHeader(p, make([]byte, indexHeaderMax))
	if want := filepath.Join(dir, "s.tar"); shard != want || state != IndexCurrent {
		t.Errorf("index %s records %q (%v), want %q", p, shard, state, want)
	}
	if _, err := OpenShard("s.tar", ""); err != nil {
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
	data := writeTar(t, tar.FormatPAX, []tarFile{{name: "a.txt", data: "AA"}, {name: "a.json", data: "{}"}, {name: "b.txt", data: "B"}})
	idx, err := buildIndex("s.tar", bytes.NewReader(data), int64(len(data)))
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

// TestIndexCacheCopiesLegacy checks that an index an older binary cached
// under its name is used (not rebuilt) and copied into this binary's
// name with the shard's path, the old file left for older binaries; and
// that one for another version of the shard is not used.
func TestIndexCacheCopiesLegacy(t *testing.T) {
	data := writeTar(t, tar.FormatPAX, []tarFile{{name: "a.txt", data: "A"}, {name: "b.txt", data: "B"}})
	p := writeFile(t, t.TempDir(), "s.tar", data)
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := buildIndex(p, bytes.NewReader(data), st.Size())
	if err != nil {
		t.Fatal(err)
	}
	// A legacy index of the first sample only: a rebuilt index has two.
	idx.entries = idx.entries[:1]
	cache := t.TempDir()
	legacy, _ := legacyCachePath(cachePath(p, cache))
	if err := os.WriteFile(legacy, encodeIndex(idx, st.Size(), st.ModTime().UnixNano()), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := OpenShard(p, cache)
	if err != nil {
		t.Fatal(err)
	}
	if !s.FromCache() || s.Len() != 1 {
		t.Errorf("open with a legacy index: FromCache %v, %d samples; want the legacy index of 1", s.FromCache(), s.Len())
	}
	if shard, _, _, state := readIndexHeader(cachePath(p, cache), make([]byte, indexHeaderMax)); shard != p || state != IndexCurrent {
		t.Errorf("copy of the legacy index records %q (%v), want %q", shard, state, p)
	}
	if _, err := os.Stat(legacy); err != nil {
		t.Errorf("legacy index removed: %v", err)
	}

	os.Remove(cachePath(p, cache))
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(p, later, later); err != nil {
		t.Fatal(err)
	}
	if s, err := OpenShard(p, cache); err != nil || s.FromCache() || s.Len() != 2 {
		t.Errorf("open with a stale legacy index: err %v; want the index rebuilt, 2 samples", err)
	}
}

// TestScanAndPruneIndexCache checks the state ScanIndexCache gives each
// file of an index cache directory, and that PruneIndexCache removes the
// stale ones and only those: an index whose shard exists and matches
// stays and is still read from the cache.
func TestScanAndPruneIndexCache(t *testing.T) {
	data, cache := t.TempDir(), t.TempDir()
	shard := func(name, content string) string {
		return writeFile(t, data, name, writeTar(t, tar.FormatPAX, []tarFile{{name: "k.txt", data: content}}))
	}
	current, gone, changed := shard("current.tar", "1"), shard("gone.tar", "2"), shard("changed.tar", "3")
	for _, p := range []string{current, gone, changed} {
		if _, err := OpenShard(p, cache); err != nil {
			t.Fatal(err)
		}
	}
	os.Remove(gone)
	shard("changed.tar", "rewritten") // another size
	cached := func(p string) string { return filepath.Base(cachePath(p, cache)) }
	// An index of an older binary; one without a path (written by code
	// that did not go through cachePath); one copied under another name.
	old := time.Now().Add(-abandonedIndexAfter - time.Hour)
	idx := &shardIndex{}
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
		writeFile(t, cache, name, b)
	}
	if err := os.Chtimes(filepath.Join(cache, cached(gone)+".tmp456"), old, old); err != nil {
		t.Fatal(err)
	}
	want := map[string]IndexState{
		cached(current):                      IndexCurrent,
		cached(gone):                         IndexShardGone,
		cached(changed):                      IndexShardChanged,
		"x.tar.0123456789abcdef.dhidx":       IndexOtherFormat,
		"y.tar.0123456789abcdef.v3.dhidx":    IndexUnchecked,
		"z.tar.0123456789abcdef.v3.dhidx":    IndexOtherFormat,
		"junk.tar.0123456789abcdef.v3.dhidx": IndexOtherFormat,
		cached(current) + ".tmp123":          IndexWriting,
		cached(gone) + ".tmp456":             IndexAbandoned,
	}
	ix, err := ScanIndexCache(cache)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]IndexState{}
	for _, x := range ix {
		got[filepath.Base(x.Path)] = x.State
		if fi, err := os.Stat(x.Path); err != nil || fi.Size() != x.Bytes {
			t.Errorf("%s: %d bytes, want its size (%v)", x.Path, x.Bytes, err)
		}
		if x.State == IndexCurrent && x.Shard != current {
			t.Errorf("%s: shard %q, want %q", x.Path, x.Shard, current)
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("states:\n got %v\nwant %v", got, want)
	}

	n, freed, err := PruneIndexCache(ix)
	var wantFreed int64
	removed := 0
	for _, x := range ix {
		if x.State.Removable() {
			wantFreed += x.Bytes
			removed++
		}
	}
	if err != nil || n != 6 || n != removed || freed != wantFreed {
		t.Errorf("PruneIndexCache: %d files, %d bytes, %v; want 6 files, %d bytes", n, freed, err, wantFreed)
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
	if s, err := OpenShard(current, cache); err != nil || !s.FromCache() {
		t.Errorf("reopen after prune: err %v; want the index read from the cache", err)
	}
	if ix, err := ScanIndexCache(filepath.Join(cache, "missing")); err != nil || len(ix) != 0 {
		t.Errorf("scan of a missing directory: %v, %v; want an empty cache", ix, err)
	}
}

// TestPruneIndexCacheKeepsReplaced checks that an index a job rebuilt
// after ScanIndexCache found it stale is not removed: prune removes the
// file it examined only.
func TestPruneIndexCacheKeepsReplaced(t *testing.T) {
	p := writeFile(t, t.TempDir(), "s.tar", writeTar(t, tar.FormatPAX, []tarFile{{name: "k.txt", data: "1"}}))
	cache := t.TempDir()
	if _, err := OpenShard(p, cache); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(p, later, later); err != nil {
		t.Fatal(err)
	}
	ix, err := ScanIndexCache(cache)
	if err != nil || len(ix) != 1 || ix[0].State != IndexShardChanged {
		t.Fatalf("scan: %+v, %v; want one index, shard changed", ix, err)
	}
	if s, err := OpenShard(p, cache); err != nil || s.FromCache() { // a job rebuilds it meanwhile
		t.Fatalf("reopen: %v", err)
	}
	if n, _, err := PruneIndexCache(ix); err != nil || n != 0 {
		t.Errorf("PruneIndexCache removed %d files (%v); want none, the index was rebuilt since the scan", n, err)
	}
	if s, err := OpenShard(p, cache); err != nil || !s.FromCache() {
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
	shard := writeFile(t, filepath.Join(real, "data"), "s.tar", writeTar(t, tar.FormatPAX, []tarFile{{name: "000001.txt", data: "one"}}))
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
	if _, err := OpenShard("../data/s.tar", cache); err != nil {
		t.Fatal(err)
	}
	ix, err := ScanIndexCache(cache)
	if err != nil {
		t.Fatal(err)
	}
	if len(ix) != 1 || ix[0].State != IndexCurrent || ix[0].Shard != shard {
		t.Fatalf("cache after opening ../data/s.tar from %s: %+v; want one current index of %s", link, ix, shard)
	}
	if n, _, err := PruneIndexCache(ix); n != 0 || err != nil {
		t.Errorf("prune removed %d files (%v); want none, the shard exists", n, err)
	}
	if s, err := OpenShard(shard, cache); err != nil || !s.FromCache() {
		t.Errorf("opening %s directly: err %v; want the index written for ../data/s.tar", shard, err)
	}

	// A dataset reached through a link (/scratch -> GPFS), indexed by a
	// binary that did not resolve links: its index, named after the path
	// through the link, is read (not rebuilt: a job of 20,000 shards
	// would read every tar again) and copied under the resolved name.
	// Until then it is current; then superseded, so --prune removes it
	// and never the resolved one.
	data := writeTar(t, tar.FormatPAX, []tarFile{{name: "a.txt", data: "A"}, {name: "b.txt", data: "B"}})
	two := writeFile(t, filepath.Join(real, "data"), "t.tar", data)
	if err := os.Symlink(real, filepath.Join(root, "via")); err != nil {
		t.Fatal(err)
	}
	viaLink := filepath.Join(root, "via", "data", "t.tar")
	st, err := os.Stat(two)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := buildIndex(two, bytes.NewReader(data), st.Size())
	if err != nil {
		t.Fatal(err)
	}
	idx.entries = idx.entries[:1] // a rebuilt index has two samples
	unresolved := filepath.Join(cache, indexFileName(viaLink))
	if err := os.WriteFile(unresolved, encodeIndexOf(idx, viaLink, st.Size(), st.ModTime().UnixNano()), 0o644); err != nil {
		t.Fatal(err)
	}
	resolved := cachePath(viaLink, cache)
	if resolved == unresolved || resolved != filepath.Join(cache, indexFileName(two)) {
		t.Fatalf("index of %s: %s, want %s named after %s", viaLink, resolved, indexFileName(two), two)
	}
	states := func() map[string]IndexState {
		t.Helper()
		ix, err = ScanIndexCache(cache)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]IndexState{}
		for _, x := range ix {
			got[x.Path] = x.State
		}
		return got
	}
	if got := states(); got[unresolved] != IndexCurrent {
		t.Errorf("index named through the link before this binary copied it: %v, want %v (it would be read)", got[unresolved], IndexCurrent)
	}
	if n, _, err := PruneIndexCache(ix); n != 0 || err != nil {
		t.Errorf("prune before the copy removed %d files (%v); want none", n, err)
	}
	s, err := OpenShard(viaLink, cache)
	if err != nil {
		t.Fatal(err)
	}
	if !s.FromCache() || s.Len() != 1 {
		t.Errorf("open %s with its index named through the link: FromCache %v, %d samples; want that index, of 1", viaLink, s.FromCache(), s.Len())
	}
	if got, _, _, state := readIndexHeader(resolved, make([]byte, indexHeaderBuf)); got != two || state != IndexCurrent {
		t.Errorf("copy %s records %q (%v), want %q", resolved, got, state, two)
	}
	want := map[string]IndexState{cachePath(shard, cache): IndexCurrent, resolved: IndexCurrent, unresolved: IndexSuperseded}
	if got := states(); !reflect.DeepEqual(got, want) {
		t.Errorf("states after the copy:\n got %v\nwant %v", got, want)
	}
	if !IndexSuperseded.Removable() {
		t.Errorf("%v is not removable", IndexSuperseded)
	}
	if n, _, err := PruneIndexCache(ix); n != 1 || err != nil {
		t.Errorf("prune removed %d files (%v); want the superseded one", n, err)
	}
	if _, err := os.Stat(unresolved); !os.IsNotExist(err) {
		t.Errorf("superseded index %s kept: %v", unresolved, err)
	}
	if s, err := OpenShard(viaLink, cache); err != nil || !s.FromCache() || s.Len() != 1 {
		t.Errorf("open after prune: err %v; want the copied index read", err)
	}

	// Older still: named without ".v3", after the path through the link.
	os.Remove(resolved)
	legacy, _ := legacyCachePath(unresolved)
	if err := os.WriteFile(legacy, encodeIndex(idx, st.Size(), st.ModTime().UnixNano()), 0o644); err != nil {
		t.Fatal(err)
	}
	if s, err := OpenShard(viaLink, cache); err != nil || !s.FromCache() || s.Len() != 1 {
		t.Errorf("open with a legacy index named through the link: err %v; want it read", err)
	}
}

// TestShardKeepsIndexLocation checks that a shard loads its index again,
// after it was let go, from where OpenShard found it: a link along its
// path changed meanwhile (to a copy of the shard) must not make it look
// under another name, rebuild the index and write another file.
func TestShardKeepsIndexLocation(t *testing.T) {
	root := t.TempDir()
	data := writeTar(t, tar.FormatPAX, []tarFile{{name: "a.txt", data: "A"}, {name: "b.txt", data: "B"}})
	var mtime time.Time
	for _, d := range []string{"one", "two"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
		p := writeFile(t, filepath.Join(root, d), "s.tar", data)
		if mtime.IsZero() {
			st, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			mtime = st.ModTime()
		} else if err := os.Chtimes(p, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(root, "link")
	if err := os.Symlink(filepath.Join(root, "one"), link); err != nil {
		t.Skipf("symlink: %v", err)
	}
	cache := filepath.Join(root, "cache")
	s, err := OpenShard(filepath.Join(link, "s.tar"), cache)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReadSample(0); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, "two"), link); err != nil {
		t.Fatal(err)
	}
	if smp, err := s.ReadSample(1); err != nil || smp.Key != "b" {
		t.Fatalf("read after the link changed: %v, %v", smp, err)
	}
	files, _ := filepath.Glob(filepath.Join(cache, "*"+indexSuffix))
	if len(files) != 1 || filepath.Base(files[0]) != indexFileName(filepath.Join(root, "one", "s.tar")) {
		t.Errorf("index files %v; want the one OpenShard wrote only", files)
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
	full := func(path string) []byte { return encodeIndexOf(&shardIndex{}, path, 7, 9) }
	const maxPath = indexHeaderMax - len(indexMagicPath) - 16 - 3 // its length takes 3 bytes
	ok := pathOf(200)
	long := pathOf(5000) // longer than ScanIndexCache's buffer
	overflow := append([]byte(indexMagicPath+strings.Repeat("\x00", 16)), bytes.Repeat([]byte{0xff}, 11)...)
	for _, c := range []struct {
		what  string
		shard string // whose index name the file gets
		data  []byte
		want  IndexState
	}{
		{"index", ok, full(ok), IndexCurrent},
		{"short path", pathOf(7), full(pathOf(7)), IndexCurrent},
		{"path beyond the buffer", long, full(long), IndexCurrent},
		{"longest path", pathOf(maxPath), full(pathOf(maxPath)), IndexCurrent},
		{"path a byte too long", pathOf(maxPath + 1), full(pathOf(maxPath + 1)), IndexOtherFormat},
		{"cut in the path", ok, full(ok)[:len(indexMagicPath)+16+2+100], IndexOtherFormat},
		{"cut after the path", ok, full(ok)[:len(indexMagicPath)+16+2+200], IndexCurrent},
		{"cut in the path's length", long, full(long)[:len(indexMagicPath)+16+1], IndexOtherFormat},
		{"cut after mtime", ok, full(ok)[:len(indexMagicPath)+16], IndexOtherFormat},
		{"cut in mtime", ok, full(ok)[:len(indexMagicPath)+15], IndexOtherFormat},
		{"path length overflows", ok, overflow, IndexOtherFormat},
		{"path length of 2^63", ok, append([]byte(indexMagicPath+strings.Repeat("\x00", 16)), binary.AppendUvarint(nil, 1<<63)...), IndexOtherFormat},
		{"no path recorded", ok, encodeIndex(&shardIndex{}, 7, 9), IndexUnchecked},
		{"empty", ok, nil, IndexUnchecked},
		{"another name", ok + "x", full(ok), IndexOtherFormat},
	} {
		p := filepath.Join(dir, indexFileName(c.shard))
		if err := os.WriteFile(p, c.data, 0o644); err != nil {
			t.Fatal(err)
		}
		shard, size, mtime, state := readIndexHeader(p, make([]byte, indexHeaderBuf))
		if state != c.want {
			t.Errorf("%s: state %v, want %v", c.what, state, c.want)
		}
		if state == IndexCurrent && (shard != c.shard || size != 7 || mtime != 9) {
			t.Errorf("%s: shard %.40q... size %d mtime %d, want %.40q... 7 9", c.what, shard, size, mtime, c.shard)
		}
		os.Remove(p)
	}
}

// TestIndexCacheOlderNameOfAnotherShard checks that the index an older
// binary named after a shard's unresolved path is only taken when that
// path names the same shard: "top/link/../ds/a.tar", with link pointing
// into real/, is real/ds/a.tar, while filepath.Abs reads it as
// top/ds/a.tar, another shard. Of equal size and modification time (the
// shards of one archive unpacked), its index passed for this one's, and
// the shard read its samples at the other's offsets, without an error.
func TestIndexCacheOlderNameOfAnotherShard(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"top/ds", "real/deep", "real/ds"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(root, "real", "deep"), filepath.Join(root, "top", "link")); err != nil {
		t.Skipf("symlink: %v", err)
	}
	dx := writeTar(t, tar.FormatPAX, []tarFile{{name: "x1.txt", data: "XXXXXXXX"}, {name: "x2.txt", data: "XX"}})
	dy := writeTar(t, tar.FormatPAX, []tarFile{{name: "y1.txt", data: "YY"}, {name: "y2.txt", data: "YYYYYYYY"}})
	if len(dx) != len(dy) {
		t.Fatalf("shards of %d and %d bytes; the test needs equal sizes", len(dx), len(dy))
	}
	x := writeFile(t, filepath.Join(root, "top", "ds"), "a.tar", dx)
	y := writeFile(t, filepath.Join(root, "real", "ds"), "a.tar", dy)
	st, err := os.Stat(x)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(y, st.ModTime(), st.ModTime()); err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(root, "cache")
	if _, err := OpenShard(x, cache); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{root + "/top/link/../ds/a.tar", y} {
		s, err := OpenShard(p, cache)
		if err != nil {
			t.Fatal(err)
		}
		smp, err := s.ReadSample(0)
		if err != nil || smp.Key != "y1" || s.FromCache() && p != y {
			t.Errorf("shard %s (real/ds/a.tar): sample 0 %q, from cache %v, err %v; want y1 from its own index", p, smp.Key, s.FromCache(), err)
		}
		s.Close()
	}
}
