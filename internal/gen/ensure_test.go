package gen

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// ensureCfg is a dataset quick to generate (text renders no media).
var ensureCfg = Config{Preset: "text", Samples: 3, Shards: 1, Seed: 5}

// referenceShard generates ensureCfg once with Generate.
func referenceShard(t *testing.T) []byte {
	t.Helper()
	cfg := ensureCfg
	cfg.Out = t.TempDir()
	paths, err := Generate(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fakeDataset writes a dataset directory as an older binary (or another
// process) left it: a shard that is not what ensureCfg generates, a file
// Ensure does not write, and done as the DONE marker (none if empty).
func fakeDataset(t *testing.T, dir, done string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{ShardName("text", 0): "old shard", "sentinel": "left by the old dataset"}
	if done != "" {
		files[doneFile] = done
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// checkLeftovers fails if the parent of dir holds anything but dir.
func checkLeftovers(t *testing.T, dir string) {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(filepath.Dir(dir), "*"))
	m = slices.DeleteFunc(m, func(p string) bool { return p == dir+".lock" })
	if len(m) != 1 || m[0] != dir {
		t.Errorf("parent directory holds %v, want only %s (and its lock file)", m, dir)
	}
}

// TestEnsureVersions checks which existing directories Ensure keeps and
// which it refuses: never one another generator wrote (caches keep those
// apart with CacheName).
func TestEnsureVersions(t *testing.T) {
	needFFmpeg(t)
	want := referenceShard(t)
	current := stampLine(FormatVersion) + "\n2026-01-01T00:00:00Z\n"
	for _, tt := range []struct {
		name  string
		done  string // "" and no files: missing directory
		files bool   // fake dataset present
		made  bool
		err   error
	}{
		{"missing", "", false, true, nil},
		{"current", current, true, false, nil},
		{"no version (binaries before versions)", "2025-11-30T10:00:00Z\n", true, false, ErrNotGenerated},
		{"empty marker", "\n", true, false, ErrNotGenerated},
		{"older version", "datahelix gen format 1\n2025-11-30T10:00:00Z\n", true, false, ErrNotGenerated},
		{"newer version", fmt.Sprintf("datahelix gen format %d\n", FormatVersion+1), true, false, ErrNotGenerated},
		{"version as a prefix", stampLine(FormatVersion) + "0\n", true, false, ErrNotGenerated},
		{"no marker", "", true, false, ErrNotGenerated},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "ds")
			if tt.files {
				fakeDataset(t, dir, tt.done)
			}
			made, err := Ensure(context.Background(), ensureCfg, dir)
			if made != tt.made || !errors.Is(err, tt.err) || (err == nil) != (tt.err == nil) {
				t.Fatalf("got made %v, error %v; want made %v, error %v", made, err, tt.made, tt.err)
			}
			checkLeftovers(t, dir)
			shard, _ := os.ReadFile(filepath.Join(dir, ShardName("text", 0)))
			_, serr := os.Stat(filepath.Join(dir, "sentinel"))
			if !tt.made {
				// Untouched: the old files are all still there.
				if string(shard) != "old shard" || serr != nil {
					t.Errorf("got shard %q and sentinel error %v, want the old directory untouched", shard, serr)
				}
				if done, _ := os.ReadFile(filepath.Join(dir, doneFile)); string(done) != tt.done {
					t.Errorf("got DONE %q, want %q untouched", done, tt.done)
				}
				return
			}
			if !bytes.Equal(shard, want) || serr == nil {
				t.Errorf("got a %d-byte shard (want the %d-byte generated one) and sentinel error %v (want it gone)", len(shard), len(want), serr)
			}
			if !Current(dir) {
				t.Errorf("Current(%s) = false after Ensure generated it", dir)
			}
			again, err := Ensure(context.Background(), ensureCfg, dir)
			if again || err != nil {
				t.Errorf("second Ensure: got made %v, error %v; want false, nil", again, err)
			}
		})
	}
}

// TestEnsureRefusesBeforeWork checks that a directory Ensure did not make
// is refused before Generate runs (a missing ffmpeg would fail it).
func TestEnsureRefusesBeforeWork(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ds")
	fakeDataset(t, dir, "")
	cfg := ensureCfg
	cfg.FFmpeg = "/nonexistent/ffmpeg"
	_, err := Ensure(context.Background(), cfg, dir)
	if !errors.Is(err, ErrNotGenerated) || !strings.Contains(err.Error(), dir) {
		t.Errorf("got %v, want ErrNotGenerated naming %s", err, dir)
	}
	checkLeftovers(t, dir)
}

// TestEnsureConcurrent has several goroutines ensure the same missing
// directory at once: all succeed, one copy is installed, and no temporary
// directory is left.
func TestEnsureConcurrent(t *testing.T) {
	needFFmpeg(t)
	want := referenceShard(t)
	dir := filepath.Join(t.TempDir(), "ds")
	const n = 4
	var wg sync.WaitGroup
	made := make([]bool, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { made[i], errs[i] = Ensure(context.Background(), ensureCfg, dir) })
	}
	wg.Wait()
	checkEnsured(t, "goroutines", dir, want, made, errs)
}

