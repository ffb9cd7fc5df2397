package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestOutputFilesDiscard checks what a failed command removes: the files
// and directories it created, parents included, and nothing else: not an
// existing file, not a link the user made (even to a file not there yet).
func TestOutputFilesDiscard(t *testing.T) {
	root := t.TempDir()
	existing := filepath.Join(root, "old.json")
	if err := os.WriteFile(existing, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(root, "link.json")
	if err := os.Symlink(filepath.Join(root, "target.json"), link); err != nil {
		t.Fatal(err)
	}
	var o outputFiles
	for _, p := range []string{existing, link, filepath.Join(root, "new.json")} {
		if _, err := o.open("--json", p); err != nil {
			t.Fatal(err)
		}
	}
	if err := o.dir("--out", filepath.Join(root, "a", "b", "c")); err != nil {
		t.Fatal(err)
	}
	o.discard()
	for _, p := range []string{"old.json", "link.json", "target.json"} {
		if _, err := os.Lstat(filepath.Join(root, p)); err != nil {
			t.Errorf("%s: %v, want it kept", p, err)
		}
	}
	for _, p := range []string{"new.json", "a"} {
		if _, err := os.Lstat(filepath.Join(root, p)); err == nil {
			t.Errorf("%s is still there, want it removed", p)
		}
	}
	if b, _ := os.ReadFile(existing); string(b) != "old" {
		t.Errorf("old.json holds %q, want it untouched", b)
	}
}
