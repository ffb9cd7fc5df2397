package cli

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"unicode/utf8"
)

// TestOutputFilesDiscard checks what a failed command removes: the
// directories it created, parents included, and nothing else: not an
// existing file, not a link the user made (even to a file not there
// yet), whose target it does not create either.
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
	var o OutputFiles
	for _, p := range []string{existing, link, filepath.Join(root, "new.json")} {
		if _, err := o.Open("--json", p); err != nil {
			t.Fatal(err)
		}
	}
	if err := o.Dir("--out", filepath.Join(root, "a", "b", "c")); err != nil {
		t.Fatal(err)
	}
	o.Discard()
	if got, want := dirNames(t, root), []string{"link.json", "old.json"}; !slices.Equal(got, want) {
		t.Errorf("after discard the directory holds %q, want %q", got, want)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("link.json: %v, %v: want the link kept", fi, err)
	}
	if b, _ := os.ReadFile(existing); string(b) != "old" {
		t.Errorf("old.json holds %q, want it untouched", b)
	}
}

// TestOutputFilesKilled opens outputs and then neither closes nor
// discards them, as when MPI kills the process: a new path, directly or
// through a link to no file yet, must not exist (it was left empty), and
// an existing file must keep its content.
func TestOutputFilesKilled(t *testing.T) {
	root := t.TempDir()
	existing := filepath.Join(root, "old.json")
	if err := os.WriteFile(existing, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("target.json", filepath.Join(root, "link.json")); err != nil {
		t.Fatal(err)
	}
	var o OutputFiles
	for _, p := range []string{"new.json", "link.json", "old.json"} {
		if _, err := o.Open("--json", filepath.Join(root, p)); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := dirNames(t, root), []string{"link.json", "old.json"}; !slices.Equal(got, want) {
		t.Errorf("after open the directory holds %q, want %q (no new file before the results)", got, want)
	}
	if b, _ := os.ReadFile(existing); string(b) != "old" {
		t.Errorf("old.json holds %q, want it untouched", b)
	}
}

// TestOutputFileReplace writes results through open and replace: the
// file holds exactly them, a new one appears only once complete, with
// the permissions a plain create gives and no temporary file left, and
// a link stays a link, its target getting the content.
func TestOutputFileReplace(t *testing.T) {
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	root := t.TempDir()
	// The permissions a new file gets here: 0644 less the umask.
	ref := filepath.Join(t.TempDir(), "ref")
	must(os.WriteFile(ref, nil, 0o644))
	refInfo, err := os.Stat(ref)
	must(err)
	must(os.WriteFile(filepath.Join(root, "old.json"), []byte("a much longer old content"), 0o600))
	must(os.WriteFile(filepath.Join(root, "target.json"), []byte("old target"), 0o644))
	must(os.Symlink("target.json", filepath.Join(root, "link.json")))
	must(os.Symlink("later.json", filepath.Join(root, "dangling.json")))
	for _, c := range []struct {
		name, file string // the path given and the file that gets the content
		isNew      bool
		mode       os.FileMode
	}{
		{"new.json", "new.json", true, refInfo.Mode()},
		{"old.json", "old.json", false, 0o600},
		{"link.json", "target.json", false, 0o644},
		{"dangling.json", "later.json", true, refInfo.Mode()},
	} {
		var o OutputFiles
		f, err := o.Open("--json", filepath.Join(root, c.name))
		if err != nil {
			t.Fatal(err)
		}
		content := "results of " + c.name + "\n"
		err = f.Replace(func(w io.Writer) error {
			if _, err := os.Lstat(filepath.Join(root, c.file)); c.isNew && !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s: %s exists while the results are written (%v), want it to appear once complete", c.name, c.file, err)
			}
			_, err := io.WriteString(w, content)
			return err
		})
		if err := errors.Join(err, o.Close()); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		path := filepath.Join(root, c.file)
		if b, err := os.ReadFile(path); err != nil || string(b) != content {
			t.Errorf("%s: %s holds %q (%v), want %q", c.name, c.file, b, err, content)
		}
		if fi, err := os.Stat(path); err != nil || fi.Mode() != c.mode {
			t.Errorf("%s: %s has mode %v (%v), want %v", c.name, c.file, fi.Mode(), err, c.mode)
		}
	}
	for _, l := range []string{"link.json", "dangling.json"} {
		if fi, err := os.Lstat(filepath.Join(root, l)); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Errorf("%s: %v: want it still a link", l, err)
		}
	}
	want := []string{"dangling.json", "later.json", "link.json", "new.json", "old.json", "target.json"}
	if got := dirNames(t, root); !slices.Equal(got, want) {
		t.Errorf("the directory holds %q, want %q (no temporary file)", got, want)
	}
}

// TestOutputFileReplaceFails checks that a write that fails leaves no
// file at a new path and no temporary file, and that open names the flag
// and the path when the file cannot be created.
func TestOutputFileReplaceFails(t *testing.T) {
	root := t.TempDir()
	var o OutputFiles
	f, err := o.Open("--json", filepath.Join(root, "x.json"))
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	if err := f.Replace(func(w io.Writer) error { io.WriteString(w, "partial"); return boom }); !errors.Is(err, boom) {
		t.Errorf("replace: %v, want %v", err, boom)
	}
	o.Discard()
	if got := dirNames(t, root); len(got) != 0 {
		t.Errorf("after a failed write the directory holds %q, want nothing", got)
	}
	missing := filepath.Join(root, "no-dir", "x.json")
	_, err = o.Open("--json", missing)
	if want := "--json: open " + missing + ": no such file or directory"; err == nil || err.Error() != want {
		t.Errorf("open in a missing directory: %v, want %q", err, want)
	}
}

// TestOutputFileFIFO checks that a FIFO stays one and its reader gets
// the results.
func TestOutputFileFIFO(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skip(err)
	}
	got := make(chan string, 1)
	go func() {
		b, _ := os.ReadFile(fifo)
		got <- string(b)
	}()
	var o OutputFiles
	f, err := o.Open("--json", fifo)
	if err != nil {
		t.Fatal(err)
	}
	err = f.Replace(func(w io.Writer) error { _, err := io.WriteString(w, "results\n"); return err })
	if err := errors.Join(err, o.Close()); err != nil {
		t.Fatal(err)
	}
	if s := <-got; s != "results\n" {
		t.Errorf("the reader got %q, want %q", s, "results\n")
	}
	if fi, err := os.Lstat(fifo); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("fifo: %v, %v: want it still a FIFO", fi, err)
	}
}

// dirNames lists dir's entries, sorted.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{}
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// TestOutputFileLongName checks that a new file whose name nearly takes
// the 255 bytes a name may have, which open accepts, is also written:
// the temporary name replace writes it under must not be longer.
func TestOutputFileLongName(t *testing.T) {
	root := t.TempDir()
	name := strings.Repeat("é", 100) + strings.Repeat("r", 45) + ".json" // 250 bytes
	var o OutputFiles
	f, err := o.Open("--json", filepath.Join(root, name))
	if err != nil {
		t.Fatal(err)
	}
	err = f.Replace(func(w io.Writer) error { _, err := io.WriteString(w, "results\n"); return err })
	if err := errors.Join(err, o.Close()); err != nil {
		t.Fatal(err)
	}
	if got := dirNames(t, root); !slices.Equal(got, []string{name}) {
		t.Errorf("the directory holds %q, want only the file", got)
	}
	if p := tempPrefix(name); len(p) > 80 || !utf8.ValidString(p) {
		t.Errorf("tempPrefix(%q) = %q: want at most 80 bytes of valid UTF-8", name, p)
	}
}
