package decode

import (
	"archive/tar"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/datahelix/datahelix/internal/tartest"

	"github.com/datahelix/datahelix/internal/shardindex"
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
		d, err := OpenDataset(glob, "")
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		var names []string
		for _, s := range d.Shards {
			names = append(names, filepath.Base(s.Path()))
		}
		d.Close()
		if strings.Join(names, " ") != "a.tar b.tar" {
			t.Errorf("open %d: shards %v, want [a.tar b.tar]", i, names)
		}
		if i == 1 && !d.Shards[0].fromCache {
			t.Errorf("open %d: index not loaded from the cache beside the shard", i)
		}
	}
	_, err := OpenDataset(filepath.Join(dir, "*.dhidx"), "")
	if !errors.Is(err, ErrNoShards) || !strings.Contains(err.Error(), "matches only index cache files (*.dhidx)") {
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
	_, err := OpenDataset(only, t.TempDir())
	want := "directory " + only + " has no *.tar files; 3 compressed shards (*.tar.gz, *.tar.zst, *.tgz) must be decompressed first"
	if !errors.Is(err, ErrNoShards) || !errors.Is(err, ErrCompressedShard) || !strings.Contains(err.Error(), want) {
		t.Errorf("only compressed: err %v\nwant ErrNoShards and ErrCompressedShard, saying %q", err, want)
	}

	mixed := t.TempDir()
	tartest.WriteFile(t, mixed, "a.tar", tarData)
	tartest.WriteFile(t, mixed, "b.tar.gz", tartest.Gzip(t, tarData))
	_, err = OpenDataset(mixed, t.TempDir())
	want = "directory " + mixed + " mixes 1 *.tar shard with 1 compressed shard (*.tar.gz) such as " + filepath.Join(mixed, "b.tar.gz")
	if !errors.Is(err, ErrCompressedShard) || !strings.Contains(err.Error(), want) {
		t.Errorf("mixed: err %v\nwant ErrCompressedShard, saying %q", err, want)
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
	_, err := OpenDataset(dir, t.TempDir())
	if !errors.Is(err, ErrCorruptShard) {
		t.Fatalf("err %v, want ErrCorruptShard", err)
	}
	var se *ShardError
	if !errors.As(err, &se) || filepath.Base(se.Path) != bad[0] {
		t.Errorf("errors.As(*ShardError) gives %v, want the error of %s", se, bad[0])
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
	_, err = OpenDataset(one, t.TempDir())
	_, want := OpenShard(p, t.TempDir())
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
			d, err := OpenDatasetPart(dir, cache, part, parts)
			if err != nil {
				errs[part] = err
				return
			}
			defer d.Close()
			var b strings.Builder
			for _, s := range d.Shards {
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
	d, err := OpenDataset(dir, cache)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, s := range d.Shards {
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
	ds, err := OpenDataset(dir, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	var shards []string
	for _, sh := range ds.Shards {
		if len(sh.Warnings()) > 0 {
			shards = append(shards, sh.Path())
		}
	}
	b := ds.Shards[1]
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
