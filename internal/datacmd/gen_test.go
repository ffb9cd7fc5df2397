package datacmd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/datahelix/datahelix/internal/cli"
	"github.com/datahelix/datahelix/internal/cli/clitest"
	"github.com/datahelix/datahelix/internal/gen"
)

// TestGenRefusesDirectoryWithOtherShards checks that gen does not add a
// second dataset's shards to a directory a run would read whole, and
// names the shard it found and those it would write
// (testdata/gen_out_in_use.golden).
func TestGenRefusesDirectoryWithOtherShards(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "mixed-000000.tar"), []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"gen", "--preset", "text", "--samples", "2", "--out", dir}
	if err := commandErr(t, args...); !errors.Is(err, gen.ErrOutInUse) {
		t.Errorf("%v, want gen.ErrOutInUse", err)
	}
	tr := clitest.NewTranscript(dir, "DIR")
	if code, stdout, stderr := tr.Run(runMain, args...); code != 1 || strings.Count(stderr, "\n") != 1 || stdout != "" {
		t.Errorf("exit %d, stdout %q, stderr %q; want exit 1 and one line", code, stdout, stderr)
	}
	clitest.Golden(t, "gen_out_in_use.golden", tr.String())
	if m, _ := filepath.Glob(filepath.Join(dir, "*")); len(m) != 1 {
		t.Errorf("directory holds %v, want only the old shard", m)
	}
}

// TestGenDefaultRefusesIgnoredFlags checks that --default, which
// generates a fixed dataset, refuses the flags it would ignore, naming
// them, instead of silently generating something else.
func TestGenDefaultRefusesIgnoredFlags(t *testing.T) {
	tr := clitest.NewTranscript()
	for _, tt := range []struct {
		args []string
	}{
		{[]string{"--preset", "kinetics"}},
		{[]string{"--samples", "10", "--shards", "2"}},
		{[]string{"--shards", "1"}}, // the default value, but given
		{[]string{"--size-scale", "0.5", "--preset", "text", "--duration-scale", "2"}},
	} {
		dir := filepath.Join(t.TempDir(), "out")
		args := append([]string{"gen", "--default", "--out", dir}, tt.args...)
		tr.Add(append([]string{"gen", "--default", "--out", "OUT"}, tt.args...), usageLine(t, args...))
		if _, err := os.Stat(dir); err == nil {
			t.Errorf("%q: %s was created", tt.args, dir)
		}
	}
	clitest.Golden(t, "gen_default_refuses.golden", tr.String())
}

