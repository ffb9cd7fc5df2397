package shard

import (
	"archive/tar"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/datahelix/datahelix/internal/decoding"
	"github.com/datahelix/datahelix/internal/shardindex"
	"github.com/datahelix/datahelix/internal/tartest"
)

// sampleSummary renders a sample as "key: ext=data ext=data" for comparisons.
func sampleSummary(s *decoding.Sample) string {
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
			s, err := Open(p, "")
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
// under decode/testdata/shards.
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
			data, err := os.ReadFile(filepath.Join("..", "..", "decode", "testdata", "shards", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			p := tartest.WriteFile(t, dir, tt.file, data)
			s, err := Open(p, "")
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
	s, err := Open(p, "")
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
			_, err := Open(p, "")
			var se *shardindex.ShardError
			if !errors.As(err, &se) || !errors.Is(err, shardindex.ErrCorruptShard) {
				t.Fatalf("Open error = %v, want a *shardindex.ShardError wrapping ErrCorruptShard", err)
			}
			if se.Path != p || se.Offset != tt.offset || !strings.Contains(err.Error(), tt.reason) {
				t.Errorf("got %q (offset %d), want path %s, offset %d, reason containing %q", err, se.Offset, p, tt.offset, tt.reason)
			}
		})
	}
	// The intact archive with one trailing zero block only is accepted.
	p := tartest.WriteFile(t, t.TempDir(), "ok.tar", good[:3072])
	if s, err := Open(p, ""); err != nil || s.Len() != 2 {
		t.Errorf("archive with one end block: err %v", err)
	}
}

func TestShardIndexCache(t *testing.T) {
	dir := t.TempDir()
	data := tartest.Write(t, tar.FormatPAX, []tartest.File{{Name: "a/000001.txt", Data: "one"}, {Name: "a/000002.txt", Data: "two"}, {Name: "b", Data: "no key"}})
	p := tartest.WriteFile(t, dir, "s.tar", data)
	s1, err := Open(p, "")
	if err != nil {
		t.Fatal(err)
	}
	if s1.fromCache || s1.cacheErr != nil {
		t.Fatalf("first open: FromCache %v, CacheError %v; want false, nil", s1.fromCache, s1.cacheErr)
	}
	if _, err := os.Stat(p + ".dhidx"); err != nil {
		t.Fatalf("cache beside shard: %v", err)
	}
	s2, err := Open(p, "")
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
	if s3, err := Open(p, ""); err != nil || s3.fromCache {
		t.Errorf("after touch: FromCache %v, err %v; want rebuilt", s3 != nil && s3.fromCache, err)
	}

	// A corrupt cache file is rebuilt, not trusted.
	if err := os.WriteFile(p+".dhidx", []byte("DHIDX\x00\x02\njunk junk junk junk junk"), 0o644); err != nil {
		t.Fatal(err)
	}
	if s4, err := Open(p, ""); err != nil || s4.fromCache || s4.Len() != 2 {
		t.Errorf("corrupt cache: err %v", err)
	}

	// A cache directory keeps shards of the same base name apart.
	cache := t.TempDir()
	other := filepath.Join(dir, "sub")
	os.Mkdir(other, 0o755)
	p2 := tartest.WriteFile(t, other, "s.tar", tartest.Write(t, tar.FormatPAX, []tartest.File{{Name: "x.txt", Data: "1"}}))
	for _, q := range []string{p, p2} {
		if _, err := Open(q, cache); err != nil {
			t.Fatal(err)
		}
	}
	entries, _ := os.ReadDir(cache)
	if len(entries) != 2 {
		t.Errorf("cache dir holds %d files, want 2", len(entries))
	}
	if s5, err := Open(p2, cache); err != nil || !s5.fromCache || s5.Len() != 1 {
		t.Errorf("reopen from cache dir: err %v", err)
	}
}

func TestShardReadOnlyCache(t *testing.T) {
	p := tartest.WriteFile(t, t.TempDir(), "s.tar", tartest.Write(t, tar.FormatPAX, []tartest.File{{Name: "x.txt", Data: "1"}}))
	// A missing cache directory is made on first use; one under a
	// regular file cannot be.
	notDir := tartest.WriteFile(t, t.TempDir(), "file", []byte("x"))
	s, err := Open(p, filepath.Join(notDir, "dir"))
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
	s, err := Open(p, "")
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
	if _, err := s.ReadSample(0); !errors.Is(err, shardindex.ErrCorruptShard) {
		t.Errorf("ReadSample of a truncated shard: err %v, want ErrCorruptShard", err)
	}
}

func TestMembersDoNotAlias(t *testing.T) {
	p := tartest.WriteFile(t, t.TempDir(), "s.tar", tartest.Write(t, tar.FormatPAX, []tartest.File{{Name: "k.a", Data: "AAAA"}, {Name: "k.b", Data: "BBBB"}}))
	s, err := Open(p, "")
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

// TestDatasetWarnings checks the warnings of a dataset's shards and their
// capped lines.
func TestDatasetWarnings(t *testing.T) {
	dir := t.TempDir()
	var files []tartest.File
	for _, name := range []string{"000001", "000002", "000003", "000004", "000005", "000006", "000007"} {
		files = append(files, tartest.File{Name: name, Data: "x"})
	}
	tartest.WriteFile(t, dir, "a.tar", tartest.Write(t, tar.FormatPAX, []tartest.File{{Name: "k.txt", Data: "fine"}}))
	tartest.WriteFile(t, dir, "b.tar", tartest.Write(t, tar.FormatPAX, files))
	ds, err := OpenDataset(dir, t.TempDir(), 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	var shards []string
	for _, sh := range ds.shards {
		if len(sh.Warnings()) > 0 {
			shards = append(shards, sh.Path())
		}
	}
	b := ds.shards[1]
	if len(shards) != 1 || !strings.HasSuffix(b.Path(), "b.tar") || len(b.Warnings()) != 7 {
		t.Fatalf("shards with warnings %q, b.tar's %q; want 7 of b.tar alone", shards, b.Warnings())
	}
	lines := shardindex.WarningLines(b.Path(), b.Warnings(), 5)
	if len(lines) != 6 || !strings.Contains(lines[0], `b.tar: member "000001" at offset 512 skipped`) ||
		!strings.HasPrefix(lines[0], "warning: shard ") || !strings.HasSuffix(lines[5], "b.tar: and 2 more warnings") {
		t.Errorf("WarningLines(5) = %q, want 5 warnings and a count of 2 more", lines)
	}
	if got := shardindex.WarningLines(b.Path(), b.Warnings(), 0); len(got) != 7 {
		t.Errorf("WarningLines(0) gave %d lines, want all 7", len(got))
	}
}
