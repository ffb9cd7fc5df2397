package decode

import (
	"archive/tar"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

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

// sampleSummary renders a sample as "key: ext=data ext=data" for comparisons.
func sampleSummary(s *Sample) string {
	var parts []string
	for _, m := range s.Members {
		parts = append(parts, m.Ext+"="+string(m.Data))
	}
	return s.Key + ": " + strings.Join(parts, " ")
}

func TestSplitKey(t *testing.T) {
	tests := []struct {
		name, key, ext string
		ok             bool
	}{
		{"000123.mp4", "000123", "mp4", true},
		{"clips/000123.mp4", "clips/000123", "mp4", true},
		{"a.b/000123.JPG", "a.b/000123", "jpg", true},
		{"doc7.0.jpg", "doc7", "0.jpg", true},
		{"x/doc7.Seg.TXT", "x/doc7", "seg.txt", true},
		{"./000001.txt", "./000001", "txt", true},
		{"noext", "", "", false},
		{"dir/.hidden", "", "", false},
		{"trailingdot.", "", "", false},
		{"dir/", "", "", false},
		{"__meta__/info.json", "", "", false}, // WebDataset's metadata
		{"__key__.txt", "__key__", "txt", true},
		{"a/__meta__/x.txt", "a/__meta__/x", "txt", true},
	}
	for _, tt := range tests {
		key, ext, ok := SplitKey(tt.name)
		if key != tt.key || ext != tt.ext || ok != tt.ok {
			t.Errorf("SplitKey(%q) = %q, %q, %v; want %q, %q, %v", tt.name, key, ext, ok, tt.key, tt.ext, tt.ok)
		}
	}
}

func TestShardGoTar(t *testing.T) {
	for _, format := range []tar.Format{tar.FormatUSTAR, tar.FormatPAX, tar.FormatGNU} {
		t.Run(format.String(), func(t *testing.T) {
			long := strings.Repeat("n", 130) + "/000003.mp4"
			files := []tarFile{
				{name: "dir/", typ: tar.TypeDir},
				{name: "000001.mp4", data: strings.Repeat("v", 1000)},
				{name: "000001.TXT", data: "caption one"},
				{name: "000002.0.jpg", data: "img0"},
				{name: "000002.1.jpg", data: "img1"},
				{name: "000002.json", data: `{"a":1}`},
				{name: long, data: "long"},
			}
			if format == tar.FormatUSTAR {
				files = files[:len(files)-1] // USTAR cannot hold the long name
			}
			dir := t.TempDir()
			p := writeFile(t, dir, "s.tar", writeTar(t, format, files))
			s, err := OpenShard(p, "")
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			want := []string{
				"000001: mp4=" + strings.Repeat("v", 1000) + " txt=caption one",
				"000002: 0.jpg=img0 1.jpg=img1 json={\"a\":1}",
			}
			if format != tar.FormatUSTAR {
				want = append(want, strings.TrimSuffix(long, ".mp4")+": mp4=long")
			}
			if s.Len() != len(want) {
				t.Fatalf("Len() = %d, want %d", s.Len(), len(want))
			}
			for i, w := range want {
				smp, err := s.ReadSample(i)
				if err != nil {
					t.Fatal(err)
				}
				if got := sampleSummary(smp); got != w {
					t.Errorf("sample %d: got %q, want %q", i, got, w)
				}
				if smp.Shard != p {
					t.Errorf("sample %d: Shard = %q, want %q", i, smp.Shard, p)
				}
				e, err := s.Entry(i)
				if err != nil {
					t.Fatal(err)
				}
				last := e.Members[len(e.Members)-1]
				if e.Offset != e.Members[0].Offset || e.Offset+e.Size != last.Offset+last.Size {
					t.Errorf("sample %d: span [%d,+%d) does not cover members %+v", i, e.Offset, e.Size, e.Members)
				}
			}
			if len(s.Warnings()) != 0 {
				t.Errorf("Warnings() = %q, want none", s.Warnings())
			}
		})
	}
}

// TestShardExternalTars reads archives written by GNU tar (long names through
// ././@LongLink, a symlink, a member without extension) and by Python's
// tarfile in PAX format (long names, non-ASCII header fields), committed
// under testdata/shards.
func TestShardExternalTars(t *testing.T) {
	long := strings.Repeat("d", 120) + "/000003"
	tests := []struct {
		file     string
		want     []string
		warnings int
	}{
		{"gnu.tar", []string{
			"clips/000001: txt=a cat on a mat json={\"caption\":\"hello\"} bin=",
			"clips/000002: txt=second",
			long + ": seg.txt=long name text",
		}, 2},
		{"pax.tar", []string{
			"000010: jpg=\xff\xd8" + strings.Repeat("j", 100) + " txt=caption ünïcode",
			"s/" + strings.Repeat("e", 150) + "/000011: mp4=" + strings.Repeat("m", 1000),
			"000012: 0.jpg=0 1.jpg=1 txt=doc",
		}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			dir := t.TempDir()
			data, err := os.ReadFile(filepath.Join("testdata", "shards", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			p := writeFile(t, dir, tt.file, data)
			s, err := OpenShard(p, "")
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if s.Len() != len(tt.want) {
				t.Fatalf("Len() = %d, want %d", s.Len(), len(tt.want))
			}
			for i, w := range tt.want {
				smp, err := s.ReadSample(i)
				if err != nil {
					t.Fatal(err)
				}
				got := sampleSummary(smp)
				if strings.HasSuffix(w, "bin=") { // random payload: compare its length
					got = got[:strings.Index(got, "bin=")+4]
					if n := len(smp.Members[2].Data); n != 700 {
						t.Errorf("bin member has %d bytes, want 700", n)
					}
				}
				if got != w {
					t.Errorf("sample %d: got %q, want %q", i, got, w)
				}
			}
			if len(s.Warnings()) != tt.warnings {
				t.Errorf("Warnings() = %q, want %d", s.Warnings(), tt.warnings)
			}
		})
	}
}

func TestShardWarnings(t *testing.T) {
	files := []tarFile{
		{name: "000001.jpg", data: "a"},
		{name: "000001.jpg", data: "b"},
		{name: "000002.txt", data: "c"},
		{name: "000001.txt", data: "d"},
		{name: "link.txt", typ: tar.TypeSymlink},
		{name: "README", data: "no key"},
	}
	p := writeFile(t, t.TempDir(), "w.tar", writeTar(t, tar.FormatPAX, files))
	s, err := OpenShard(p, "")
	if err != nil {
		t.Fatal(err)
	}
	if s.Len() != 3 {
		t.Errorf("Len() = %d, want 3 (000001, 000002, 000001 again)", s.Len())
	}
	want := []string{"repeats extension", "reuses the key", "not a regular file", "no WebDataset key"}
	got := s.Warnings()
	if len(got) != len(want) {
		t.Fatalf("Warnings() = %q, want %d warnings", got, len(want))
	}
	for i, w := range want {
		if !strings.Contains(got[i], w) {
			t.Errorf("warning %d = %q, want it to contain %q", i, got[i], w)
		}
	}
}

func TestShardCorrupt(t *testing.T) {
	good := writeTar(t, tar.FormatPAX, []tarFile{
		{name: "000001.txt", data: strings.Repeat("x", 600)},
		{name: "000002.txt", data: "y"},
	})
	// Layout (short ASCII names need no PAX records): header 0, data
	// 512..1112, header 1536, data 2048..2049, end marker from 2560.
	garbage := bytes.Repeat([]byte("garbage!"), 200)
	tests := []struct {
		name   string
		data   []byte
		offset int64
		reason string
	}{
		{"empty", nil, 0, "empty file"},
		{"garbage", garbage, 0, "not a tar archive (invalid tar header)"},
		{"short text", []byte("# notes\n"), 0, "not a tar archive (8 bytes, shorter than one tar header)"},
		{"cut in first data", good[:800], 512, "runs past the end"},
		{"cut in second header", good[:1600], 1536, "truncated"},
		{"cut before end marker", good[:2560], 2560, "without end-of-archive marker"},
		{"garbage second header", append(append([]byte{}, good[:1536]...), garbage...), 1536, "invalid tar header"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := writeFile(t, t.TempDir(), "bad.tar", tt.data)
			_, err := OpenShard(p, "")
			var se *ShardError
			if !errors.As(err, &se) || !errors.Is(err, ErrCorruptShard) {
				t.Fatalf("OpenShard error = %v, want a *ShardError wrapping ErrCorruptShard", err)
			}
			if se.Path != p || se.Offset != tt.offset || !strings.Contains(err.Error(), tt.reason) {
				t.Errorf("got %q (offset %d), want path %s, offset %d, reason containing %q", err, se.Offset, p, tt.offset, tt.reason)
			}
		})
	}
	// The intact archive with one trailing zero block only is accepted.
	p := writeFile(t, t.TempDir(), "ok.tar", good[:3072])
	if s, err := OpenShard(p, ""); err != nil || s.Len() != 2 {
		t.Errorf("archive with one end block: err %v", err)
	}
}

func TestShardIndexCache(t *testing.T) {
	dir := t.TempDir()
	data := writeTar(t, tar.FormatPAX, []tarFile{{name: "a/000001.txt", data: "one"}, {name: "a/000002.txt", data: "two"}, {name: "b", data: "no key"}})
	p := writeFile(t, dir, "s.tar", data)
	s1, err := OpenShard(p, "")
	if err != nil {
		t.Fatal(err)
	}
	if s1.FromCache() || s1.CacheError() != nil {
		t.Fatalf("first open: FromCache %v, CacheError %v; want false, nil", s1.FromCache(), s1.CacheError())
	}
	if _, err := os.Stat(p + ".dhidx"); err != nil {
		t.Fatalf("cache beside shard: %v", err)
	}
	s2, err := OpenShard(p, "")
	if err != nil {
		t.Fatal(err)
	}
	if !s2.FromCache() {
		t.Error("second open did not use the cache")
	}
	for i := range max(s1.Len(), s2.Len()) {
		e1, err1 := s1.Entry(i)
		e2, err2 := s2.Entry(i)
		if err1 != nil || err2 != nil || !reflect.DeepEqual(e1, e2) {
			t.Errorf("cached index entry %d differs:\n got %+v (%v)\nwant %+v (%v)", i, e2, err2, e1, err1)
		}
	}
	if !reflect.DeepEqual(s1.Warnings(), s2.Warnings()) {
		t.Errorf("cached warnings differ:\n got %q\nwant %q", s2.Warnings(), s1.Warnings())
	}

	// A new mtime invalidates the cache.
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(p, later, later); err != nil {
		t.Fatal(err)
	}
	if s3, err := OpenShard(p, ""); err != nil || s3.FromCache() {
		t.Errorf("after touch: FromCache %v, err %v; want rebuilt", s3 != nil && s3.FromCache(), err)
	}

	// A corrupt cache file is rebuilt, not trusted.
	if err := os.WriteFile(p+".dhidx", []byte(indexMagic+"junk junk junk junk junk"), 0o644); err != nil {
		t.Fatal(err)
	}
	if s4, err := OpenShard(p, ""); err != nil || s4.FromCache() || s4.Len() != 2 {
		t.Errorf("corrupt cache: err %v", err)
	}

	// A cache directory keeps shards of the same base name apart.
	cache := t.TempDir()
	other := filepath.Join(dir, "sub")
	os.Mkdir(other, 0o755)
	p2 := writeFile(t, other, "s.tar", writeTar(t, tar.FormatPAX, []tarFile{{name: "x.txt", data: "1"}}))
	for _, q := range []string{p, p2} {
		if _, err := OpenShard(q, cache); err != nil {
			t.Fatal(err)
		}
	}
	entries, _ := os.ReadDir(cache)
	if len(entries) != 2 {
		t.Errorf("cache dir holds %d files, want 2", len(entries))
	}
	if s5, err := OpenShard(p2, cache); err != nil || !s5.FromCache() || s5.Len() != 1 {
		t.Errorf("reopen from cache dir: err %v", err)
	}
}

func TestShardReadOnlyCache(t *testing.T) {
	p := writeFile(t, t.TempDir(), "s.tar", writeTar(t, tar.FormatPAX, []tarFile{{name: "x.txt", data: "1"}}))
	// A missing cache directory is made on first use; one under a
	// regular file cannot be.
	notDir := writeFile(t, t.TempDir(), "file", []byte("x"))
	s, err := OpenShard(p, filepath.Join(notDir, "dir"))
	if err != nil {
		t.Fatal(err)
	}
	if s.CacheError() == nil {
		t.Error("CacheError() = nil for an unwritable cache dir")
	}
	if smp, err := s.ReadSample(0); err != nil || string(smp.Members[0].Data) != "1" {
		t.Errorf("ReadSample after failed cache write: %v", err)
	}
}

func TestShardReadSampleLimits(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "s.tar", writeTar(t, tar.FormatPAX, []tarFile{{name: "x.txt", data: strings.Repeat("z", 5000)}}))
	s, err := OpenShard(p, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReadSample(1); err == nil {
		t.Error("ReadSample(1) on a one-sample shard succeeded")
	}
	s.MaxSampleBytes = 4096
	if _, err := s.ReadSample(0); !errors.Is(err, ErrSampleTooLarge) {
		t.Errorf("ReadSample over the limit: err %v, want ErrSampleTooLarge", err)
	}
	s.MaxSampleBytes = DefaultMaxSampleBytes
	// Truncating the shard after indexing gives a ShardError on read.
	s.Close()
	if err := os.Truncate(p, 1000); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReadSample(0); !errors.Is(err, ErrCorruptShard) {
		t.Errorf("ReadSample of a truncated shard: err %v, want ErrCorruptShard", err)
	}
}

func TestMembersDoNotAlias(t *testing.T) {
	p := writeFile(t, t.TempDir(), "s.tar", writeTar(t, tar.FormatPAX, []tarFile{{name: "k.a", data: "AAAA"}, {name: "k.b", data: "BBBB"}}))
	s, err := OpenShard(p, "")
	if err != nil {
		t.Fatal(err)
	}
	smp, err := s.ReadSample(0)
	if err != nil {
		t.Fatal(err)
	}
	_ = append(smp.Members[0].Data, "!!!!"...)
	if got := string(smp.Members[1].Data); got != "BBBB" {
		t.Errorf("appending to member 0 changed member 1 to %q", got)
	}
}

func TestOpenDataset(t *testing.T) {
	dir := t.TempDir()
	for i := 2; i >= 0; i-- {
		writeFile(t, dir, fmt.Sprintf("shard-%d.tar", i), writeTar(t, tar.FormatPAX, []tarFile{{name: fmt.Sprintf("%d.txt", i), data: "t"}}))
	}
	writeFile(t, dir, "notes.md", []byte("not a shard"))
	d, err := OpenDataset(dir, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var names []string
	for _, s := range d.Shards {
		names = append(names, filepath.Base(s.Path()))
	}
	if want := []string{"shard-0.tar", "shard-1.tar", "shard-2.tar"}; !reflect.DeepEqual(names, want) {
		t.Errorf("shards = %v, want %v", names, want)
	}
	if d.Len() != 3 {
		t.Errorf("Len() = %d, want 3", d.Len())
	}
	g, err := OpenDataset(filepath.Join(dir, "shard-[12].tar"), t.TempDir())
	if err != nil || len(g.Shards) != 2 {
		t.Errorf("glob: %v", err)
	}
	one, err := OpenDataset(filepath.Join(dir, "shard-1.tar"), t.TempDir())
	if err != nil || len(one.Shards) != 1 {
		t.Errorf("single file: %v", err)
	}
	for _, bad := range []string{"", filepath.Join(dir, "missing"), filepath.Join(dir, "*.zip"), t.TempDir()} {
		if _, err := OpenDataset(bad, ""); !errors.Is(err, ErrNoShards) {
			t.Errorf("OpenDataset(%q): err %v, want ErrNoShards", bad, err)
		}
	}
	writeFile(t, dir, "shard-3.tar", []byte("corrupt"))
	if _, err := OpenDataset(dir, t.TempDir()); !errors.Is(err, ErrCorruptShard) || !strings.Contains(err.Error(), "shard-3.tar") {
		t.Errorf("corrupt shard in dataset: err %v", err)
	}
}

// TestOpenDatasetFIFO puts a FIFO named like a shard in a dataset
// directory: opening it for reading blocked until a writer came, which
// hung every rank at start-up. It must be refused at once.
func TestOpenDatasetFIFO(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "shard-0.tar", writeTar(t, tar.FormatPAX, []tarFile{{name: "0.txt", data: "t"}}))
	fifo := filepath.Join(dir, "shard-1.tar")
	if err := unix.Mkfifo(fifo, 0o644); err != nil {
		t.Skip("no FIFOs here:", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := OpenDataset(dir, t.TempDir())
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), fifo+": not a regular file") {
			t.Errorf("got %v, want the FIFO refused as not a regular file", err)
		}
	case <-time.After(10 * time.Second):
		os.WriteFile(fifo, nil, 0o644) // unblock the open
		t.Fatal("OpenDataset blocked on a FIFO")
	}
}

