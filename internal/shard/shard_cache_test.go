package shard

import (
	"archive/tar"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/datahelix/datahelix/internal/tartest"

	"github.com/datahelix/datahelix/internal/shardindex"
)

// TestShardKeepsIndexLocation checks that a shard loads its index again,
// after it was let go, from where Open found it: a link along its
// path changed meanwhile (to a copy of the shard) must not make it look
// under another name, rebuild the index and write another file.
func TestShardKeepsIndexLocation(t *testing.T) {
	root := t.TempDir()
	data := tartest.Write(t, tar.FormatPAX, []tartest.File{{Name: "a.txt", Data: "A"}, {Name: "b.txt", Data: "B"}})
	var mtime time.Time
	for _, d := range []string{"one", "two"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
		p := tartest.WriteFile(t, filepath.Join(root, d), "s.tar", data)
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
	s, err := Open(filepath.Join(link, "s.tar"), cache)
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
	files, _ := filepath.Glob(filepath.Join(cache, "*.dhidx"))
	if len(files) != 1 || files[0] != shardindex.CachePath(filepath.Join(root, "one", "s.tar"), cache) {
		t.Errorf("index files %v; want the one Open wrote only", files)
	}
}

// TestShardIndexOfAnotherShard checks that a shard named
// "top/link/../ds/a.tar", with link pointing into real/, which is
// real/ds/a.tar while filepath.Abs reads it as top/ds/a.tar, another
// shard, never takes that shard's index: of equal size and modification
// time (the shards of one archive unpacked), its index would pass for
// this one's, and the shard would read its samples at the other's
// offsets, without an error.
func TestShardIndexOfAnotherShard(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"top/ds", "real/deep", "real/ds"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(root, "real", "deep"), filepath.Join(root, "top", "link")); err != nil {
		t.Skipf("symlink: %v", err)
	}
	dx := tartest.Write(t, tar.FormatPAX, []tartest.File{{Name: "x1.txt", Data: "XXXXXXXX"}, {Name: "x2.txt", Data: "XX"}})
	dy := tartest.Write(t, tar.FormatPAX, []tartest.File{{Name: "y1.txt", Data: "YY"}, {Name: "y2.txt", Data: "YYYYYYYY"}})
	if len(dx) != len(dy) {
		t.Fatalf("shards of %d and %d bytes; the test needs equal sizes", len(dx), len(dy))
	}
	x := tartest.WriteFile(t, filepath.Join(root, "top", "ds"), "a.tar", dx)
	y := tartest.WriteFile(t, filepath.Join(root, "real", "ds"), "a.tar", dy)
	st, err := os.Stat(x)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(y, st.ModTime(), st.ModTime()); err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(root, "cache")
	if _, err := Open(x, cache); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{root + "/top/link/../ds/a.tar", y} {
		s, err := Open(p, cache)
		if err != nil {
			t.Fatal(err)
		}
		smp, err := s.ReadSample(0)
		if err != nil || smp.Key != "y1" || s.fromCache && p != y {
			t.Errorf("shard %s (real/ds/a.tar): sample 0 %q, from cache %v, err %v; want y1 from its own index", p, smp.Key, s.fromCache, err)
		}
		s.Close()
	}
}
