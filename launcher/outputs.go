package launcher

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"unicode/utf8"
)

// outputFiles are the files and directories a command writes when its
// work is done, checked before the work starts so that a path that
// cannot be written fails at once instead of after it. A command that
// fails removes the directories it created (discard); one that succeeds
// closes the files (close).
type outputFiles struct {
	files   []*os.File // existing files, opened by open
	created []string   // directories that did not exist before, removed by discard
	done    bool
}

// outputFile is one output of a command, open checked it, replace writes
// it: an existing file (fh) or a new one (path).
type outputFile struct {
	fh   *os.File    // an existing file, /dev/stdout, a FIFO, or a link to one; nil for a new file
	path string      // where a new file goes: the path, or the target of a link to no file yet
	mode fs.FileMode // a new file's permissions, as creating it gave them (0644 less the umask)
}

// open checks that path can be written, without changing it yet: an
// existing file is opened but not truncated (replace does that when the
// results are in), and a new one is created and removed again at once,
// to be created only by replace, so that a job killed (SIGKILL, or MPI
// aborting it when another rank fails) leaves no empty file behind. A
// link to no file yet stays a link, its target counting as the new file.
// An empty path opens nothing.
func (o *outputFiles) open(flag, path string) (*outputFile, error) {
	if path == "" {
		return nil, nil
	}
	fh, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err == nil {
		o.files = append(o.files, fh)
		return &outputFile{fh: fh}, nil
	}
	if errors.Is(err, fs.ErrNotExist) {
		target := linkTarget(path)
		if fh, err = os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644); err == nil {
			st, serr := fh.Stat()
			fh.Close()
			os.Remove(target)
			if err = serr; err == nil {
				return &outputFile{path: target, mode: st.Mode().Perm()}, nil
			}
		}
	}
	return nil, outputError{flag: flag, path: path, err: err}
}

// outputError is an output path (--json, --trace, --out,
// --checkpoint-dir) that cannot be written, found before the work
// starts. It reads "--json: open /x/y.json: no such file or directory",
// and errors.Is sees the file system's error through it.
type outputError struct {
	flag string // as typed: "--json"
	path string // the path given
	err  error  // what the file system said; it names the path
}

func (e outputError) Error() string { return e.flag + ": " + e.err.Error() }
func (e outputError) Unwrap() error { return e.err }

// linkTarget is the path that writing to p creates or opens: p with its
// symbolic links followed, also one whose target does not exist yet (a
// dangling link, which os.Stat cannot compare), as far as they go.
func linkTarget(p string) string {
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

// replace has write fill the file with a command's results. An existing
// file is emptied first if it is a regular file (not /dev/stdout or a
// pipe). A new one is written under a temporary name in its directory
// and renamed into place once complete, so that it never appears under
// its name empty or partial.
func (f *outputFile) replace(write func(io.Writer) error) error {
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

// tempPrefix is the pattern of the temporary name replace writes the file
// base under: ".BASE.tmp-" and CreateTemp's random digits, BASE cut to
// its first 64 bytes (at a character boundary) so that the name stays
// within the 255 bytes a file name may have when base itself nearly
// takes them, which open's check of the path accepted.
func tempPrefix(base string) string {
	for len(base) > 64 {
		_, n := utf8.DecodeLastRuneInString(base)
		base = base[:len(base)-n]
	}
	return "." + base + ".tmp-"
}

// dir creates dir if needed and checks that a file can be created in
// it (checkWritableDir), remembering the directories it made, parents
// included.
func (o *outputFiles) dir(flag, dir string) error {
	// The directories MkdirAll will create, outermost first.
	var missing []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil || d == filepath.Dir(d) {
			break
		}
		missing = append([]string{d}, missing...)
	}
	if err := checkWritableDir(flag, dir); err != nil {
		return err
	}
	o.created = append(o.created, missing...)
	return nil
}

// close closes the files after a successful command.
func (o *outputFiles) close() error {
	o.done = true
	var err error
	for _, fh := range o.files {
		if cerr := fh.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("write %s: %w", fh.Name(), cerr)
		}
	}
	return err
}

// discard closes the files of a failed command and removes the
// directories it created if they are still empty.
func (o *outputFiles) discard() {
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

// checkWritableDir creates dir if needed and checks that a file can be
// created in it.
func checkWritableDir(flag, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return outputError{flag: flag, path: dir, err: err}
	}
	fh, err := os.CreateTemp(dir, ".datahelix-probe-")
	if err != nil {
		return outputError{flag: flag, path: dir, err: fmt.Errorf("%s is not writable: %w", dir, err)}
	}
	fh.Close()
	return os.Remove(fh.Name())
}
