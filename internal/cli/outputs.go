package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"unicode/utf8"
)

// OutputFiles are the files and directories a command writes when its
// work is done, checked before the work starts so that a path that
// cannot be written fails at once instead of after it. A command that
// fails removes the directories it created (Discard); one that succeeds
// closes the files (Close).
type OutputFiles struct {
	files   []*os.File // existing files, opened by open
	created []string   // directories that did not exist before, removed by discard
	done    bool
}

// OutputFile is one output of a command, Open checked it, Replace writes
// it: an existing file (fh) or a new one (path).
type OutputFile struct {
	fh   *os.File    // an existing file, /dev/stdout, a FIFO, or a link to one; nil for a new file
	path string      // where a new file goes: the path, or the target of a link to no file yet
	mode fs.FileMode // a new file's permissions, as creating it gave them (0644 less the umask)
}

// Open checks that path can be written, without changing it yet: an
// existing file is opened but not truncated (Replace does that when the
// results are in), and a new one is created and removed again at once,
// to be created only by Replace, so that a job killed (SIGKILL, or MPI
// aborting it when another rank fails) leaves no empty file behind. A
// link to no file yet stays a link, its target counting as the new file.
// An empty path opens nothing.
func (o *OutputFiles) Open(flag, path string) (*OutputFile, error) {
	if path == "" {
		return nil, nil
	}
	fh, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err == nil {
		o.files = append(o.files, fh)
		return &OutputFile{fh: fh}, nil
	}
	if errors.Is(err, fs.ErrNotExist) {
		target := LinkTarget(path)
		if fh, err = os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644); err == nil {
			st, serr := fh.Stat()
			fh.Close()
			os.Remove(target)
			if err = serr; err == nil {
				return &OutputFile{path: target, mode: st.Mode().Perm()}, nil
			}
		}
	}
	return nil, OutputError{Flag: flag, Path: path, Err: err}
}

// OutputError is an output path (--json, --trace, --out,
// --checkpoint-dir) that cannot be written, found before the work
// starts. It reads "--json: open /x/y.json: no such file or directory",
// and errors.Is sees the file system's error through it.
type OutputError struct {
	Flag string // as typed: "--json"
	Path string // the path given
	Err  error  // what the file system said; it names the path
}

func (e OutputError) Error() string { return e.Flag + ": " + e.Err.Error() }
func (e OutputError) Unwrap() error { return e.Err }

// LinkTarget is the path that writing to p creates or opens: p with its
// symbolic links followed, also one whose target does not exist yet (a
// dangling link, which os.Stat cannot compare), as far as they go.
func LinkTarget(p string) string {
	for range 40 { // the kernel's limit on links followed (ELOOP)
		fi, err := os.Lstat(p)
		if err != nil || fi.Mode()&os.ModeSymlink == 0 {
			break
		}
		t, err := os.Readlink(p)
		if err != nil {
			break
		}
		if !filepath.IsAbs(t) {
			t = filepath.Join(filepath.Dir(p), t)
		}
		p = t
	}
	return p
}

// Replace has write fill the file with a command's results. An existing
// file is emptied first if it is a regular file (not /dev/stdout or a
// pipe). A new one is written under a temporary name in its directory
// and renamed into place once complete, so that it never appears under
// its name empty or partial.
func (f *OutputFile) Replace(write func(io.Writer) error) error {
	if f.fh != nil {
		st, err := f.fh.Stat()
		if err == nil && st.Mode().IsRegular() {
			err = f.fh.Truncate(0)
		}
		if err != nil {
			return err
		}
		return write(f.fh)
	}
	tmp, err := os.CreateTemp(filepath.Dir(f.path), tempPrefix(filepath.Base(f.path)))
	if err != nil {
		return err
	}
	err = write(tmp)
	if err == nil {
		err = tmp.Chmod(f.mode)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), f.path)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}

// tempPrefix is the pattern of the temporary name Replace writes the file
// base under: ".BASE.tmp-" and CreateTemp's random digits, BASE cut to
// its first 64 bytes (at a character boundary) so that the name stays
// within the 255 bytes a file name may have when base itself nearly
// takes them, which Open's check of the path accepted.
func tempPrefix(base string) string {
	for len(base) > 64 {
		_, n := utf8.DecodeLastRuneInString(base)
		base = base[:len(base)-n]
	}
	return "." + base + ".tmp-"
}

// Dir creates dir if needed and checks that a file can be created in
// it (CheckWritableDir), remembering the directories it made, parents
// included.
func (o *OutputFiles) Dir(flag, dir string) error {
	// The directories MkdirAll will create, outermost first.
	var missing []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil || d == filepath.Dir(d) {
			break
		}
		missing = append([]string{d}, missing...)
	}
	if err := CheckWritableDir(flag, dir); err != nil {
		return err
	}
	o.created = append(o.created, missing...)
	return nil
}

// Close closes the files after a successful command.
func (o *OutputFiles) Close() error {
	o.done = true
	var err error
	for _, fh := range o.files {
		if cerr := fh.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("write %s: %w", fh.Name(), cerr)
		}
	}
	return err
}

// Discard closes the files of a failed command and removes the
// directories it created if they are still empty.
func (o *OutputFiles) Discard() {
	if o.done {
		return
	}
	o.done = true
	for _, fh := range o.files {
		fh.Close()
	}
	for i := len(o.created) - 1; i >= 0; i-- {
		os.Remove(o.created[i]) // a directory only goes if empty
	}
}

// CheckWritableDir creates dir if needed and checks that a file can be
// created in it.
func CheckWritableDir(flag, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return OutputError{Flag: flag, Path: dir, Err: err}
	}
	fh, err := os.CreateTemp(dir, ".datahelix-probe-")
	if err != nil {
		return OutputError{Flag: flag, Path: dir, Err: fmt.Errorf("%s is not writable: %w", dir, err)}
	}
	fh.Close()
	return os.Remove(fh.Name())
}