// fuzzTarSeeds returns real archives as seeds for the tar fuzzers: the
// committed GNU tar and Python tarfile shards and archive/tar output.
func fuzzTarSeeds(f *testing.F) [][]byte {
	var seeds [][]byte
	for _, name := range []string{"gnu.tar", "pax.tar", "gnutar-links-sparse.tar", "gnutar-posix-sparse.tar"} {
		data, err := os.ReadFile(filepath.Join("testdata", "shards", name))
		if err != nil {
			f.Fatal(err)
		}
		seeds = append(seeds, data)
	}
	for _, format := range []tar.Format{tar.FormatUSTAR, tar.FormatPAX, tar.FormatGNU} {
		seeds = append(seeds, writeTar(f, format, []tarFile{{name: "000001.mp4", data: "video"}, {name: "000001.txt", data: "t"}, {name: "x/000002.0.jpg", data: "i"}}))
	}
	// Two shards joined with cat: a warning for the data after the end.
	return append(seeds, append(append([]byte{}, seeds[len(seeds)-1]...), seeds[1]...))
}

// checkIndex verifies the invariants every built or loaded index keeps.
func checkIndex(t *testing.T, idx *shardIndex, size int64) {
	var end int64
	for i, e := range idx.entries {
		if len(e.Members) == 0 {
			t.Fatalf("entry %d has no members", i)
		}
		if i > 0 && idx.entries[i-1].Key == e.Key {
			t.Fatalf("entries %d and %d share key %q", i-1, i, e.Key)
		}
		for _, m := range e.Members {
			key, ext, ok := SplitKey(m.Name)
			if !ok || key != e.Key || ext != m.Ext {
				t.Fatalf("member %q in sample %q: key %q ext %q ok %v", m.Name, e.Key, key, ext, ok)
			}
			if m.Offset < end || m.Size < 0 || m.Offset+m.Size > size {
				t.Fatalf("member %q at [%d,+%d) overlaps or leaves [%d,%d)", m.Name, m.Offset, m.Size, end, size)
			}
			end = m.Offset + m.Size
		}
		if e.Offset != e.Members[0].Offset || e.Offset+e.Size != end {
			t.Fatalf("entry %q span [%d,+%d) does not match its members", e.Key, e.Offset, e.Size)
		}
	}
}

