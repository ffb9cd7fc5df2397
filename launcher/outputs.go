package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// outputFiles are the files and directories a command writes when its
// work is done, opened or created before the work starts so that a path
// that cannot be written fails at once instead of after it. A command
// that fails removes what it created (discard); one that succeeds closes
// the files (close).
type outputFiles struct {
	files   []*os.File
	created []string // files and directories that did not exist before, removed by discard
	done    bool
}

// open creates or opens path for writing without truncating it (that
// waits until the results are in, see truncateRegular), remembering
// whether it is new. An empty path opens nothing.
func (o *outputFiles) open(flag, path string) (*os.File, error) {
	if path == "" {
		return nil, nil
	}
	// Created only if this open made it: not a file that appeared since a
	// check, nor the target of a link, which stays for the user to see.
	fh, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	created := err == nil
	if errors.Is(err, fs.ErrExist) {
		fh, err = os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o644)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	o.files = append(o.files, fh)
	if created {
		o.created = append(o.created, path)
	}
	return fh, nil
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

// discard closes the files of a failed command and removes the files it
// created, then the directories it created if they are still empty.
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
		return fmt.Errorf("%s: %w", flag, err)
	}
	fh, err := os.CreateTemp(dir, ".datahelix-probe-")
	if err != nil {
		return fmt.Errorf("%s: %s is not writable: %w", flag, dir, err)
	}
	fh.Close()
	return os.Remove(fh.Name())
}

// truncateRegular empties fh, opened at offset 0 and not yet written, if it
// is a regular file (not /dev/stdout or a pipe).
func truncateRegular(fh *os.File) error {
	st, err := fh.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return err
	}
	return fh.Truncate(0)
}
