package shard

import (
	"archive/tar"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/datahelix/datahelix/internal/shardindex"
	"github.com/datahelix/datahelix/internal/tartest"
	"golang.org/x/sys/unix"
)

// TestOpenDatasetGlobSkipsIndexFiles opens 'DIR/*' twice without a cache
// directory: the first open writes shard.tar.dhidx beside the shard, and
// the second picked it up as a shard ("invalid tar header at offset 0").
func TestOpenDatasetGlobSkipsIndexFiles(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"a.tar", "b.tar"} {
		tartest.WriteFile(t, dir, name, tartest.Write(t, tar.FormatPAX, []tartest.File{{Name: "0.txt", Data: name}}))
	}
	tartest.WriteFile(t, dir, "b.tar.dhidx.tmp123", []byte("a partly written index"))
	glob := filepath.Join(dir, "*")
	for i := range 2 {
		d, err := OpenDataset(glob, "", 0, 1)
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		var names []string
		for _, s := range d.shards {
			names = append(names, filepath.Base(s.Path()))
		}
		d.Close()
		if strings.Join(names, " ") != "a.tar b.tar" {
			t.Errorf("open %d: shards %v, want [a.tar b.tar]", i, names)
		}
		if i == 1 && !d.shards[0].fromCache {
			t.Errorf("open %d: index not loaded from the cache beside the shard", i)
		}
	}
	_, err := OpenDataset(filepath.Join(dir, "*.dhidx"), "", 0, 1)
	if !errors.Is(err, shardindex.ErrNoShards) || !strings.Contains(err.Error(), "matches only index cache files (*.dhidx)") {
		t.Errorf("glob of index files only: err %v", err)
	}
}

// TestOpenDatasetCompressedDir lists directories holding compressed tar
// files: alone they gave "has no *.tar files" without saying why, beside
// *.tar shards they were skipped without a word.
func TestOpenDatasetCompressedDir(t *testing.T) {
	tarData := tartest.Write(t, tar.FormatPAX, []tartest.File{{Name: "0.txt", Data: "t"}})
	only := t.TempDir()
	tartest.WriteFile(t, only, "a.tar.gz", tartest.Gzip(t, tarData))
	tartest.WriteFile(t, only, "b.tgz", tartest.Gzip(t, tarData))
	tartest.WriteFile(t, only, "c.tar.zst", []byte("\x28\xb5\x2f\xfd not really"))
	tartest.WriteFile(t, only, "notes.md", []byte("not a shard"))
	_, err := OpenDataset(only, t.TempDir(), 0, 1)
	want := "directory " + only + " has no *.tar files; 3 compressed shards (*.tar.gz, *.tar.zst, *.tgz) must be decompressed first"
	if !errors.Is(err, shardindex.ErrNoShards) || !errors.Is(err, shardindex.ErrCompressedShard) || !strings.Contains(err.Error(), want) {
		t.Errorf("only compressed: err %v\nwant ErrNoShards and ErrCompressedShard, saying %q", err, want)
	}

	mixed := t.TempDir()
	tartest.WriteFile(t, mixed, "a.tar", tarData)
	tartest.WriteFile(t, mixed, "b.tar.gz", tartest.Gzip(t, tarData))
	_, err = OpenDataset(mixed, t.TempDir(), 0, 1)
	want = "directory " + mixed + " mixes 1 *.tar shard with 1 compressed shard (*.tar.gz) such as " + filepath.Join(mixed, "b.tar.gz")
	if !errors.Is(err, shardindex.ErrCompressedShard) || !strings.Contains(err.Error(), want) {
		t.Errorf("mixed: err %v\nwant shardindex.ErrCompressedShard, saying %q", err, want)
	}
}

// TestOpenDatasetNamesEveryBadShard opens a dataset with several bad
// shards among good ones: the error named only the first, so that a
// dataset of 20,000 shards with a few truncated copies took a failed job
// per shard to mend.
func TestOpenDatasetNamesEveryBadShard(t *testing.T) {
	dir := t.TempDir()
	good := tartest.Write(t, tar.FormatPAX, []tartest.File{{Name: "0.txt", Data: "t"}, {Name: "1.txt", Data: strings.Repeat("u", 2000)}})
	var bad []string
	for i := range 12 {
		name := fmt.Sprintf("s%02d.tar", i)
		switch {
		case i == 3 || i >= 6 && i <= 10:
			tartest.WriteFile(t, dir, name, good[:1100]) // cut inside the second member
			bad = append(bad, name)
		default:
			tartest.WriteFile(t, dir, name, good)
		}
	}
	_, err := OpenDataset(dir, t.TempDir(), 0, 1)
	if !errors.Is(err, shardindex.ErrCorruptShard) {
		t.Fatalf("err %v, want ErrCorruptShard", err)
	}
	var se *shardindex.ShardError
	if !errors.As(err, &se) || filepath.Base(se.Path) != bad[0] {
		t.Errorf("errors.As(*shardindex.ShardError) gives %v, want the error of %s", se, bad[0])
	}
	msg := err.Error()
	if want := fmt.Sprintf("%d of 12 shards cannot be opened", len(bad)); !strings.Contains(msg, want) {
		t.Errorf("error %q does not say %q", msg, want)
	}
	for k, name := range bad {
		if named := strings.Contains(msg, name); named != (k < maxOpenErrors) {
			t.Errorf("error names %s: %v, want %v (the first %d in shard order): %s", name, named, k < maxOpenErrors, maxOpenErrors, msg)
		}
	}
	if !strings.HasSuffix(msg, fmt.Sprintf("; and %d more", len(bad)-maxOpenErrors)) {
		t.Errorf("error %q does not end counting the %d shards it does not name", msg, len(bad)-maxOpenErrors)
	}

	// One bad shard keeps its own error, word for word.
	one := t.TempDir()
	tartest.WriteFile(t, one, "a.tar", good)
	p := tartest.WriteFile(t, one, "b.tar", good[:1100])
	_, err = OpenDataset(one, t.TempDir(), 0, 1)
	_, want := Open(p, t.TempDir())
	if err == nil || want == nil || err.Error() != want.Error() {
		t.Errorf("one bad shard: err %v, want %v", err, want)
	}
}

