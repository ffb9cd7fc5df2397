package gen

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestScanAndPruneCache(t *testing.T) {
	root := t.TempDir()
	write := func(path string, size int) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, make([]byte, size), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	stamp := stampLine(FormatVersion) + "\n"
	dataset := func(dir string, shard int) string {
		write(filepath.Join(root, dir, "shard-000000.tar"), shard)
		if err := os.WriteFile(filepath.Join(root, dir, doneFile), []byte(stamp), 0o644); err != nil {
			t.Fatal(err)
		}
		return filepath.Join(root, dir)
	}
	s := int64(len(stamp))
	current := dataset(CacheName("default-seed1"), 1000)
	unversioned := dataset("default-v1-seed1", 2000)
	otherFmt := dataset(fmt1Name("bench/data/kinetics-n24-seed1"), 3000)
	src := dataset(CacheName("bench/real/src/kinetics-n128-seed1"), 4000)
	// A link directory: its size is its links', not the shards'.
	links := filepath.Join(root, CacheName("bench/real/kinetics-r4-seed1"))
	write(filepath.Join(links, "x"), 0)
	if err := os.WriteFile(filepath.Join(links, doneFile), []byte(stamp), 0o644); err != nil {
		t.Fatal(err)
	}
	// Named for this format, but its DONE holds a date only, as link
	// directories of some format-2 binaries did: Install refuses it.
	dated := filepath.Join(root, CacheName("bench/real/webvid-r4-seed1"))
	write(filepath.Join(dated, doneFile), 21)
	if err := os.Symlink(filepath.Join(src, "shard-000000.tar"), filepath.Join(links, "shard-000000.tar")); err != nil {
		t.Fatal(err)
	}
	linkInfo, err := os.Lstat(filepath.Join(links, "shard-000000.tar"))
	if err != nil {
		t.Fatal(err)
	}
	abandoned := filepath.Join(root, CacheName("bench/data/laion-n72-seed1")+".tmp-12-ab")
	write(filepath.Join(abandoned, "shard-000000.tar"), 500)
	old := time.Now().Add(-abandonedAfter - time.Hour)
	if err := os.Chtimes(abandoned, old, old); err != nil {
		t.Fatal(err)
	}
	filling := filepath.Join(root, CacheName("bench/data/text-n72-seed1")+".tmp-13-cd")
	write(filepath.Join(filling, "shard-000000.tar"), 600)
	// Neither a dataset nor scratch: never listed, never removed.
	write(filepath.Join(root, "bench", "calibration-x.json"), 7)
	write(filepath.Join(root, "index", "a.dhidx"), 8)

	got, err := ScanCache(root)
	if err != nil {
		t.Fatal(err)
	}
	want := []CachedDataset{ // in path order
		{otherFmt, CacheOtherFormat, 3000 + s},
		{abandoned, CacheScratch, 500},
		{filling, CacheFilling, 600},
		{links, CacheCurrent, s + linkInfo.Size()},
		{src, CacheCurrent, 4000 + s},
		{dated, CacheOtherFormat, 21},
		{current, CacheCurrent, 1000 + s},
		{unversioned, CacheOtherFormat, 2000 + s},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d datasets %v, want %d %v", len(got), got, len(want), want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("dataset %d: got %+v, want %+v", i, got[i], want[i])
		}
	}

	freed, err := Prune(got)
	if want := 500 + 3000 + 2000 + 21 + 2*s; err != nil || freed != want {
		t.Fatalf("Prune: freed %d, %v; want %d", freed, err, want)
	}
	for _, d := range want {
		_, err := os.Stat(d.Dir)
		if gone := os.IsNotExist(err); gone != d.State.Removable() {
			t.Errorf("%s (%v): removed %v", d.Dir, d.State, gone)
		}
	}
	for _, f := range []string{"bench/calibration-x.json", "index/a.dhidx"} {
		if _, err := os.Stat(filepath.Join(root, f)); err != nil {
			t.Errorf("Prune removed %s: %v", f, err)
		}
	}
	if again, err := ScanCache(root); err != nil || len(again) != 4 {
		t.Errorf("after Prune: %d datasets, %v; want the 4 kept", len(again), err)
	}
}

func TestScanCacheMissingRoot(t *testing.T) {
	got, err := ScanCache(filepath.Join(t.TempDir(), "none"))
	if err != nil || len(got) != 0 {
		t.Errorf("got %v, %v; want an empty cache", got, err)
	}
}

// fmt1Name is name as a binary writing format 1 would have cached it.
func fmt1Name(name string) string { return name + "-fmt1" }
