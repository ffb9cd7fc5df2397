package decode

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/datahelix/datahelix/internal/tartest"

	"golang.org/x/sys/unix"
)

// sampleSummary renders a sample as "key: ext=data ext=data" for comparisons.
func sampleSummary(s *Sample) string {
	var parts []string
	for _, m := range s.Members {
		parts = append(parts, m.Ext+"="+string(m.Data))
	}
	return s.Key + ": " + strings.Join(parts, " ")
}

func TestShardGoTar(t *testing.T) {
	for _, format := range []tar.Format{tar.FormatUSTAR, tar.FormatPAX, tar.FormatGNU} {
		t.Run(format.String(), func(t *testing.T) {
			long := strings.Repeat("n", 130) + "/000003.mp4"
			files := []tartest.File{
				{Name: "dir/", Type: tar.TypeDir},
				{Name: "000001.mp4", Data: strings.Repeat("v", 1000)},
				{Name: "000001.TXT", Data: "caption one"},
				{Name: "000002.0.jpg", Data: "img0"},
				{Name: "000002.1.jpg", Data: "img1"},
				{Name: "000002.json", Data: `{"a":1}`},
				{Name: long, Data: "long"},
			}
			if format == tar.FormatUSTAR {
				files = files[:len(files)-1] // USTAR cannot hold the long name
			}
			dir := t.TempDir()
			p := tartest.WriteFile(t, dir, "s.tar", tartest.Write(t, format, files))
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
			p := tartest.WriteFile(t, dir, tt.file, data)
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
	files := []tartest.File{
		{Name: "000001.jpg", Data: "a"},
		{Name: "000001.jpg", Data: "b"},
		{Name: "000002.txt", Data: "c"},
		{Name: "000001.txt", Data: "d"},
		{Name: "link.txt", Type: tar.TypeSymlink},
		{Name: "README", Data: "no key"},
	}
	p := tartest.WriteFile(t, t.TempDir(), "w.tar", tartest.Write(t, tar.FormatPAX, files))
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
	good := tartest.Write(t, tar.FormatPAX, []tartest.File{
		{Name: "000001.txt", Data: strings.Repeat("x", 600)},
		{Name: "000002.txt", Data: "y"},
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
			p := tartest.WriteFile(t, t.TempDir(), "bad.tar", tt.data)
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
	p := tartest.WriteFile(t, t.TempDir(), "ok.tar", good[:3072])
	if s, err := OpenShard(p, ""); err != nil || s.Len() != 2 {
		t.Errorf("archive with one end block: err %v", err)
	}
}

func TestShardIndexCache(t *testing.T) {
	dir := t.TempDir()
	data := tartest.Write(t, tar.FormatPAX, []tartest.File{{Name: "a/000001.txt", Data: "one"}, {Name: "a/000002.txt", Data: "two"}, {Name: "b", Data: "no key"}})
	p := tartest.WriteFile(t, dir, "s.tar", data)
	s1, err := OpenShard(p, "")
	if err != nil {
		t.Fatal(err)
	}
	if s1.fromCache || s1.cacheErr != nil {
		t.Fatalf("first open: FromCache %v, CacheError %v; want false, nil", s1.fromCache, s1.cacheErr)
	}
	if _, err := os.Stat(p + ".dhidx"); err != nil {
		t.Fatalf("cache beside shard: %v", err)
	}
	s2, err := OpenShard(p, "")
	if err != nil {
		t.Fatal(err)
	}
	if !s2.fromCache {
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
	if s3, err := OpenShard(p, ""); err != nil || s3.fromCache {
		t.Errorf("after touch: FromCache %v, err %v; want rebuilt", s3 != nil && s3.fromCache, err)
	}

	// A corrupt cache file is rebuilt, not trusted.
	if err := os.WriteFile(p+".dhidx", []byte("DHIDX\x00\x02\njunk junk junk junk junk"), 0o644); err != nil {
		t.Fatal(err)
	}
	if s4, err := OpenShard(p, ""); err != nil || s4.fromCache || s4.Len() != 2 {
		t.Errorf("corrupt cache: err %v", err)
	}

	// A cache directory keeps shards of the same base name apart.
	cache := t.TempDir()
	other := filepath.Join(dir, "sub")
	os.Mkdir(other, 0o755)
	p2 := tartest.WriteFile(t, other, "s.tar", tartest.Write(t, tar.FormatPAX, []tartest.File{{Name: "x.txt", Data: "1"}}))
	for _, q := range []string{p, p2} {
		if _, err := OpenShard(q, cache); err != nil {
			t.Fatal(err)
		}
	}
	entries, _ := os.ReadDir(cache)
	if len(entries) != 2 {
		t.Errorf("cache dir holds %d files, want 2", len(entries))
	}
	if s5, err := OpenShard(p2, cache); err != nil || !s5.fromCache || s5.Len() != 1 {
		t.Errorf("reopen from cache dir: err %v", err)
	}
}

func TestShardReadOnlyCache(t *testing.T) {
	p := tartest.WriteFile(t, t.TempDir(), "s.tar", tartest.Write(t, tar.FormatPAX, []tartest.File{{Name: "x.txt", Data: "1"}}))
	// A missing cache directory is made on first use; one under a
	// regular file cannot be.
	notDir := tartest.WriteFile(t, t.TempDir(), "file", []byte("x"))
	s, err := OpenShard(p, filepath.Join(notDir, "dir"))
	if err != nil {
		t.Fatal(err)
	}
	if s.cacheErr == nil {
		t.Error("CacheError() = nil for an unwritable cache dir")
	}
	if smp, err := s.ReadSample(0); err != nil || string(smp.Members[0].Data) != "1" {
		t.Errorf("ReadSample after failed cache write: %v", err)
	}
}

func TestShardReadSampleLimits(t *testing.T) {
	dir := t.TempDir()
	p := tartest.WriteFile(t, dir, "s.tar", tartest.Write(t, tar.FormatPAX, []tartest.File{{Name: "x.txt", Data: strings.Repeat("z", 5000)}}))
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
	s.MaxSampleBytes = defaultMaxSampleBytes
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
	p := tartest.WriteFile(t, t.TempDir(), "s.tar", tartest.Write(t, tar.FormatPAX, []tartest.File{{Name: "k.a", Data: "AAAA"}, {Name: "k.b", Data: "BBBB"}}))
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
		name := fmt.Sprintf("shard-%d.tar", i)
		if i == 2 {
			name = "shard-2.TAR" // a shard in any letter case, as IsShardName takes it
		}
		tartest.WriteFile(t, dir, name, tartest.Write(t, tar.FormatPAX, []tartest.File{{Name: fmt.Sprintf("%d.txt", i), Data: "t"}}))
	}
	tartest.WriteFile(t, dir, "notes.md", []byte("not a shard"))
	d, err := OpenDataset(dir, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var names []string
	for _, s := range d.Shards {
		names = append(names, filepath.Base(s.Path()))
	}
	if want := []string{"shard-0.tar", "shard-1.tar", "shard-2.TAR"}; !reflect.DeepEqual(names, want) {
		t.Errorf("shards = %v, want %v", names, want)
	}
	if d.Len() != 3 {
		t.Errorf("Len() = %d, want 3", d.Len())
	}
	g, err := OpenDataset(filepath.Join(dir, "shard-[01].tar"), t.TempDir())
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
	tartest.WriteFile(t, dir, "shard-3.tar", []byte("corrupt"))
	if _, err := OpenDataset(dir, t.TempDir()); !errors.Is(err, ErrCorruptShard) || !strings.Contains(err.Error(), "shard-3.tar") {
		t.Errorf("corrupt shard in dataset: err %v", err)
	}
}

// TestOpenDatasetFIFO puts a FIFO named like a shard in a dataset
// directory: opening it for reading blocked until a writer came, which
// hung every rank at start-up. It must be refused at once.
func TestOpenDatasetFIFO(t *testing.T) {
	dir := t.TempDir()
	tartest.WriteFile(t, dir, "shard-0.tar", tartest.Write(t, tar.FormatPAX, []tartest.File{{Name: "0.txt", Data: "t"}}))
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
