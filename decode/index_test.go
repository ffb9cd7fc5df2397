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
	"strings"
	"testing"
	"time"
)

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
