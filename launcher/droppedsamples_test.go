package launcher

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/datahelix/datahelix/collective"
	"github.com/datahelix/datahelix/internal/cli"
	"github.com/datahelix/datahelix/internal/cli/clitest"
	"github.com/datahelix/datahelix/internal/gen/gentest"
	"github.com/datahelix/datahelix/internal/metrics"
	"github.com/datahelix/datahelix/spmd"
)

// undecodableShards writes n shards of one sample each whose only member,
// sN.npy, holds bytes no decoder reads, into dir, named u-N.tar.
func undecodableShards(t *testing.T, dir string, n int) {
	t.Helper()
	for i := range n {
		name := fmt.Sprintf("s%d.npy", i)
		writeTestFile(t, filepath.Join(dir, fmt.Sprintf("u-%d.tar", i)), tarOf(t, map[string][]byte{name: []byte("\x93NUMPY not really")}, name))
	}
}

// TestRunFailsWhenEverySampleIsDropped checks that a run whose loaders
// decoded no sample at all fails, with one line naming the loaders and
// the count, after printing the table and writing --json, in-process and
// under mpirun (every rank exits, none hangs); and that a run that
// dropped only some samples succeeds.
func TestRunFailsWhenEverySampleIsDropped(t *testing.T) {
	bad := t.TempDir()
	undecodableShards(t, bad, 4)
	out := filepath.Join(t.TempDir(), "summary.json")
	// The table, then on stderr each sample's line once, by the rank that
	// owns it, over both loaders, and last the line naming the loaders
	// and the count (testdata/dropped_samples.golden).
	tr := newRunTranscript(bad, out, "SUMMARY")
	args := fastRun(bad, "--ranks", "2", "--steps", "4", "--json", out)
	code, stdout, stderr := runMain(args...)
	tr.AddOutputs(args, code, stdout, sortRankLines(stderr))
	if code != cli.ExitBadInput {
		t.Errorf("every sample dropped: exit %d, want %d (bad input)", code, cli.ExitBadInput)
	}
	var rs []metrics.Summary
	if raw, err := os.ReadFile(out); err != nil || json.Unmarshal(raw, &rs) != nil || len(rs) != 2 || rs[0].DroppedSamples != 16 || rs[1].DroppedSamples != 16 {
		t.Errorf("--json of the failed run: %+v (%v); want both loaders' summaries, 16 dropped each", rs, err)
	}

	// Some samples dropped: a success, the summary counts them.
	data := gentest.Tiny(t)
	shards, _ := filepath.Glob(filepath.Join(data, "*.tar"))
	mixed := t.TempDir()
	for _, p := range shards[:4] {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		writeTestFile(t, filepath.Join(mixed, filepath.Base(p)), b)
	}
	undecodableShards(t, mixed, 4)
	code, _, stderr = runMain(fastRun(mixed, "--ranks", "4", "--steps", "2", "--loader", "torch", "--json", out)...)
	rs = nil
	if raw, err := os.ReadFile(out); err != nil || json.Unmarshal(raw, &rs) != nil || len(rs) != 1 || rs[0].DroppedSamples == 0 {
		t.Errorf("some samples dropped: --json %+v (%v); want dropped samples counted", rs, err)
	}
	if code != 0 {
		t.Errorf("some samples dropped: exit %d, stderr %q; want exit 0", code, stderr)
	}

	// Under mpirun every rank comes to the same end: the job fails
	// once, without hanging (mpirunMain's limit), the outputs written.
	os.Remove(out)
	args = fastRun(bad, "--steps", "4", "--batch", "1", "--loader", "torch,helix", "--json", out)
	log, err := mpirunMain(t, 4, args...)
	// The datahelix lines of the job, sorted: each rank names its sample
	// once, no rank aborts, rank 0 says why the job failed.
	tr.AddJob(4, args, sortLines(datahelixLines(log)))
	if code := exitCode(err); code != cli.ExitBadInput {
		t.Errorf("mpirun, every sample dropped: exit %d (%v), want %d (bad input):\n%s", code, err, cli.ExitBadInput, log)
	}
	if st, err := os.Stat(out); err != nil || st.Size() == 0 {
		t.Errorf("mpirun, every sample dropped: --json %s not written: %v", out, err)
	}
	clitest.Golden(t, "dropped_samples.golden", tr.String())
}

// TestAllDroppedError checks the rule: a loader with no sample delivered
// and some dropped fails the job; some dropped, or none given, does not.
func TestAllDroppedError(t *testing.T) {
	loaders := []spmd.Kind{spmd.KindTorch, spmd.KindHelix}
	for _, tt := range []struct {
		counts []int64 // delivered, dropped per loader
		want   string  // "" no error
	}{
		{[]int64{32, 0, 32, 0}, ""},
		{[]int64{31, 1, 1, 31}, ""},
		{[]int64{0, 0, 0, 0}, ""}, // no sample at all (no step): nothing dropped
		{[]int64{0, 32, 30, 2}, "loader torch dropped all 32 samples: none decoded"},
		{[]int64{5, 3, 0, 8}, "loader helix dropped all 8 samples: none decoded"},
		{[]int64{0, 4, 0, 4}, "loader torch dropped all 4 samples, loader helix dropped all 4 samples: none decoded"},
	} {
		err := allDroppedError(loaders, tt.counts)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%v: got %v, want none", tt.counts, err)
		case tt.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.want) || !collective.IsAllRanks(err)):
			t.Errorf("%v: got %v, want an AllRanks error starting %q", tt.counts, err, tt.want)
		}
	}
}
