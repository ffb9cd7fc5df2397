package launcher

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
	for _, tt := range []struct {
		name         string
		rank0, rank1 []string
		want         string
	}{
		{"steps, torch", fastRun(data, "--loader", "torch", "--steps", "4"), fastRun(data, "--loader", "torch", "--steps", "2"),
			"datahelix: --steps differs across ranks: rank 0 has 4, rank 1 has 2;"},
		{"loader list", fastRun(data, "--loader", "helix", "--steps", "2"), fastRun(data, "--loader", "helix,torch", "--steps", "2"),
			"datahelix: --loader differs across ranks: rank 0 has helix, rank 1 has helix,torch;"},
		{"batch", fastRun(data, "--loader", "helix", "--steps", "2"), fastRun(data, "--loader", "helix", "--steps", "2", "--batch", "1"),
			"datahelix: --batch differs across ranks: rank 0 has 2, rank 1 has 1;"},
		{"check-every", fastRun(data, "--loader", "helix", "--steps", "2"), fastRun(data, "--loader", "helix", "--steps", "2", "--check-every", "1"),
			"datahelix: --check-every differs across ranks: rank 0 has 50, rank 1 has 1;"},
		// What is trained and how it is timed: rank 0's values were
		// reported for the job while rank 1 trained 3-frame clips.
		{"frames", fastRun(data, "--loader", "helix", "--steps", "2"), fastRun(data, "--loader", "helix", "--steps", "2", "--frames", "3"),
			"datahelix: --frames differs across ranks: rank 0 has 2, rank 1 has 3;"},
		{"gpu-step-ms", fastRun(data, "--loader", "helix", "--steps", "2"), fastRun(data, "--loader", "helix", "--steps", "2", "--gpu-step-ms", "7.5"),
			"datahelix: --gpu-step-ms differs across ranks: rank 0 has 5, rank 1 has 7.5;"},
		{"workers", fastRun(data, "--loader", "helix", "--steps", "2"), fastRun(data, "--loader", "helix", "--steps", "2", "--workers", "2"),
			"datahelix: --workers differs across ranks: rank 0 has 1, rank 1 has 2;"},
		{"another dataset", fastRun(data, "--loader", "helix", "--steps", "2"), fastRun(other, "--loader", "helix", "--steps", "2"),
			"datahelix: the dataset's shard count differs across ranks: rank 0 has 8, rank 1 has 7; every rank of a job must be started with the same settings and data (shard 7: " +
				filepath.Base(shards[7]) + " with 4 samples on rank 0, no shard on rank 1)"},
		{"a dataset one rank cannot open", fastRun(data, "--loader", "helix", "--steps", "2"), fastRun(filepath.Join(other, "none"), "--loader", "helix", "--steps", "2"),
			"datahelix: rank 1 cannot open the dataset: decode: no shards found"},
		{"the default dataset on one rank", fastRun(data, "--loader", "helix", "--steps", "2"), fastRun("", "--loader", "helix", "--steps", "2"),
			"datahelix: --data (1 given, 0 the default dataset) differs across ranks: rank 0 has 1, rank 1 has 0;"},
		{"an empty shard", fastRun(empty, "--loader", "torch", "--steps", "2"), fastRun(empty, "--loader", "torch", "--steps", "2"),
			"datahelix: loader torch: spmd: shard " + filepath.Join(empty, last) + " has no samples"},
	} {
		out, took, err := mpirunSplit(t, tt.rank0, tt.rank1)
		t.Logf("%s: %v after %v", tt.name, err, took.Round(time.Millisecond))
		if err == nil || !strings.Contains(out, tt.want) {
			t.Errorf("%s: %v; want a failure with %q:\n%s", tt.name, err, tt.want, out)
		}
		if strings.Contains(out, "MPI_ERR") || strings.Contains(out, "malformed block") {
			t.Errorf("%s: MPI or plan errors instead of one message:\n%s", tt.name, out)
		}
	}
}