// TestOpenDatasetPart opens one dataset as each of 4 ranks does, at once
// on a cold index cache: each must see the same shards in the same order
// with the same samples, and the cache must hold one whole index per
// shard and nothing half written.
func TestOpenDatasetPart(t *testing.T) {
	dir, cache := t.TempDir(), t.TempDir()
	const n = 13 // not a multiple of the parts
	for i := range n {
		var files []tartest.File
		for j := range i + 1 {
			files = append(files, tartest.File{Name: fmt.Sprintf("%02d-%02d.txt", i, j), Data: "x"})
		}
		tartest.WriteFile(t, dir, fmt.Sprintf("s%02d.tar", i), tartest.Write(t, tar.FormatPAX, files))
	}
	const parts = 4
	got := make([]string, parts)
	errs := make([]error, parts)
	var wg sync.WaitGroup
	for part := range parts {
		wg.Go(func() {
			d, err := OpenDataset(dir, cache, part, parts)
			if err != nil {
				errs[part] = err
				return
			}
			defer d.Close()
			var b strings.Builder
			for _, s := range d.shards {
				fmt.Fprintf(&b, "%s/%d ", filepath.Base(s.Path()), s.Len())
			}
			got[part] = b.String()
		})
	}
	wg.Wait()
	for part := range parts {
		if errs[part] != nil {
			t.Fatalf("part %d: %v", part, errs[part])
		}
		if got[part] != got[0] {
			t.Errorf("part %d sees %s, part 0 %s", part, got[part], got[0])
		}
	}
	entries, err := os.ReadDir(cache)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != n {
		t.Errorf("the cache holds %d files, want %d indexes", len(entries), n)
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".dhidx") {
			t.Errorf("the cache holds %s, not an index", e.Name())
		}
	}
	d, err := OpenDataset(dir, cache, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, s := range d.shards {
		if !s.fromCache {
			t.Errorf("%s: index not loaded from the cache the parts wrote", s.Path())
		}
	}

	// Each part starts at its own run of shards, the first at shard 0.
	for _, tt := range []struct{ n, part, parts, want int }{
		{13, 0, 4, 0}, {13, 1, 4, 3}, {13, 3, 4, 9}, {20000, 3, 4, 15000},
		{3, 2, 4, 1}, {13, 0, 1, 0}, {13, 5, 4, 0}, {13, -1, 4, 0}, {0, 1, 4, 0},
	} {
		if got := partStart(tt.n, tt.part, tt.parts); got != tt.want {
			t.Errorf("partStart(%d, %d, %d) = %d, want %d", tt.n, tt.part, tt.parts, got, tt.want)
		}
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
	d, err := OpenDataset(dir, t.TempDir(), 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var names []string
	for _, s := range d.shards {
		names = append(names, filepath.Base(s.Path()))
	}
	if want := []string{"shard-0.tar", "shard-1.tar", "shard-2.TAR"}; !reflect.DeepEqual(names, want) {
		t.Errorf("shards = %v, want %v", names, want)
	}
	if d.Len() != 3 {
		t.Errorf("Len() = %d, want 3", d.Len())
	}
	g, err := OpenDataset(filepath.Join(dir, "shard-[01].tar"), t.TempDir(), 0, 1)
	if err != nil || len(g.shards) != 2 {
		t.Errorf("glob: %v", err)
	}
	one, err := OpenDataset(filepath.Join(dir, "shard-1.tar"), t.TempDir(), 0, 1)
	if err != nil || len(one.shards) != 1 {
		t.Errorf("single file: %v", err)
	}
	for _, bad := range []string{"", filepath.Join(dir, "missing"), filepath.Join(dir, "*.zip"), t.TempDir()} {
		if _, err := OpenDataset(bad, "", 0, 1); !errors.Is(err, shardindex.ErrNoShards) {
			t.Errorf("OpenDataset(%q): err %v, want ErrNoShards", bad, err)
		}
	}
	tartest.WriteFile(t, dir, "shard-3.tar", []byte("corrupt"))
	if _, err := OpenDataset(dir, t.TempDir(), 0, 1); !errors.Is(err, shardindex.ErrCorruptShard) || !strings.Contains(err.Error(), "shard-3.tar") {
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
		_, err := OpenDataset(dir, t.TempDir(), 0, 1)
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
