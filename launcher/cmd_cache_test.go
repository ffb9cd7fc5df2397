package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/datahelix/datahelix/decode/gen"
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
	if code, stdout, stderr := runMain("cache", "--cache-dir", missing); code != 2 || stdout != "" ||
		!strings.Contains(stderr, "--cache-dir "+missing+": no such directory") {
		t.Errorf("cache --cache-dir MISSING: exit %d, stdout %q, stderr %q; want exit 2 naming the directory", code, stdout, stderr)
	}
	file := filepath.Join(root, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runMain("cache", "--cache-dir", file); code != 2 || !strings.Contains(stderr, file+" is a file") {
		t.Errorf("cache --cache-dir FILE: exit %d, stderr %q; want exit 2 saying it is a file", code, stderr)
	}
	t.Setenv("DATAHELIX_CACHE", missing)
	if code, stdout, stderr := runMain("cache"); code != 0 || stdout != missing+": empty (no dataset generated yet)\n" {
		t.Errorf("cache with no cache yet: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if _, err := gen.Install(filepath.Join(root, gen.CacheName("default-seed1")), func(tmp string) error {
		return os.WriteFile(filepath.Join(tmp, "shard-000000.tar"), make([]byte, 1<<20), 0o644)
	}); err != nil {
		t.Fatal(err)
	}
	if code, stdout, _ := runMain("cache", "--cache-dir", root); code != 0 || !strings.Contains(stdout, root+": 1 dataset, 1.0 MiB;") {
		t.Errorf("cache with one dataset: exit %d, stdout:\n%s", code, stdout)
	}
}