// TestEnsureWaitsForTheLock checks that Ensure waits while another
// process holds the dataset's lock, generating nothing and saying so once
// (Config.Waiting), and gives up with the context's cause, naming the
// dataset, when its context ends.
func TestEnsureWaitsForTheLock(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ds")
	unlock, err := lockGenerating(context.Background(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	stop := errors.New("job interrupted")
	ctx, cancel := context.WithCancelCause(context.Background())
	time.AfterFunc(3*lockPoll, func() { cancel(stop) })
	cfg := ensureCfg
	waited := 0
	cfg.Waiting = func() { waited++ }
	made, err := Ensure(ctx, cfg, dir)
	if made || !errors.Is(err, stop) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("Ensure under a held lock = %v, %v; want false and an error naming %s with the cause", made, err, dir)
	}
	if waited != 1 {
		t.Errorf("Ensure under a held lock called Waiting %d times, want once", waited)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("Ensure touched %s while waiting (stat: %v)", dir, err)
	}
}

// TestCacheName checks that a cache name carries the format version, so
// that binaries writing different bytes never share a directory.
func TestCacheName(t *testing.T) {
	if got, want := CacheName("default-seed1"), fmt.Sprintf("default-seed1-fmt%d", FormatVersion); got != want {
		t.Errorf("CacheName = %q, want %q", got, want)
	}
}

// TestEnsureConcurrentProcesses is TestEnsureConcurrent with processes
// (this test binary run again), as several ranks or jobs on one cache.
func TestEnsureConcurrentProcesses(t *testing.T) {
	if dir := os.Getenv("GEN_ENSURE_CHILD_DIR"); dir != "" {
		made, err := Ensure(context.Background(), ensureCfg, dir)
		if err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(3)
		}
		fmt.Printf("made=%v\n", made)
		os.Exit(0)
	}
	needFFmpeg(t)
	want := referenceShard(t)
	dir := filepath.Join(t.TempDir(), "ds")
	const n = 3
	cmds := make([]*exec.Cmd, n)
	outs := make([]bytes.Buffer, n)
	for i := range cmds {
		cmds[i] = exec.Command(os.Args[0], "-test.run", "^TestEnsureConcurrentProcesses$")
		cmds[i].Env = append(os.Environ(), "GEN_ENSURE_CHILD_DIR="+dir)
		cmds[i].Stdout, cmds[i].Stderr = &outs[i], &outs[i]
		if err := cmds[i].Start(); err != nil {
			t.Fatal(err)
		}
	}
	made := make([]bool, n)
	errs := make([]error, n)
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			errs[i] = fmt.Errorf("%v: %s", err, outs[i].String())
		}
		var err error
		if made[i], err = strconv.ParseBool(strings.TrimPrefix(strings.TrimSpace(outs[i].String()), "made=")); err != nil && errs[i] == nil {
			errs[i] = fmt.Errorf("child printed %q: %v", outs[i].String(), err)
		}
	}
	checkEnsured(t, "processes", dir, want, made, errs)
}

func checkEnsured(t *testing.T, name, dir string, want []byte, made []bool, errs []error) {
	t.Helper()
	count := 0
	for i := range made {
		if errs[i] != nil {
			t.Errorf("%s: Ensure %d: %v", name, i, errs[i])
		}
		if made[i] {
			count++
		}
	}
	if count != 1 {
		t.Errorf("%s: %d Ensure calls reported generating, want 1: the others wait for its lock", name, count)
	}
	shard, err := os.ReadFile(filepath.Join(dir, ShardName("text", 0)))
	if err != nil || !bytes.Equal(shard, want) || !Current(dir) {
		t.Errorf("%s: got a %d-byte shard (%v), current %v; want the %d-byte generated one, current", name, len(shard), err, Current(dir), len(want))
	}
	checkLeftovers(t, dir)
}

// TestEnsureRemovesAbandonedScratch checks that Ensure removes a scratch
// directory a killed run left a day ago, and keeps one changed recently,
// which another process may still be filling.
func TestEnsureRemovesAbandonedScratch(t *testing.T) {
	needFFmpeg(t)
	dir := filepath.Join(t.TempDir(), "ds")
	old, fresh := dir+".tmp-123-00000000000000aa", dir+".tmp-456-00000000000000bb"
	for _, p := range []string{old, fresh} {
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	day := time.Now().Add(-25 * time.Hour)
	if err := os.Chtimes(old, day, day); err != nil {
		t.Fatal(err)
	}
	if _, err := Ensure(context.Background(), ensureCfg, dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(old); err == nil {
		t.Errorf("%s, unchanged for 25 hours, is still there", old)
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Errorf("%s, changed just now, was removed: %v", fresh, err)
	}
}