// FuzzBuildIndex feeds arbitrary bytes to the tar index builder: it must
// return an index that keeps its invariants and survives the cache round
// trip, or an error — never panic.
func FuzzBuildIndex(f *testing.F) {
	for _, s := range fuzzTarSeeds(f) {
		f.Add(s)
	}
	// A gzip-compressed shard, refused by its signature.
	f.Add(gzipBytes(f, fuzzTarSeeds(f)[1]))
	f.Fuzz(func(t *testing.T, data []byte) {
		idx, err := buildIndex("fuzz.tar", bytes.NewReader(data), int64(len(data)))
		if err != nil {
			if !errors.Is(err, ErrCorruptShard) {
				t.Fatalf("error %v does not wrap ErrCorruptShard", err)
			}
			return
		}
		checkIndex(t, idx, int64(len(data)))
		back, err := decodeIndex(encodeIndex(idx, int64(len(data)), 7), int64(len(data)), 7)
		if err != nil {
			t.Fatalf("cache round trip: %v", err)
		}
		if len(back.entries) != len(idx.entries) || len(back.warnings) != len(idx.warnings) {
			t.Fatalf("cache round trip: %d entries, %d warnings; want %d, %d", len(back.entries), len(back.warnings), len(idx.entries), len(idx.warnings))
		}
		if len(idx.entries) > 0 && !reflect.DeepEqual(back.entries, idx.entries) {
			t.Fatalf("cache round trip changed the entries")
		}
	})
}

