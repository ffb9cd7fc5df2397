package datacmd

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/datahelix/datahelix/internal/cli"
	"github.com/datahelix/datahelix/internal/cli/clitest"
	"github.com/datahelix/datahelix/internal/gen"
	"github.com/datahelix/datahelix/internal/tartest"
)

// TestCacheCommand checks that datahelix cache lists the cached datasets
// by state and size, removes nothing without --prune, and with it removes
// exactly the older-format ones.
func TestCacheCommand(t *testing.T) {
	root := t.TempDir()
	dataset := func(name string, size int) string {
		dir := filepath.Join(root, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for f, n := range map[string]int{"shard-000000.tar": size, "DONE": 0} {
			if err := os.WriteFile(filepath.Join(dir, f), make([]byte, n), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	current := filepath.Join(root, gen.CacheName("default-seed1"))
	if _, err := gen.Install(current, func(tmp string) error {
		return os.WriteFile(filepath.Join(tmp, "shard-000000.tar"), make([]byte, 3<<20), 0o644)
	}); err != nil {
		t.Fatal(err)
	}
	old := dataset("default-v1-seed1", 1<<20)

	code, stdout, stderr := runMain("cache", "--cache-dir", root)
	wantLines := []string{
		"current         3.0 MiB  " + filepath.Base(current),
		"older format    1.0 MiB  default-v1-seed1",
		root + ": 2 datasets, 4.0 MiB; 1.0 MiB of older formats or abandoned",
		"(datahelix cache --prune removes them)",
	}
	if code != 0 || stderr != "" || stdout != strings.Join(wantLines, "\n")+"\n" {
		t.Fatalf("cache: exit %d, stderr %q, stdout:\n%s\nwant:\n%s", code, stderr, stdout, strings.Join(wantLines, "\n"))
	}
	if _, err := os.Stat(old); err != nil {
		t.Fatalf("cache without --prune removed %s: %v", old, err)
	}

	code, stdout, _ = runMain("cache", "--cache-dir", root, "--prune")
	if code != 0 || !strings.HasSuffix(stdout, "pruned 1.0 MiB\n") {
		t.Errorf("cache --prune: exit %d, stdout:\n%s", code, stdout)
	}
	if _, err := os.Stat(old); !os.IsNotExist(err) {
		t.Errorf("cache --prune kept %s: %v", old, err)
	}
	if _, err := os.Stat(filepath.Join(current, "shard-000000.tar")); err != nil {
		t.Errorf("cache --prune removed the current dataset: %v", err)
	}
}

// TestCacheCommandMissingDir checks that cache tells a mistyped
// --cache-dir, or a file, from a cache that holds nothing yet, and
// counts one dataset in the singular.
func TestCacheCommandMissingDir(t *testing.T) {
	root := t.TempDir()
	missing := filepath.Join(root, "nope")
	var fe cli.FlagError
	if err := commandErr(t, "cache", "--cache-dir", missing); !errors.As(err, &fe) || fe.Flag != "cache-dir" || fe.Value != missing {
		t.Errorf("cache --cache-dir MISSING: %#v; want a cli.FlagError naming the directory", err)
	}
	tr := clitest.NewTranscript(root, "ROOT")
	tr.Add([]string{"cache", "--cache-dir", missing}, usageLine(t, "cache", "--cache-dir", missing))
	file := filepath.Join(root, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := commandErr(t, "cache", "--cache-dir", file); !errors.As(err, &fe) || fe.Flag != "cache-dir" || fe.Value != file {
		t.Errorf("cache --cache-dir FILE: %#v; want a cli.FlagError naming the file", err)
	}
	tr.Add([]string{"cache", "--cache-dir", file}, usageLine(t, "cache", "--cache-dir", file))
	clitest.Golden(t, "cache_missing_dir.golden", tr.String())
	t.Setenv("DATAHELIX_CACHE", missing)
	if code, stdout, stderr := runMain("cache"); code != 0 || stdout != missing+": empty (no dataset generated yet)\n" {
		t.Errorf("cache with no cache yet: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if _, err := gen.Install(filepath.Join(root, gen.CacheName("default-seed1")), func(tmp string) error {
		return os.WriteFile(filepath.Join(tmp, "shard-000000.tar"), make([]byte, 1<<20), 0o644)
	}); err != nil {
		t.Fatal(err)
	}
	want := "current         1.0 MiB  " + gen.CacheName("default-seed1") + "\n" + root + ": 1 dataset, 1.0 MiB; 0.0 MiB of older formats or abandoned\n"
	if code, stdout, _ := runMain("cache", "--cache-dir", root); code != 0 || stdout != want {
		t.Errorf("cache with one dataset: exit %d, stdout:\n%s\nwant:\n%s", code, stdout, want)
	}
}

// TestCacheCommandIndexes checks that datahelix cache lists the shard
// indexes of the cache's index directory by shard directory, current or
// stale,
// counts the stale ones, and that --prune removes those (the index of a
// deleted shard, one named by an older datahelix) and keeps the index of
// a shard that exists and matches.
func TestCacheCommandIndexes(t *testing.T) {
	root, data := t.TempDir(), t.TempDir()
	for _, name := range []string{"a.tar", "b.tar"} {
		var buf bytes.Buffer
		w := tar.NewWriter(&buf)
		if err := w.WriteHeader(&tar.Header{Name: "000001.txt", Mode: 0o644, Size: 3}); err != nil {
			t.Fatal(err)
		}
		w.Write([]byte("one"))
		w.Close()
		tartest.WriteFile(t, data, name, buf.Bytes())
	}
	if code, _, stderr := runMain("inspect", "--cache-dir", root, data); code != 0 {
		t.Fatalf("inspect: exit %d: %s", code, stderr)
	}
	indexDir := filepath.Join(root, "index")
	live, _ := filepath.Glob(filepath.Join(indexDir, "a.tar.*.dhidx"))
	dead, _ := filepath.Glob(filepath.Join(indexDir, "b.tar.*.dhidx"))
	if len(live) != 1 || len(dead) != 1 {
		t.Fatalf("indexes %v and %v, want one each", live, dead)
	}
	if err := os.Remove(filepath.Join(data, "b.tar")); err != nil {
		t.Fatal(err)
	}
	legacy := tartest.WriteFile(t, indexDir, "c.tar.0123456789abcdef.dhidx", []byte("an older datahelix's index"))
	size := func(p string) int64 {
		info, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		return info.Size()
	}
	wantLines := []string{
		root + ": 0 datasets, 0.0 MiB; 0.0 MiB of older formats or abandoned",
		"current         0.0 MiB  1 shard index of " + data,
		"stale           0.0 MiB  1 shard index of " + data,
		"stale           0.0 MiB  1 shard index",
		fmt.Sprintf("%s: 3 shard indexes, 0.0 MiB; 2 (0.0 MiB) stale (shard gone or changed, of an older format, or abandoned)", indexDir),
		"(datahelix cache --prune removes them)",
	}
	code, stdout, stderr := runMain("cache", "--cache-dir", root)
	if code != 0 || stderr != "" || stdout != strings.Join(wantLines, "\n")+"\n" {
		t.Fatalf("cache: exit %d, stderr %q, stdout:\n%s\nwant:\n%s", code, stderr, stdout, strings.Join(wantLines, "\n"))
	}
	if _, err := os.Stat(dead[0]); err != nil {
		t.Fatalf("cache without --prune removed %s: %v", dead[0], err)
	}

	freed := size(dead[0]) + size(legacy)
	code, stdout, _ = runMain("cache", "--cache-dir", root, "--prune")
	if want := fmt.Sprintf("pruned %s (2 shard indexes)\n", cli.MiB(freed)); code != 0 || !strings.HasSuffix(stdout, want) {
		t.Errorf("cache --prune: exit %d, stdout:\n%s\nwant it to end %q", code, stdout, want)
	}
	for _, p := range []string{dead[0], legacy} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("cache --prune kept %s: %v", p, err)
		}
	}
	if _, err := os.Stat(live[0]); err != nil {
		t.Errorf("cache --prune removed the index of a shard in use: %v", err)
	}
	// The stale lines and the hint to prune are gone.
	code, stdout, _ = runMain("cache", "--cache-dir", root)
	want := strings.Join([]string{wantLines[0], wantLines[1],
		indexDir + ": 1 shard index, 0.0 MiB; 0 (0.0 MiB) stale (shard gone or changed, of an older format, or abandoned)"}, "\n") + "\n"
	if code != 0 || stdout != want {
		t.Errorf("cache after --prune: exit %d, stdout:\n%s\nwant:\n%s", code, stdout, want)
	}
}
