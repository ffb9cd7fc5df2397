package shard

import (
	"archive/tar"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/datahelix/datahelix/internal/tartest"

	"github.com/datahelix/datahelix/internal/shardindex"
)

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
		tartest.WriteFile(t, dir, fmt.Sprintf("s%03d.tar", i), tartest.Write(t, tar.FormatPAX, []tartest.File{
			{Name: "a.txt", Data: fmt.Sprintf("%d-0", i)}, {Name: "b.txt", Data: fmt.Sprintf("%d-1", i)}}))
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
	ds, err := OpenDataset(manyShards(t, 12), t.TempDir(), 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	before := openFDs(t)
	for round := range 2 { // the second reopens what the first closed
		for i, sh := range ds.shards {
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
	ds, err := OpenDataset(manyShards(t, 6), t.TempDir(), 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	before := openFDs(t)
	errs := make(chan error, 8)
	for g := range 8 {
		go func() {
			for k := range 300 {
				i, j := (g+k)%len(ds.shards), k%2
				sh := ds.shards[i]
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
		var files []tartest.File
		for j := range perShard {
			key := fmt.Sprintf("part-%05d/sample-%08d", i, j)
			files = append(files, tartest.File{Name: key + ".txt", Data: "t"}, tartest.File{Name: key + ".json", Data: "{}"})
		}
		tartest.WriteFile(t, dir, fmt.Sprintf("s%03d.tar", i), tartest.Write(t, tar.FormatPAX, files))
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
		ds, err := OpenDataset(dir, cache, 0, 1)
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
		smp, err := ds.shards[7].ReadSample(123)
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
	p := tartest.WriteFile(t, dir, "s.tar", tartest.Write(t, tar.FormatPAX, []tartest.File{{Name: "a.txt", Data: "A"}, {Name: "b.txt", Data: "B"}}))
	s, err := Open(p, cache)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(shardindex.CachePath(p, cache)); err != nil {
		t.Fatal(err)
	}
	if smp, err := s.ReadSample(1); err != nil || string(smp.Members[0].Data) != "B" {
		t.Fatalf("ReadSample without its cache file: %v, %v", smp, err)
	}
	if _, err := os.Stat(shardindex.CachePath(p, cache)); err != nil {
		t.Errorf("the rebuilt index was not cached again: %v", err)
	}
	s.Close()
	os.Remove(shardindex.CachePath(p, cache))
	tartest.WriteFile(t, dir, "s.tar", tartest.Write(t, tar.FormatPAX, []tartest.File{{Name: "c.txt", Data: "C"}}))
	later := time.Now().Add(time.Hour)
	os.Chtimes(p, later, later)
	if _, err := s.ReadSample(1); err == nil || !strings.Contains(err.Error(), "changed since it was opened") {
		t.Errorf("ReadSample of a shard rewritten since it was opened: err %v, want one saying it changed", err)
	}

	// A shard replaced by a rename while its index is still cached: the
	// cached offsets must not be read in the new file's bytes.
	p2 := tartest.WriteFile(t, dir, "r.tar", tartest.Write(t, tar.FormatPAX, []tartest.File{{Name: "a.txt", Data: "AAAA"}, {Name: "b.txt", Data: "BBBB"}}))
	s2, err := Open(p2, cache)
	if err != nil {
		t.Fatal(err)
	}
	if smp, err := s2.ReadSample(1); err != nil || string(smp.Members[0].Data) != "BBBB" {
		t.Fatalf("ReadSample: %v, %v", smp, err)
	}
	s2.Close()
	other := tartest.WriteFile(t, t.TempDir(), "x.tar", tartest.Write(t, tar.FormatPAX, []tartest.File{{Name: "xy.txt", Data: "XXXXXXXX"}, {Name: "yz.txt", Data: "YYYYYYYY"}}))
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
	var big []tartest.File
	for j := range 5 {
		big = append(big, tartest.File{Name: fmt.Sprintf("%d.txt", j), Data: fmt.Sprint(j)})
	}
	pBig := tartest.WriteFile(t, t.TempDir(), "big.tar", tartest.Write(t, tar.FormatPAX, big))
	ds, err := OpenDataset(dir, cache, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	before := openFDs(t)
	for i, sh := range ds.shards {
		if _, err := sh.ReadSample(0); err != nil {
			t.Fatal(err)
		}
		// Two samples a shard under a bound of 3: one shard stays.
		if open := openFDs(t) - before; open > 1 {
			t.Fatalf("after reading %d shards, %d more files open, want at most 1", i+1, open)
		}
	}
	sb, err := Open(pBig, cache)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	if _, err := sb.ReadSample(0); err != nil {
		t.Fatal(err)
	}
	// Loading its index again would now fail: its cache is gone and the
	// shard looks changed.
	os.Remove(shardindex.CachePath(pBig, cache))
	later := time.Now().Add(time.Hour)
	os.Chtimes(pBig, later, later)
	for j := 1; j < 5; j++ {
		if smp, err := sb.ReadSample(j); err != nil || string(smp.Members[0].Data) != fmt.Sprint(j) {
			t.Fatalf("sample %d of the large shard: %v, %v (its index was let go between reads)", j, smp, err)
		}
	}
}
