package shardindex

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
	"strings"
	"testing"
	"time"

	"github.com/datahelix/datahelix/internal/tartest"
)

// fuzzTarSeeds returns real archives as seeds for the tar fuzzers: the
// committed GNU tar and Python tarfile shards and archive/tar output.
func fuzzTarSeeds(f *testing.F) [][]byte {
	var seeds [][]byte
	for _, name := range []string{"gnu.tar", "pax.tar", "gnutar-links-sparse.tar", "gnutar-posix-sparse.tar"} {
		data, err := os.ReadFile(filepath.Join(shardsDir, name))
		if err != nil {
			f.Fatal(err)
		}
		seeds = append(seeds, data)
	}
	for _, format := range []tar.Format{tar.FormatUSTAR, tar.FormatPAX, tar.FormatGNU} {
		seeds = append(seeds, tartest.Write(f, format, []tartest.File{{Name: "000001.mp4", Data: "video"}, {Name: "000001.txt", Data: "t"}, {Name: "x/000002.0.jpg", Data: "i"}}))
	}
	// Two shards joined with cat: a warning for the data after the end.
	return append(seeds, append(append([]byte{}, seeds[len(seeds)-1]...), seeds[1]...))
}

// checkIndex verifies the invariants every built or loaded index keeps.
func checkIndex(t *testing.T, idx *Index, size int64) {
	var end int64
	for i, e := range idx.Entries {
		if len(e.Members) == 0 {
			t.Fatalf("entry %d has no members", i)
		}
		if i > 0 && idx.Entries[i-1].Key == e.Key {
			t.Fatalf("entries %d and %d share key %q", i-1, i, e.Key)
		}
		for _, m := range e.Members {
			key, ext, ok := splitKey(m.Name)
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
	f.Add(tartest.Gzip(f, fuzzTarSeeds(f)[1]))
	f.Fuzz(func(t *testing.T, data []byte) {
		idx, err := Build("fuzz.tar", bytes.NewReader(data), int64(len(data)))
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
		if len(back.Entries) != len(idx.Entries) || len(back.Warnings) != len(idx.Warnings) {
			t.Fatalf("cache round trip: %d entries, %d warnings; want %d, %d", len(back.Entries), len(back.Warnings), len(idx.Entries), len(idx.Warnings))
		}
		if len(idx.Entries) > 0 && !reflect.DeepEqual(back.Entries, idx.Entries) {
			t.Fatalf("cache round trip changed the entries")
		}
	})
}

// FuzzDecodeIndex feeds arbitrary bytes to the index cache reader, seeded
// with the caches of real shards: a loaded index keeps its invariants.
func FuzzDecodeIndex(f *testing.F) {
	const size, mtime = 1 << 20, 99
	for _, s := range fuzzTarSeeds(f) {
		idx, err := Build("seed.tar", bytes.NewReader(s), int64(len(s)))
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
	files := make([]tartest.File, 0, n+1)
	for i := range n {
		files = append(files, tartest.File{Name: fmt.Sprintf("k.%d.jpg", i)})
	}
	files = append(files, tartest.File{Name: "k.77777.jpg", Data: "again"})
	data := tartest.Write(t, tar.FormatGNU, files)
	start := time.Now()
	idx, err := Build("big.tar", bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	built := time.Since(start)
	if len(idx.Entries) != 1 || len(idx.Entries[0].Members) != n || len(idx.Warnings) != 1 || !strings.Contains(idx.Warnings[0], `repeats extension "77777.jpg"`) {
		t.Fatalf("%d samples, %d members, warnings %q; want 1 sample of %d members and the repeat skipped", len(idx.Entries), len(idx.Entries[0].Members), idx.Warnings, n)
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
	idx.Entries[0].Members[n-1].Name = "k.5.jpg"
	if _, err := decodeIndex(encodeIndex(idx, int64(len(data)), 1), int64(len(data)), 1); err == nil || !strings.Contains(err.Error(), "repeated extension") {
		t.Errorf("loading a cache that repeats extension 5.jpg: %v, want a repeated extension error", err)
	}
}

// TestBuildIndexCompressed indexes shards that are compressed tar files
// named *.tar (or given by glob): the error said "invalid tar header" (or
// "truncated" for one under 512 bytes) instead of naming the compression.
func TestBuildIndexCompressed(t *testing.T) {
	tarData := tartest.Write(t, tar.FormatPAX, []tartest.File{{Name: "000001.txt", Data: strings.Repeat("caption ", 200)}})
	tests := []struct {
		name, format string
		data         []byte
	}{
		{"gzip", "gzip", tartest.Gzip(t, tarData)},
		{"tiny gzip", "gzip", tartest.Gzip(t, []byte("x"))}, // under one tar block
		{"zstd", "zstd", append([]byte{0x28, 0xb5, 0x2f, 0xfd}, make([]byte, 600)...)},
		{"xz", "xz", append([]byte{0xfd, '7', 'z', 'X', 'Z', 0}, make([]byte, 600)...)},
		{"bzip2", "bzip2", append([]byte("BZh91AY&SY"), make([]byte, 600)...)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := tartest.WriteFile(t, t.TempDir(), "shard.tar", tt.data)
			_, err := openShard(path, t.TempDir())
			var se *ShardError
			if !errors.As(err, &se) || se.Path != path || !errors.Is(err, ErrCorruptShard) || !errors.Is(err, ErrCompressedShard) {
				t.Fatalf("got %v, want a *ShardError for %s matching ErrCorruptShard and ErrCompressedShard", err, path)
			}
			for _, want := range []string{tt.format + "-compressed", "shards must be uncompressed tar", tt.format + " -dc " + path} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
		})
	}
	// Garbage that is no compression format keeps the tar error, and a
	// tar whose first member is named like the bzip2 signature is a tar.
	_, err := Build("garbage.tar", bytes.NewReader(bytes.Repeat([]byte("garbage!"), 128)), 1024)
	if !errors.Is(err, ErrCorruptShard) || errors.Is(err, ErrCompressedShard) || !strings.Contains(err.Error(), "invalid tar header") {
		t.Errorf("garbage: err %v, want an invalid tar header", err)
	}
	bz := tartest.Write(t, tar.FormatUSTAR, []tartest.File{{Name: "BZh91.txt", Data: "t"}})
	if idx, err := Build("bz.tar", bytes.NewReader(bz), int64(len(bz))); err != nil || len(idx.Entries) != 1 {
		t.Errorf("tar with a member named BZh91.txt: %v", err)
	}
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
		key, ext, ok := splitKey(tt.name)
		if key != tt.key || ext != tt.ext || ok != tt.ok {
			t.Errorf("splitKey(%q) = %q, %q, %v; want %q, %q, %v", tt.name, key, ext, ok, tt.key, tt.ext, tt.ok)
		}
	}
}

// TestIndexCacheOldRules loads an index cache that holds a sample with a
// repeated extension, as version 1 of the index wrote: it contradicts the
// rules of buildIndex, so it is rebuilt rather than trusted.
func TestIndexCacheOldRules(t *testing.T) {
	data := tartest.Write(t, tar.FormatPAX, []tartest.File{{Name: "000.jpg", Data: "a"}, {Name: "000.jpg", Data: "b"}})
	old := &Index{Entries: []Entry{{Key: "000", Offset: 512, Size: 1025, Members: []Member{
		{Name: "000.jpg", Ext: "jpg", Offset: 512, Size: 1}, {Name: "000.jpg", Ext: "jpg", Offset: 1536, Size: 1}}}}}
	if _, err := decodeIndex(encodeIndex(old, int64(len(data)), 5), int64(len(data)), 5); !errors.Is(err, errIndexCache) {
		t.Errorf("decodeIndex of a repeated extension: err %v, want errIndexCache", err)
	}
	p := tartest.WriteFile(t, t.TempDir(), "s.tar", data)
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(CachePath(p, ""), encodeIndex(old, st.Size(), st.ModTime().UnixNano()), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := openShard(p, "")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	e, err := s.Entry(0)
	if s.FromCache() || err != nil || len(e.Members) != 1 {
		t.Errorf("FromCache %v, members %+v (%v); want the index rebuilt with one member", s.FromCache(), e.Members, err)
	}
}
