package launcher

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/datahelix/datahelix/collective"
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
	const want = `datahelix: loader torch dropped all 16 samples, loader helix dropped all 16 samples: none decoded, so nothing trained (the ranks' "dropping sample" lines say why)`
	out := filepath.Join(t.TempDir(), "summary.json")
	code, stdout, stderr := runMain(fastRun(bad, "--ranks", "2", "--steps", "4", "--json", out)...)
	if code != exitBadInput || strings.Count(stderr, want) != 1 || !strings.HasSuffix(stderr, want+"\n") {
		t.Errorf("every sample dropped: exit %d, stderr %q; want exit 3 (bad input) and a last line %q", code, stderr, want)
	}
	if !strings.Contains(stdout, "dropped samples") {
		t.Errorf("every sample dropped: no table on stdout:\n%s", stdout)
	}
	// Each sample's line once, by the rank that owns it, over both loaders.
	if n := strings.Count(stderr, ": dropping sample: "); n != 4 {
		t.Errorf("every sample dropped: %d drop lines, want 4 (each sample once over the two loaders):\n%s", n, stderr)
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
	if code != 0 || strings.Contains(stderr, "dropped all") {
		t.Errorf("some samples dropped: exit %d, stderr %q; want exit 0", code, stderr)
	}

	// Under mpirun every rank comes to the same end: the job fails
	// once, without hanging (mpirunMain's limit), the outputs written;
	// each rank names its sample once over the loaders.
	os.Remove(out)
	log, err := mpirunMain(t, 4, fastRun(bad, "--steps", "4", "--batch", "1", "--loader", "torch,helix", "--json", out)...)
	const mpiWant = `datahelix: loader torch dropped all 16 samples, loader helix dropped all 16 samples: none decoded`
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitBadInput || strings.Count(log, mpiWant) != 1 || strings.Contains(log, "aborting") {
		t.Errorf("mpirun, every sample dropped: %v\n%s\nwant exit 3 (bad input), %q once and no abort", err, log, mpiWant)
	}
	for i := range 4 {
		if n := strings.Count(log, fmt.Sprintf(`dropping sample: decode: shard %s: sample "s%d"`, filepath.Join(bad, fmt.Sprintf("u-%d.tar", i)), i)); n != 1 {
			t.Errorf("mpirun, every sample dropped: sample s%d named in %d lines, want 1:\n%s", i, n, log)
		}
	}
	if st, err := os.Stat(out); err != nil || st.Size() == 0 {
		t.Errorf("mpirun, every sample dropped: --json %s not written: %v", out, err)
	}
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
