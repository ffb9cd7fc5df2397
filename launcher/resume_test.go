package launcher

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/datahelix/datahelix/internal/gen/gentest"
	"github.com/datahelix/datahelix/internal/metrics"
)

func TestResumeFlag(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want autoBool
	}{
		{nil, autoFalse},
		{[]string{"--resume"}, autoTrue},
		{[]string{"--resume=true"}, autoTrue},
		{[]string{"--resume=1"}, autoTrue},
		{[]string{"--resume=false"}, autoFalse},
		{[]string{"--resume=auto"}, autoAuto},
	} {
		var f runFlags
		fs := newFlags("run", "")
		f.register(fs)
		if err := fs.Parse(tt.args); err != nil || f.resume != tt.want {
			t.Errorf("%q: got %v, %v, want %v", tt.args, f.resume.String(), err, tt.want.String())
		}
	}
	tr := newTranscript()
	for _, tt := range []struct {
		args []string
	}{
		{[]string{"run", "--resume=maybe"}},
		{[]string{"run", "--resume=auto"}},
		{[]string{"run", "--resume", "auto", "--checkpoint-dir", "x"}},
	} {
		tr.add(tt.args, usageLine(t, tt.args...))
	}
	golden(t, "resume_usage_errors.golden", tr.String())
}

// TestResumeAuto runs what a requeued batch job runs: the same command
// with --resume=auto, first with no checkpoint (a fresh start, said once),
// then after checkpoints (it resumes from the latest complete one, passing
// over one that a killed job left half-written), while a bare --resume
// with no checkpoint still fails on every rank with one message.
func TestResumeAuto(t *testing.T) {
	data := gentest.Tiny(t)
	dir := filepath.Join(t.TempDir(), "ck")
	summary := filepath.Join(t.TempDir(), "summary.json")
	var stdout string
	run := func(flags ...string) (int, string, []metrics.Summary) {
		t.Helper()
		os.Remove(summary)
		args := fastRun(data, append([]string{"--ranks", "2", "--steps", "6", "--loader", "local", "--checkpoint-dir", dir, "--json", summary}, flags...)...)
		var code int
		var stderr string
		code, stdout, stderr = runMain(args...)
		var rs []metrics.Summary
		if raw, err := os.ReadFile(summary); err == nil {
			if err := json.Unmarshal(raw, &rs); err != nil {
				t.Fatal(err)
			}
		}
		return code, stderr, rs
	}
	fresh := func(k string) string {
		return "datahelix: --resume=auto: no complete checkpoint of loader " + k + " for 2 ranks in " + filepath.Join(dir, k)
	}

	code, stderr, _ := run("--resume")
	if code == 0 || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "--resume: no complete checkpoint of loader local for 2 ranks") {
		t.Errorf("bare --resume, no checkpoint: exit %d, stderr %q; want a failure, one line saying there is no checkpoint", code, stderr)
	}

	code, stderr, rs := run("--resume=auto", "--checkpoint-every", "2")
	if code != 0 || strings.Count(stderr, fresh("local")) != 1 || !strings.Contains(stderr, "loader local starts from step 0\n") || len(rs) != 1 || rs[0].Steps != 6 {
		t.Fatalf("--resume=auto, no checkpoint: exit %d, stderr %q, summary %+v; want one line saying it starts from step 0, then 6 steps", code, stderr, rs)
	}

	// Checkpoints at steps 2 and 4 now: a resumed run delivers steps 4, 5.
	code, stderr, rs = run("--resume=auto")
	if code != 0 || strings.Contains(stderr, "--resume=auto") || len(rs) != 1 || rs[0].Steps != 2 {
		t.Errorf("--resume=auto after checkpoints: exit %d, stderr %q, summary %+v; want 2 steps (4, 5) and no message", code, stderr, rs)
	}

	// A job killed while saving step 4: rank 1's file is missing.
	if err := os.Remove(filepath.Join(dir, "local", "step-000000004", "rank-00001.json")); err != nil {
		t.Fatal(err)
	}
	code, stderr, rs = run("--resume=auto")
	if code != 0 || strings.Contains(stderr, "--resume=auto") || !strings.Contains(stderr, "datahelix: loader local resumes from step 2 of "+filepath.Join(dir, "local")+"\n") ||
		len(rs) != 1 || rs[0].Steps != 4 {
		t.Errorf("--resume=auto with step 4 half-written: exit %d, stderr %q, summary %+v; want 4 steps from step 2", code, stderr, rs)
	}

	// Another loader has no checkpoint of its own: it starts fresh, the
	// one that has resumes.
	code, stderr, rs = run("--resume=auto", "--loader", "helix")
	if code != 0 || strings.Count(stderr, fresh("helix")) != 1 || strings.Count(stderr, "\n") != 3 || !strings.Contains(stderr, "loader helix starts from step 0") ||
		strings.Contains(stderr, "holds other loaders") || // local's, which the job runs
		!strings.Contains(stderr, "loader local resumes from step 2") ||
		strings.Contains(stderr, "loader local starts") || len(rs) != 2 || rs[0].Steps != 4 || rs[1].Steps != 6 {
		t.Errorf("--resume=auto --loader local,helix: exit %d, stderr %q, summary %+v; want local from step 2, helix fresh", code, stderr, rs)
	}
	// The table and the JSON say which steps each loader's figures cover.
	if len(rs) == 2 && (rs[0].FirstStep != 2 || rs[1].FirstStep != 0) {
		t.Errorf("first steps %d, %d; want 2 (local, resumed) and 0 (helix)", rs[0].FirstStep, rs[1].FirstStep)
	}
	for _, want := range []string{
		", 6 steps,",
		"loader local resumed at step 2: its figures and batches hash cover steps 2-5 only\n",
		"(over different steps: local from step 2, helix from step 0)\n",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("table %q does not say %q", stdout, want)
		}
	}
	if strings.Contains(stdout, "loader helix resumed") {
		t.Errorf("table %q says the fresh loader resumed", stdout)
	}
}