// FuzzDecodeIndex feeds arbitrary bytes to the index cache reader, seeded
// with the caches of real shards: a loaded index keeps its invariants.
func FuzzDecodeIndex(f *testing.F) {
	const size, mtime = 1 << 20, 99
	for _, s := range fuzzTarSeeds(f) {
		idx, err := buildIndex("seed.tar", bytes.NewReader(s), int64(len(s)))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(encodeIndex(idx, size, mtime))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) >= len(indexMagic)+20 {
			// Most mutations break the checksum; fix it up half of the
			// time so the parser behind it is exercised too.
			if data[len(data)-1]&1 == 0 {
				body := data[:len(data)-4]
				binary.LittleEndian.PutUint32(data[len(data)-4:], crc32.Checksum(body, castagnoli))
			}
		}
		idx, err := decodeIndex(data, size, mtime)
		if err != nil {
			return
		}
		checkIndex(t, idx, size)
	})
}

// TestIndexOneLargeSample indexes a shard whose one sample has 100,000
// members of distinct extensions, and loads its index cache: looking for
// a repeated extension must not compare each member with all before it
// (minutes at a million members), and a repeat late in the sample is
// still found, the first member staying.
func TestIndexOneLargeSample(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 50 MB shard in memory")
	}
	const n = 100_000
	files := make([]tarFile, 0, n+1)
	for i := range n {
		files = append(files, tarFile{name: fmt.Sprintf("k.%d.jpg", i)})
	}
	files = append(files, tarFile{name: "k.77777.jpg", data: "again"})
	data := writeTar(t, tar.FormatGNU, files)
	start := time.Now()
	idx, err := buildIndex("big.tar", bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	built := time.Since(start)
	if len(idx.entries) != 1 || len(idx.entries[0].Members) != n || len(idx.warnings) != 1 || !strings.Contains(idx.warnings[0], `repeats extension "77777.jpg"`) {
		t.Fatalf("%d samples, %d members, warnings %q; want 1 sample of %d members and the repeat skipped", len(idx.entries), len(idx.entries[0].Members), idx.warnings, n)
	}
	start = time.Now()
	if _, err := decodeIndex(encodeIndex(idx, int64(len(data)), 1), int64(len(data)), 1); err != nil {
		t.Fatal(err)
	}
	// Linear work takes well under a second; comparing each member with
	// all before it, about ten seconds each.
	if loaded := time.Since(start); built > 3*time.Second || loaded > 3*time.Second {
		t.Errorf("built the index in %v and loaded its cache in %v: want linear time", built, loaded)
	}
	// A cache whose large sample repeats an extension is refused.
	idx.entries[0].Members[n-1].Name = "k.5.jpg"
	if _, err := decodeIndex(encodeIndex(idx, int64(len(data)), 1), int64(len(data)), 1); err == nil || !strings.Contains(err.Error(), "repeated extension") {
		t.Errorf("loading a cache that repeats extension 5.jpg: %v, want a repeated extension error", err)
	}
}

