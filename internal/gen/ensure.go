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
	"strings"
	"syscall"
	"time"
)

// FormatVersion is the version of the bytes Generate writes for a given
// Config. Raise it with every change that changes them: caches name
// their datasets with it (CacheName), so a binary never reuses, nor
// replaces, a dataset that another generator wrote. Version 2 fixed the
// RIFF size of WebP images larger than 32 KB (0 before, which decoders
// other than FFmpeg reject).
const FormatVersion = 2

// CacheName returns name with FormatVersion appended: the name a cache
// gives the directory of a dataset Ensure generates, so that binaries
// writing different bytes keep theirs apart (a dataset in use by a job
// of one is never moved or removed by another), and an upgraded binary
// generates anew instead of reading bytes it would no longer write.
func CacheName(name string) string { return fmt.Sprintf("%s-fmt%d", name, FormatVersion) }

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
// it is not there yet (cfg.Out is ignored), through Install: an
// interrupted run or several processes generating at once never leave a
// partial dataset behind. While it generates it holds a lock on
// dir+".lock" (lockGenerating), so a second job on the same cache waits
// for the first one's dataset instead of generating it again. It reports
// whether it generated.
func Ensure(ctx context.Context, cfg Config, dir string) (bool, error) {
	if Current(dir) {
		return false, nil
	}
	unlock, err := lockGenerating(ctx, dir, cfg.Waiting)
	if err != nil {
		return false, err
	}
	defer unlock()
	return Install(dir, func(tmp string) error {
		cfg.Out = tmp
		_, err := Generate(ctx, cfg)
		return err
	})
}

// Install makes dir hold what fill writes into an empty directory, once:
// if dir is not Current, fill writes into a new scratch sibling, which
// gets a DONE marker stamped with FormatVersion and is renamed into
// place when complete. Several processes installing at once keep the
// first complete copy and discard the others. A directory holding files
// but no DONE marker is refused (ErrNotGenerated), and so is one of
// another FormatVersion (name cached datasets with CacheName, and that
// never happens). Scratch directories of killed runs, unchanged for a
// day, are removed on the way. It reports whether fill ran to the end
// and its directory was installed.
func Install(dir string, fill func(tmp string) error) (bool, error) {
	if Current(dir) {
		return false, nil
	}
	if err := checkEmpty(dir); err != nil {
		return false, err
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return false, fmt.Errorf("gen: %w", err)
	}
	removeAbandoned(dir+".tmp-", time.Now().Add(-abandonedAfter))
	tmp, err := mkdirUnique(dir + ".tmp-")
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(tmp) // gone after the rename, unless it failed
	if err := fill(tmp); err != nil {
		return false, err
	}
	stamp := stampLine(FormatVersion) + "\n" + time.Now().UTC().Format(time.RFC3339) + "\n"
	if err := os.WriteFile(filepath.Join(tmp, doneFile), []byte(stamp), 0o644); err != nil {
		return false, fmt.Errorf("gen: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		if Current(dir) {
			return false, nil // another process finished first
		}
		if cerr := checkEmpty(dir); cerr != nil {
			return false, cerr
		}
		return false, fmt.Errorf("gen: %w", err)
	}
	return true, nil
}

// checkEmpty returns nil if dir is missing or empty (a directory Ensure
// may fill), ErrNotGenerated if it holds files but no DONE marker, and an
// error naming both versions if it holds a dataset of another
// FormatVersion.
func checkEmpty(dir string) error {
	names, err := readNames(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("gen: %w", err)
	}
	switch {
	case len(names) == 0:
		return nil
	case !slices.Contains(names, doneFile):
		return fmt.Errorf("%w: %s holds files but no %s marker: remove it, or generate into another directory", ErrNotGenerated, dir, doneFile)
	}
	b, _ := os.ReadFile(filepath.Join(dir, doneFile))
	line, _, _ := bytes.Cut(b, []byte("\n"))
	return fmt.Errorf("%w: %s holds a dataset marked %q, not %q: another generator wrote it; remove it, or generate into another directory",
		ErrNotGenerated, dir, line, stampLine(FormatVersion))
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

// abandonedAfter is how long a scratch directory of Ensure goes without
// a change before it is taken for one a killed process left (SIGKILL, an
// out-of-memory kill, a batch job's time limit): generating one dataset
// takes minutes, and each shard written changes the directory.
const abandonedAfter = 24 * time.Hour

// removeAbandoned removes the scratch directories named prefix* that
// have not changed since before, so that killed runs do not leave
// partial datasets behind for good. It never touches one that changed
// since, which another process, maybe on another node sharing the cache,
// may still be filling.
func removeAbandoned(prefix string, before time.Time) {
	ents, _ := os.ReadDir(filepath.Dir(prefix))
	for _, e := range ents {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), filepath.Base(prefix)) {
			continue
		}
		if info, err := e.Info(); err == nil && info.ModTime().Before(before) {
			os.RemoveAll(filepath.Join(filepath.Dir(prefix), e.Name()))
		}
	}
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

// lockPoll is how often lockGenerating tries again for a lock another
// process holds.
const lockPoll = 100 * time.Millisecond

// lockGenerating takes an exclusive flock(2) on dir+".lock", created if
// missing and kept afterwards (removing a lock file races with a process
// about to lock it), waiting while another process or goroutine holds it,
// until ctx ends. The returned function releases it; the kernel releases
// it too when a process dies, so a killed job never blocks the next.
// waiting (nil: none) is called once if it has to wait. Where
// the file cannot be made or the file system has no flock (some network
// mounts), it returns at once without a lock: several jobs then generate
// side by side, and Install keeps the first complete copy, as before.
func lockGenerating(ctx context.Context, dir string, waiting func()) (func(), error) {
	noLock := func() {}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return noLock, nil // Install reports it
	}
	f, err := os.OpenFile(dir+".lock", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return noLock, nil
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil // closing the file releases the lock
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return noLock, nil
		}
		if waiting != nil && errors.Is(err, syscall.EWOULDBLOCK) {
			waiting()
			waiting = nil
		}
		select {
		case <-ctx.Done():
			f.Close()
			return noLock, fmt.Errorf("gen: waiting for another process generating %s: %w", dir, context.Cause(ctx))
		case <-time.After(lockPoll):
		}
	}
}
