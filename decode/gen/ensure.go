package gen

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// FormatVersion is the version of the bytes Generate writes for a given
// Config. Raise it with every change that changes them, so that Ensure
// replaces the datasets older binaries left in users' caches. Version 2
// fixed the RIFF size of WebP images larger than 32 KB (0 before, which
// decoders other than FFmpeg reject); datasets stamped before it carry no
// version at all.
const FormatVersion = 2

// ErrNotGenerated reports a directory Ensure should fill that already
// holds files but no DONE marker: not a dataset Ensure made, so it is
// left alone.
var ErrNotGenerated = errors.New("gen: directory was not made by gen.Ensure")

// doneFile marks a directory that Ensure finished generating. Its first
// line is stampLine(FormatVersion); the second says when it was made.
const doneFile = "DONE"

func stampLine(version int) string { return fmt.Sprintf("datahelix gen format %d", version) }

// Current reports whether dir holds a dataset Ensure finished with this
// binary's FormatVersion. A dataset of another version, or of a binary
// older than versions (a DONE marker without one), is not current.
func Current(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, doneFile))
	if err != nil {
		return false
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	return string(line) == stampLine(FormatVersion)
}

// Ensure makes dir hold the dataset cfg describes, generating it only if
// it is not there yet or was made with another FormatVersion (cfg.Out is
// ignored). Generation goes to a temporary sibling directory renamed into
// place when complete, so an interrupted run or several processes
// generating at once never leave a partial dataset behind; a stale dataset
// is moved aside only once its replacement is complete, and then removed.
// It refuses (ErrNotGenerated) a directory holding files but no DONE
// marker. It reports whether it generated.
func Ensure(ctx context.Context, cfg Config, dir string) (bool, error) {
	if Current(dir) {
		return false, nil
	}
	if err := checkReplaceable(dir); err != nil {
		if Current(dir) {
			return false, nil // replaced by another process while we looked
		}
		return false, err
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return false, fmt.Errorf("gen: %w", err)
	}
	tmp, err := mkdirUnique(dir + ".tmp-")
	if err != nil {
		return false, err
	}
	cfg.Out = tmp
	if _, err := Generate(ctx, cfg); err != nil {
		os.RemoveAll(tmp)
		return false, err
	}
	stamp := stampLine(FormatVersion) + "\n" + time.Now().UTC().Format(time.RFC3339) + "\n"
	if err := os.WriteFile(filepath.Join(tmp, doneFile), []byte(stamp), 0o644); err != nil {
		os.RemoveAll(tmp)
		return false, fmt.Errorf("gen: %w", err)
	}
	made, err := install(tmp, dir)
	if err != nil || !made {
		os.RemoveAll(tmp)
	}
	return made, err
}

// checkReplaceable returns nil if dir is missing, empty, or holds a DONE
// marker (a dataset Ensure made, of any version), and ErrNotGenerated
// otherwise, so that Ensure refuses before any work is done.
func checkReplaceable(dir string) error {
	names, err := readNames(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil // missing, or moved aside by another process as we read
	}
	if err != nil {
		return fmt.Errorf("gen: %w", err)
	}
	if len(names) == 0 || slices.Contains(names, doneFile) {
		return nil
	}
	return fmt.Errorf("%w: %s holds files but no %s marker: remove it, or generate into another directory", ErrNotGenerated, dir, doneFile)
}

// readNames lists the names in dir, unsorted.
func readNames(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}

// install renames the complete dataset tmp to dir. If dir is there
// already, it is either current (another process finished first: install
// reports false and leaves it) or stale, and then it is moved aside,
// replaced and removed. Only a directory with a DONE marker is ever moved
// aside. The window where dir is missing is two renames wide; a process
// ensuring dir meanwhile regenerates and then keeps whichever complete
// copy got there first.
func install(tmp, dir string) (bool, error) {
	var err error
	for range 4 {
		if err = os.Rename(tmp, dir); err == nil {
			return true, nil
		}
		if Current(dir) {
			return false, nil // another process finished first
		}
		if _, serr := os.Stat(filepath.Join(dir, doneFile)); serr != nil {
			continue // gone (moved aside by another process), or not ours: retry the rename
		}
		// If dir is gone already (another process moved it), try again.
		old := uniqueName(dir + ".stale-")
		if rerr := os.Rename(dir, old); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
			return false, fmt.Errorf("gen: move stale %s aside: %w", dir, rerr)
		}
		defer os.RemoveAll(old)
	}
	return false, fmt.Errorf("gen: install %s: %w", dir, err)
}

// uniqueName returns prefix followed by the process id and a random
// suffix: a name no other process, nor goroutine of this one, picks.
func uniqueName(prefix string) string {
	return fmt.Sprintf("%s%d-%016x", prefix, os.Getpid(), rand.Uint64())
}

// mkdirUnique creates a new directory named by uniqueName, with the
// umask's usual permissions (unlike os.MkdirTemp's 0700: a dataset
// directory is read by others).
func mkdirUnique(prefix string) (string, error) {
	for {
		name := uniqueName(prefix)
		err := os.Mkdir(name, 0o755)
		if err == nil {
			return name, nil
		}
		if !errors.Is(err, os.ErrExist) {
			return "", fmt.Errorf("gen: %w", err)
		}
	}
}