// openFDs counts the file descriptors this process has open.
func openFDs(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot count open files: %v", err)
	}
	return len(entries)
}

// manyShards writes n shards of two samples each to a new directory and
// returns it; sample j of shard i holds "i-j".
func manyShards(t *testing.T, n int) string {
	t.Helper()
	dir := t.TempDir()
	for i := range n {
		writeFile(t, dir, fmt.Sprintf("s%03d.tar", i), writeTar(t, tar.FormatPAX, []tarFile{
			{name: "a.txt", data: fmt.Sprintf("%d-0", i)}, {name: "b.txt", data: fmt.Sprintf("%d-1", i)}}))
	}
	return dir
}

// TestShardFilesBounded reads a sample of every shard of a dataset with
// more shards than the process keeps open: every shard kept its file
// open until Close, so that a rank reading a dataset of 20,000 shards
// failed with "too many open files" once it had read enough of them.
func TestShardFilesBounded(t *testing.T) {
	defer func(n int) { maxIdleShardFiles = n }(maxIdleShardFiles)
	maxIdleShardFiles = 3
	ds, err := OpenDataset(manyShards(t, 12), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	before := openFDs(t)
	for round := range 2 { // the second reopens what the first closed
		for i, sh := range ds.Shards {
			for j := range sh.Len() {
				smp, err := sh.ReadSample(j)
				if err != nil {
					t.Fatalf("round %d: shard %d sample %d: %v", round, i, j, err)
				}
				if got, want := string(smp.Members[0].Data), fmt.Sprintf("%d-%d", i, j); got != want {
					t.Fatalf("round %d: shard %d sample %d holds %q, want %q", round, i, j, got, want)
				}
			}
			if open := openFDs(t) - before; open > maxIdleShardFiles {
				t.Fatalf("round %d: after reading %d shards, %d more files open, want at most %d", round, i+1, open, maxIdleShardFiles)
			}
		}
	}
	if err := ds.Close(); err != nil {
		t.Fatal(err)
	}
	if open := openFDs(t) - before; open > 0 {
		t.Errorf("after Close: %d more files open than before reading, want 0", open)
	}
}

// TestShardFilesConcurrent reads shards from several goroutines while
// files are closed for room and by Close: every read must get its bytes,
// and no file may stay open after the dataset is closed.
func TestShardFilesConcurrent(t *testing.T) {
	defer func(n int) { maxIdleShardFiles = n }(maxIdleShardFiles)
	maxIdleShardFiles = 1
	ds, err := OpenDataset(manyShards(t, 6), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	before := openFDs(t)
	errs := make(chan error, 8)
	for g := range 8 {
		go func() {
			for k := range 300 {
				i, j := (g+k)%len(ds.Shards), k%2
				sh := ds.Shards[i]
				if g == 0 && k%7 == 0 {
					sh.Close() // while others may be reading it
				}
				smp, err := sh.ReadSample(j)
				if err == nil && string(smp.Members[0].Data) != fmt.Sprintf("%d-%d", i, j) {
					err = fmt.Errorf("shard %d sample %d holds %q", i, j, smp.Members[0].Data)
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	ds.Close()
	if open := openFDs(t) - before; open > 0 {
		t.Errorf("after Close: %d more files open than before reading, want 0", open)
	}
}

// TestDatasetIndexMemory opens a dataset of many samples and checks that
// their index entries are not all held: every rank held the whole
// dataset's index, a few hundred bytes a sample, though it reads only its
// shards, which put gigabytes in every rank of a job on a dataset of
// tens of millions of samples.
func TestDatasetIndexMemory(t *testing.T) {
	dir := t.TempDir()
	const shards, perShard = 60, 500
	for i := range shards {
		var files []tarFile
		for j := range perShard {
			key := fmt.Sprintf("part-%05d/sample-%08d", i, j)
			files = append(files, tarFile{name: key + ".txt", data: "t"}, tarFile{name: key + ".json", data: "{}"})
		}
		writeFile(t, dir, fmt.Sprintf("s%03d.tar", i), writeTar(t, tar.FormatPAX, files))
	}
	cache := t.TempDir()
	for round, what := range []string{"building the indexes", "from the index cache"} {
		heap := func() uint64 {
			var m runtime.MemStats
			runtime.GC()
			runtime.GC()
			runtime.ReadMemStats(&m)
			return m.HeapAlloc
		}
		before := heap()
		ds, err := OpenDataset(dir, cache)
		if err != nil {
			t.Fatal(err)
		}
		held := int64(heap()) - int64(before)
		if ds.Len() != shards*perShard {
			t.Fatalf("%s: Len() = %d, want %d", what, ds.Len(), shards*perShard)
		}
		// Each sample's entry takes about 250 bytes: 7 MB for all.
		if limit := int64(shards * perShard * 250 / 8); held > limit {
			t.Errorf("%s (round %d): the open dataset holds %d bytes, want at most %d (%d samples)", what, round, held, limit, ds.Len())
		}
		smp, err := ds.Shards[7].ReadSample(123)
		if err != nil || smp.Key != "part-00007/sample-00000123" {
			t.Errorf("%s: ReadSample: key %v, err %v", what, smp, err)
		}
		ds.Close()
	}
}

// TestShardReloadIndex reads a shard whose index was let go after its
// cache file was removed (the index is built again) and after the shard
// itself changed (an error saying so, not another shard's samples).
func TestShardReloadIndex(t *testing.T) {
	dir, cache := t.TempDir(), t.TempDir()
	p := writeFile(t, dir, "s.tar", writeTar(t, tar.FormatPAX, []tarFile{{name: "a.txt", data: "A"}, {name: "b.txt", data: "B"}}))
	s, err := OpenShard(p, cache)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(cachePath(p, cache)); err != nil {
		t.Fatal(err)
	}
	if smp, err := s.ReadSample(1); err != nil || string(smp.Members[0].Data) != "B" {
		t.Fatalf("ReadSample without its cache file: %v, %v", smp, err)
	}
	if _, err := os.Stat(cachePath(p, cache)); err != nil {
		t.Errorf("the rebuilt index was not cached again: %v", err)
	}
	s.Close()
	os.Remove(cachePath(p, cache))
	writeFile(t, dir, "s.tar", writeTar(t, tar.FormatPAX, []tarFile{{name: "c.txt", data: "C"}}))
	later := time.Now().Add(time.Hour)
	os.Chtimes(p, later, later)
	if _, err := s.ReadSample(1); err == nil || !strings.Contains(err.Error(), "changed since it was opened") {
		t.Errorf("ReadSample of a shard rewritten since it was opened: err %v, want one saying it changed", err)
	}

	// A shard replaced by a rename while its index is still cached: the
	// cached offsets must not be read in the new file's bytes.
	p2 := writeFile(t, dir, "r.tar", writeTar(t, tar.FormatPAX, []tarFile{{name: "a.txt", data: "AAAA"}, {name: "b.txt", data: "BBBB"}}))
	s2, err := OpenShard(p2, cache)
	if err != nil {
		t.Fatal(err)
	}
	if smp, err := s2.ReadSample(1); err != nil || string(smp.Members[0].Data) != "BBBB" {
		t.Fatalf("ReadSample: %v, %v", smp, err)
	}
	s2.Close()
	other := writeFile(t, t.TempDir(), "x.tar", writeTar(t, tar.FormatPAX, []tarFile{{name: "xy.txt", data: "XXXXXXXX"}, {name: "yz.txt", data: "YYYYYYYY"}}))
	os.Chtimes(other, later, later)
	if err := os.Rename(other, p2); err != nil {
		t.Fatal(err)
	}
	if smp, err := s2.ReadSample(1); err == nil || !strings.Contains(err.Error(), "changed since it was opened") {
		t.Errorf("ReadSample of a shard replaced since it was opened, its index cached: %v, err %v, want an error saying it changed", smp, err)
	}
}

// TestShardFilesSampleBound bounds the idle shards by the samples of
// their indexes: small shards are let go past the bound, but the most
// recently read stays loaded however large, rather than being loaded
// again for every read.
func TestShardFilesSampleBound(t *testing.T) {
	defer func(f, s, m int) { maxIdleShardFiles, maxIdleShardSamples, minIdleShardFiles = f, s, m }(
		maxIdleShardFiles, maxIdleShardSamples, minIdleShardFiles)
	maxIdleShardFiles, maxIdleShardSamples, minIdleShardFiles = 100, 3, 1
	dir, cache := manyShards(t, 6), t.TempDir()
	var big []tarFile
	for j := range 5 {
		big = append(big, tarFile{name: fmt.Sprintf("%d.txt", j), data: fmt.Sprint(j)})
	}
	pBig := writeFile(t, t.TempDir(), "big.tar", writeTar(t, tar.FormatPAX, big))
	ds, err := OpenDataset(dir, cache)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	before := openFDs(t)
	for i, sh := range ds.Shards {
		if _, err := sh.ReadSample(0); err != nil {
			t.Fatal(err)
		}
		// Two samples a shard under a bound of 3: one shard stays.
		if open := openFDs(t) - before; open > 1 {
			t.Fatalf("after reading %d shards, %d more files open, want at most 1", i+1, open)
		}
	}
	sb, err := OpenShard(pBig, cache)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	if _, err := sb.ReadSample(0); err != nil {
		t.Fatal(err)
	}
	// Loading its index again would now fail: its cache is gone and the
	// shard looks changed.
	os.Remove(cachePath(pBig, cache))
	later := time.Now().Add(time.Hour)
	os.Chtimes(pBig, later, later)
	for j := 1; j < 5; j++ {
		if smp, err := sb.ReadSample(j); err != nil || string(smp.Members[0].Data) != fmt.Sprint(j) {
			t.Fatalf("sample %d of the large shard: %v, %v (its index was let go between reads)", j, smp, err)
		}
	}
}