// TestGenProgressLines checks the progress lines of a log against a
// plain reference: a line whenever done reaches another tenth of total.
func TestGenProgressLines(t *testing.T) {
	// Worked by hand: a line when done crosses a tenth of total.
	hand := map[int][]int{3: {1, 2, 3}, 25: {3, 5, 8, 10, 13, 15, 18, 20, 23, 25}, 1: {1}}
	for _, total := range []int{1, 3, 7, 10, 11, 25, 99, 128, 1000} {
		var buf bytes.Buffer
		progress := progressLines(&buf, "kinetics", time.Now())
		for done := 1; done <= total; done++ {
			progress(done, total)
		}
		got := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
		if dones, ok := hand[total]; ok {
			var want []string
			for _, d := range dones {
				want = append(want, fmt.Sprintf("gen: kinetics: %d/%d samples (%d%%), 0 s", d, total, 100*d/total))
			}
			if !slices.Equal(got, want) {
				t.Errorf("total %d: got lines\n%s\nwant\n%s", total, strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		}
		if len(got) > 10 || got[len(got)-1] != fmt.Sprintf("gen: kinetics: %d/%d samples (100%%), 0 s", total, total) {
			t.Errorf("total %d: got %d lines ending %q, want at most 10 ending at 100%%", total, len(got), got[len(got)-1])
		}
	}
}

// TestGenProgressInLog runs gen with stderr not a terminal, as in a batch
// log: one line per tenth of the samples, then the summary; with --quiet
// only the summary.
func TestGenProgressInLog(t *testing.T) {
	if _, err := exec.LookPath("ffmpeg"); err != nil {
		t.Skip("ffmpeg CLI not installed")
	}
	for _, quiet := range []bool{false, true} {
		args := []string{"gen", "--preset", "text", "--samples", "20", "--out", t.TempDir()}
		if quiet {
			args = append(args, "--quiet")
		}
		code, _, stderr := runMain(args...)
		lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
		want := 11
		if quiet {
			want = 1
		}
		if code != 0 || len(lines) != want || !strings.HasPrefix(lines[len(lines)-1], "gen: text: 20 samples in 1 shard,") {
			t.Errorf("quiet %v: exit %d, stderr %q; want exit 0 and %d lines ending in the summary", quiet, code, stderr, want)
			continue
		}
		if !quiet && (!strings.HasPrefix(lines[0], "gen: text: 2/20 samples (10%)") || !strings.HasPrefix(lines[9], "gen: text: 20/20 samples (100%)")) {
			t.Errorf("progress lines %q, want 2/20 (10%%) to 20/20 (100%%)", lines[:10])
		}
	}
}

// TestGenFlagBounds checks that gen refuses, as usage errors naming the
// flag and its bound, counts that ran out of memory and scales that are
// not numbers or beyond the encoders' limits, before it creates --out.
func TestGenFlagBounds(t *testing.T) {
	tr := clitest.NewTranscript()
	for _, tt := range []struct {
		args []string
		flag string // the cli.FlagError's
	}{
		{[]string{"--preset", "laion", "--samples", "1", "--size-scale", "NaN"}, "size-scale"},
		{[]string{"--preset", "laion", "--samples", "1", "--size-scale", "Inf"}, "size-scale"},
		{[]string{"--preset", "laion", "--samples", "1", "--size-scale", "100"}, "size-scale"},
		{[]string{"--preset", "laion", "--samples", "1", "--size-scale", "2.5"}, "size-scale"},
		{[]string{"--preset", "kinetics", "--samples", "1", "--duration-scale", "Inf"}, "duration-scale"},
		{[]string{"--preset", "kinetics", "--samples", "1", "--duration-scale", "NaN"}, "duration-scale"},
		{[]string{"--preset", "kinetics", "--samples", "1", "--duration-scale", "-1"}, "duration-scale"},
		{[]string{"--preset", "text", "--samples", "99999999999"}, "samples"},
		{[]string{"--preset", "text", "--samples", "10000001"}, "samples"},
		{[]string{"--preset", "text", "--samples", "10000000", "--shards", "100001"}, "shards"},
		{[]string{"--preset", "text", "--samples", "4", "--shards", "5"}, "shards"},
	} {
		dir := filepath.Join(t.TempDir(), "out")
		args := append([]string{"gen", "--quiet", "--out", dir}, tt.args...)
		var fe cli.FlagError
		if err := commandErr(t, args...); !errors.As(err, &fe) || fe.Flag != tt.flag {
			t.Errorf("%q: %#v, want a cli.FlagError about --%s", tt.args, err, tt.flag)
		}
		tr.Add(append([]string{"gen", "--quiet", "--out", "OUT"}, tt.args...), usageLine(t, args...))
		if _, err := os.Stat(dir); err == nil {
			t.Errorf("%q: %s was created", tt.args, dir)
		}
	}
	clitest.Golden(t, "gen_flag_bounds.golden", tr.String()) // the bounds, as the user reads them
}

// TestGenInterruptedKeepsDirectory interrupts gen over an existing
// dataset, and into a new directory, once its first shard is complete
// (6 samples of 10 in 2 shards, one worker): the old shards stay as they
// were, and the new directory is not left behind.
func TestGenInterruptedKeepsDirectory(t *testing.T) {
	if _, err := exec.LookPath("ffmpeg"); err != nil {
		t.Skip("ffmpeg CLI not installed")
	}
	dir := filepath.Join(t.TempDir(), "ds")
	if code, _, stderr := runMain("gen", "--preset", "imagenet", "--samples", "4", "--shards", "2", "--out", dir, "--quiet", "--size-scale", "0.2"); code != 0 {
		t.Fatalf("gen: exit %d, %s", code, stderr)
	}
	old := map[string][]byte{}
	for _, n := range []string{"imagenet-000000.tar", "imagenet-000001.tar"} {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		old[n] = b
	}
	fresh := filepath.Join(t.TempDir(), "new", "ds")
	for _, out := range []string{dir, fresh} {
		// Image samples take ffmpeg runs: stop in the second shard.
		ctx, cancel := context.WithCancel(context.Background())
		var errb syncBuffer
		errb.onWrite = func(s string) {
			if strings.Contains(s, "gen: imagenet: 6/") { // the progress line's count: 6 samples done
				cancel()
			}
		}
		c, rest, _ := cli.Lookup(commands, []string{"gen", "--preset", "imagenet", "--samples", "10", "--shards", "2", "--seed", "7", "--out", out, "--workers", "1", "--size-scale", "0.2"})
		err := c.Run(ctx, io.Discard, &errb, rest)
		cancel()
		// Only the 6th sample's progress line cancels the context.
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("interrupted gen into %s: %v, stderr %q; want it stopped after 6 samples", out, err, errb.String())
		}
	}
	for n, b := range old {
		if got, err := os.ReadFile(filepath.Join(dir, n)); err != nil || !bytes.Equal(got, b) {
			t.Errorf("%s changed by the interrupted gen (%v)", n, err)
		}
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "*")); len(m) != 2 {
		t.Errorf("%s holds %v after the interrupted gen, want the 2 old shards", dir, m)
	}
	if _, err := os.Stat(filepath.Dir(fresh)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("interrupted gen into a new directory left %s (%v)", filepath.Dir(fresh), err)
	}
}

// syncBuffer is a buffer safe for concurrent writes that calls onWrite
// with each write.
type syncBuffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	onWrite func(string)
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.onWrite != nil {
		b.onWrite(string(p))
	}
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
