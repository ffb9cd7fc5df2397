package launcher

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/datahelix/datahelix/internal/cli"
	"github.com/datahelix/datahelix/internal/cli/clitest"
	"github.com/datahelix/datahelix/internal/gen/gentest"
)

// mpirunSplit runs the test binary as datahelix under mpirun, rank 0 with
// args0 and rank 1 with args1 (MPI's MPMD syntax, "prog a : prog b"),
// and returns its output, how long it took and its error.
func mpirunSplit(t *testing.T, args0, args1 []string) (string, time.Duration, error) {
	t.Helper()
	start := time.Now()
	args := append(append([]string{}, args0...), append([]string{":", "-np", "1", os.Args[0]}, args1...)...)
	out, err := mpirunMain(t, 1, args...)
	return out, time.Since(start), err
}

// TestRanksThatDisagreeEndTheJob starts the two ranks of a job with
// settings or data that differ. Each of these hung until the time limit
// (different --steps for torch, --loader, --check-every, an empty shard,
// a dataset one rank cannot open) or ended with a message about
// malformed blocks (--batch), or trained silently on another dataset:
// the job must end at once, with one message naming what differs.
func TestRanksThatDisagreeEndTheJob(t *testing.T) {
	if testing.Short() {
		t.Skip("runs several mpirun jobs")
	}
	data := gentest.Tiny(t) // 8 shards of 4 samples
	other := t.TempDir()    // the same shards but one
	shards, _ := filepath.Glob(filepath.Join(data, "*.tar"))
	for _, p := range shards[:len(shards)-1] {
		if err := os.Symlink(p, filepath.Join(other, filepath.Base(p))); err != nil {
			t.Fatal(err)
		}
	}
	// The last one replaced by an empty tar: two blocks of zeros.
	empty := t.TempDir()
	for _, p := range shards[:len(shards)-1] {
		if err := os.Symlink(p, filepath.Join(empty, filepath.Base(p))); err != nil {
			t.Fatal(err)
		}
	}
	last := filepath.Base(shards[len(shards)-1])
	if err := os.WriteFile(filepath.Join(empty, last), make([]byte, 1024), 0o644); err != nil {
		t.Fatal(err)
	}
	tr := clitest.NewTranscript(data, "DATA", other, "OTHER", empty, "EMPTY", os.TempDir(), "TMPDIR")
	for _, tt := range []struct {
		name         string
		rank0, rank1 []string
		status       int
	}{
		{"steps, torch", fastRun(data, "--loader", "torch", "--steps", "4"), fastRun(data, "--loader", "torch", "--steps", "2"), cli.ExitDisagree},
		{"loader list", fastRun(data, "--loader", "helix", "--steps", "2"), fastRun(data, "--loader", "helix,torch", "--steps", "2"), cli.ExitDisagree},
		{"batch", fastRun(data, "--loader", "helix", "--steps", "2"), fastRun(data, "--loader", "helix", "--steps", "2", "--batch", "1"), cli.ExitDisagree},
		{"check-every", fastRun(data, "--loader", "helix", "--steps", "2"), fastRun(data, "--loader", "helix", "--steps", "2", "--check-every", "1"), cli.ExitDisagree},
		// What is trained and how it is timed: rank 0's values were
		// reported for the job while rank 1 trained 3-frame clips.
		{"frames", fastRun(data, "--loader", "helix", "--steps", "2"), fastRun(data, "--loader", "helix", "--steps", "2", "--frames", "3"), cli.ExitDisagree},
		{"gpu-step-ms", fastRun(data, "--loader", "helix", "--steps", "2"), fastRun(data, "--loader", "helix", "--steps", "2", "--gpu-step-ms", "7.5"), cli.ExitDisagree},
		{"workers", fastRun(data, "--loader", "helix", "--steps", "2"), fastRun(data, "--loader", "helix", "--steps", "2", "--workers", "2"), cli.ExitDisagree},
		{"another dataset", fastRun(data, "--loader", "helix", "--steps", "2"), fastRun(other, "--loader", "helix", "--steps", "2"), cli.ExitDisagree},
		{"a dataset one rank cannot open", fastRun(data, "--loader", "helix", "--steps", "2"), fastRun(filepath.Join(other, "none"), "--loader", "helix", "--steps", "2"), cli.ExitBadInput},
		{"the default dataset on one rank", fastRun(data, "--loader", "helix", "--steps", "2"), fastRun("", "--loader", "helix", "--steps", "2"), cli.ExitDisagree},
		{"an empty shard", fastRun(empty, "--loader", "torch", "--steps", "2"), fastRun(empty, "--loader", "torch", "--steps", "2"), cli.ExitBadInput},
	} {
		out, took, err := mpirunSplit(t, tt.rank0, tt.rank1)
		t.Logf("%s: %v after %v", tt.name, err, took.Round(time.Millisecond))
		if code := exitCode(err); code != tt.status {
			t.Errorf("%s: exit status %d (%v), want %d:\n%s", tt.name, code, err, tt.status, out)
		}
		// One line naming what differs, no MPI or plan errors after it.
		tr.Add(append(append(tt.rank0, ":"), tt.rank1...), datahelixLines(out))
	}
	clitest.Golden(t, "ranks_disagree.golden", tr.String())
}
