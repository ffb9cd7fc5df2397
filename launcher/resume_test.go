package launcher

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/datahelix/datahelix/internal/cli"
	"github.com/datahelix/datahelix/internal/cli/clitest"
	"github.com/datahelix/datahelix/internal/gen/gentest"
	"github.com/datahelix/datahelix/internal/metrics"
)

func TestResumeFlag(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want cli.AutoBool
	}{
		{nil, cli.AutoFalse},
		{[]string{"--resume"}, cli.AutoTrue},
		{[]string{"--resume=true"}, cli.AutoTrue},
		{[]string{"--resume=1"}, cli.AutoTrue},
		{[]string{"--resume=false"}, cli.AutoFalse},
		{[]string{"--resume=auto"}, cli.AutoAuto},
	} {
		var f runFlags
		fs := cli.NewFlags("run", "")
		f.register(fs)
		if err := fs.Parse(tt.args); err != nil || f.resume != tt.want {
			t.Errorf("%q: got %v, %v, want %v", tt.args, f.resume.String(), err, tt.want.String())
		}
	}
	tr := clitest.NewTranscript()
	for _, tt := range []struct {
		args []string
	}{
		{[]string{"run", "--resume=maybe"}},
		{[]string{"run", "--resume=auto"}},
		{[]string{"run", "--resume", "auto", "--checkpoint-dir", "x"}},
	} {
		tr.Add(tt.args, usageLine(t, tt.args...))
	}
	clitest.Golden(t, "resume_usage_errors.golden", tr.String())
}

// TestResumeAuto runs what a requeued batch job runs: the same command
// with --resume=auto, first with no checkpoint (a fresh start, said once),
// then after checkpoints (it resumes from the latest complete one, passing
// over one that a killed job left half-written), while a bare --resume
// with no checkpoint still fails on every rank with one message, and on
// another number of ranks it resumes with the same global batch only. What
// each run says, and its table, is testdata/resume_auto.golden.
func TestResumeAuto(t *testing.T) {
	data := gentest.Tiny(t)
	dir := filepath.Join(t.TempDir(), "ck")
	summary := filepath.Join(t.TempDir(), "summary.json")
	tr := newRunTranscript(data, dir, "CKPT", summary, "SUMMARY")
	run := func(flags ...string) (int, []metrics.Summary) {
		t.Helper()
		os.Remove(summary)
		code, _, _ := tr.Run(runMain, fastRun(data, append([]string{"--ranks", "2", "--steps", "6", "--loader", "local", "--checkpoint-dir", dir, "--json", summary}, flags...)...)...)
		var rs []metrics.Summary
		if raw, err := os.ReadFile(summary); err == nil {
			if err := json.Unmarshal(raw, &rs); err != nil {
				t.Fatal(err)
			}
		}
		return code, rs
	}
	// steps gives each loader's first step and step count.
	steps := func(rs []metrics.Summary) [][2]int {
		var s [][2]int
		for _, r := range rs {
			s = append(s, [2]int{r.FirstStep, r.Steps})
		}
		return s
	}
	for _, c := range []struct {
		what  string
		flags []string
		code  int
		steps [][2]int // first step and steps of each loader; nil for none
	}{
		{"bare --resume, no checkpoint", []string{"--resume"}, cli.ExitBadInput, nil},
		{"--resume=auto, no checkpoint", []string{"--resume=auto", "--checkpoint-every", "2"}, 0, [][2]int{{0, 6}}},
		// Checkpoints at steps 2 and 4 now: a resumed run delivers steps 4, 5.
		{"--resume=auto after checkpoints", []string{"--resume=auto"}, 0, [][2]int{{4, 2}}},
		// A job killed while saving step 4: rank 1's file is removed below.
		{"--resume=auto with step 4 half-written", []string{"--resume=auto"}, 0, [][2]int{{2, 4}}},
		// Another loader has no checkpoint of its own: it starts fresh,
		// the one that has resumes, and the table says which steps each
		// loader's figures cover.
		{"--resume=auto --loader local,helix", []string{"--resume=auto", "--loader", "helix"}, 0, [][2]int{{2, 4}, {0, 6}}},
		// A requeue on another number of ranks: the global batch of 4
		// (2 ranks x 2) resumes at 4 ranks x 1, not at 3 x 2.
		{"--resume=auto at 4 ranks x 1", []string{"--resume=auto", "--ranks", "4", "--batch", "1"}, 0, [][2]int{{2, 4}}},
		{"--resume=auto at 3 ranks x 2", []string{"--resume=auto", "--ranks", "3"}, cli.ExitBadInput, nil},
	} {
		if c.what == "--resume=auto with step 4 half-written" {
			if err := os.Remove(filepath.Join(dir, "local", "step-000000004", "rank-00001.json")); err != nil {
				t.Fatal(err)
			}
		}
		if code, rs := run(c.flags...); code != c.code || !slices.Equal(steps(rs), c.steps) {
			t.Errorf("%s: exit %d, steps %v; want exit %d, steps %v", c.what, code, steps(rs), c.code, c.steps)
		}
	}
	clitest.Golden(t, "resume_auto.golden", tr.String())
}
