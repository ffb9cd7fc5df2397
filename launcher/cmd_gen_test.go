package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGenRefusesDirectoryWithOtherShards checks that gen does not add a
// second dataset's shards to a directory a run would read whole.
func TestGenRefusesDirectoryWithOtherShards(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "mixed-000000.tar"), []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runMain("gen", "--preset", "text", "--samples", "2", "--out", dir)
	want := dir + " holds mixed-000000.tar, not among the shards this command writes (text-000000.tar)"
	if code != 1 || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, want) || !strings.Contains(stderr, "generate into a new directory") || stdout != "" {
		t.Errorf("exit %d, stdout %q, stderr %q; want exit 1 and one line containing %q", code, stdout, stderr, want)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "*")); len(m) != 1 {
		t.Errorf("directory holds %v, want only the old shard", m)
	}
}
