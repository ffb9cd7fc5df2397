package launcher

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/datahelix/datahelix/internal/cli"
	"github.com/datahelix/datahelix/internal/cli/clitest"
	"github.com/datahelix/datahelix/internal/gen/gentest"
	"github.com/datahelix/datahelix/internal/metrics"
)

// oneLine fails the test unless the run exited with code and wrote
// exactly one stderr line, equal to want, and no table.
func oneLine(t *testing.T, what string, code int, stdout, stderr string, wantCode int, want string) {
	t.Helper()
	if code != wantCode || stderr != want+"\n" || hasRunTable(stdout) {
		t.Errorf("%s: exit %d, stderr %q, stdout %q; want exit %d, the one line %q and no table", what, code, stderr, stdout, wantCode, want)
	}
}

// TestRunRefusesEarlierCheckpoints runs a new 60-step job into the
// --checkpoint-dir of a finished 10-step one: it said nothing, and a
// later --resume of the new job (crashed at step 40, say) took the old
// job's newer steps for its own. It must refuse at start, on every rank,
// naming the directory and its newest step.
func TestRunRefusesEarlierCheckpoints(t *testing.T) {
	data := gentest.Tiny(t)
	dir := filepath.Join(t.TempDir(), "ck")
	run := func(flags ...string) (int, string, string) {
		return runMain(fastRun(data, append([]string{"--ranks", "2", "--loader", "local,helix", "--checkpoint-dir", dir}, flags...)...)...)
	}
	if code, _, stderr := run("--steps", "10", "--checkpoint-every", "4"); code != 0 {
		t.Fatalf("first run: exit %d: %s", code, stderr)
	}
	code, stdout, stderr := run("--steps", "60", "--checkpoint-every", "4")
	ld := filepath.Join(dir, "local")
	oneLine(t, "new run into an earlier run's directory", code, stdout, stderr, cli.ExitBadInput,
		"datahelix: --checkpoint-dir "+dir+": "+ld+" holds checkpoints of an earlier run, the newest at step 8, which a later --resume would take for this run's: pass --resume to continue that run, or remove "+ld+" or pick another --checkpoint-dir")
	if steps, _ := filepath.Glob(filepath.Join(ld, "step-*")); len(steps) != 2 {
		t.Errorf("the refused run changed %s: steps %q, want the first run's 4 and 8", ld, steps)
	}
	// Continuing it is what --resume is for; a run saving nothing is fine.
	if code, _, stderr := run("--steps", "12", "--checkpoint-every", "4", "--resume"); code != 0 {
		t.Errorf("--resume: exit %d: %s", code, stderr)
	}
	if code, _, stderr := run("--steps", "3"); code != 0 {
		t.Errorf("a run that saves no checkpoint: exit %d: %s", code, stderr)
	}
}

// TestResumeChecksEveryLoaderFirst resumes --loader local,helix where
// only local has a checkpoint: local trained, then helix failed, its
// work thrown away and no table printed. The job must fail before local
// trains; --resume=auto still starts helix from step 0.
func TestResumeChecksEveryLoaderFirst(t *testing.T) {
	data := gentest.Tiny(t)
	dir := filepath.Join(t.TempDir(), "ck")
	run := func(flags ...string) (int, string, string) {
		return runMain(fastRun(data, append([]string{"--ranks", "2", "--steps", "8", "--checkpoint-dir", dir}, flags...)...)...)
	}
	if code, _, stderr := run("--loader", "local", "--checkpoint-every", "4"); code != 0 {
		t.Fatalf("first run: exit %d: %s", code, stderr)
	}
	code, stdout, stderr := run("--loader", "local,helix", "--resume")
	oneLine(t, "--resume, helix without a checkpoint", code, stdout, stderr, cli.ExitBadInput,
		"datahelix: --resume: no complete checkpoint of loader helix in "+filepath.Join(dir, "helix"))
	// Nor may a later loader's checkpoint be another job's (batch 2).
	code, stdout, stderr = run("--loader", "helix,local", "--resume=auto", "--batch", "3")
	oneLine(t, "--resume=auto --batch 3", code, stdout, stderr, cli.ExitBadInput,
		"datahelix: --resume: "+filepath.Join(dir, "local", "step-000000004", "rank-00000.json")+" was written with a global batch of 4 (2 ranks x 2), this job's is 6 (2 x 3): keep ranks x --batch to resume at another number of ranks")
	// Local resumes, helix starts fresh, and the table follows
	// (testdata/resume_every_loader_auto.golden).
	tr := newRunTranscript(data, dir, "CKPT")
	args := fastRun(data, "--ranks", "2", "--steps", "8", "--checkpoint-dir", dir, "--loader", "local,helix", "--resume=auto")
	if code, _, _ := tr.Run(runMain, args...); code != 0 {
		t.Errorf("--resume=auto: exit %d, want 0", code)
	}
	clitest.Golden(t, "resume_every_loader_auto.golden", tr.String())
}

// TestRunShardSplitRefusedOnce checks that a dataset whose epoch is
// shorter than one global batch is said once, before any loader, without
// "loader torch:" in front as if the loader were at fault. (8 shards on 3
// or 16 ranks run.)
func TestRunShardSplitRefusedOnce(t *testing.T) {
	data := gentest.Tiny(t)
	for _, c := range []struct {
		ranks, want string
	}{
		{"64", "datahelix: reader: an epoch of 32 samples is shorter than one global batch of 128: use more data, or fewer ranks or a smaller --batch"},
	} {
		code, stdout, stderr := runMain(fastRun(data, "--ranks", c.ranks, "--steps", "2")...)
		oneLine(t, "--ranks "+c.ranks, code, stdout, stderr, cli.ExitBadInput, c.want)
	}
}

// TestRunJSONAndTraceSamePath gives --json and --trace one file, in
// several spellings: the trace replaced the summary.
func TestRunJSONAndTraceSamePath(t *testing.T) {
	data := gentest.Tiny(t)
	t.Chdir(t.TempDir()) // where a regression would write "-"
	dir := t.TempDir()
	x := filepath.Join(dir, "x")
	if err := os.WriteFile(x, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(x, link); err != nil {
		t.Fatal(err)
	}
	// A dangling link, relative, to a file not written yet.
	dangling := filepath.Join(dir, "dangling")
	if err := os.Symlink("new.json", dangling); err != nil {
		t.Fatal(err)
	}
	for _, c := range [][2]string{
		{x, x},
		{x, filepath.Join(dir, ".", "sub", "..", "x")},
		{x, link},
		{filepath.Join(dir, "new.json"), dangling},
	} {
		code, stdout, stderr := runMain(fastRun(data, "--ranks", "2", "--steps", "2", "--json", c[0], "--trace", c[1])...)
		oneLine(t, c[0]+" and "+c[1], code, stdout, stderr, cli.ExitUsage,
			"datahelix: --json "+c[0]+" and --trace "+c[1]+" are the same file: the trace would replace the summary; give them different paths")
	}
	code, stdout, stderr := runMain(fastRun(data, "--ranks", "2", "--steps", "2", "--json", "-", "--trace", "-")...)
	oneLine(t, "both -", code, stdout, stderr, cli.ExitUsage, "datahelix: --json - and --trace - both write to standard output: give one of them a file")
}

// TestRunOutputsToStdout checks that --json - and --trace - write to
// standard output, as bench --json - does, the table then going to
// standard error, and create no file named "-".
func TestRunOutputsToStdout(t *testing.T) {
	data := gentest.Tiny(t)
	t.Chdir(t.TempDir())
	code, stdout, stderr := runMain(fastRun(data, "--ranks", "2", "--steps", "3", "--loader", "local,helix", "--json", "-")...)
	var rs []metrics.Summary
	if err := json.Unmarshal([]byte(stdout), &rs); code != 0 || err != nil || len(rs) != 2 || !hasRunTable(stderr) {
		t.Errorf("--json -: exit %d, %d summaries (%v), stdout %q, stderr %q; want the summaries on stdout, the table on stderr", code, len(rs), err, stdout, stderr)
	}
	trace := filepath.Join(t.TempDir(), "t.jsonl")
	code, stdout, stderr = runMain(fastRun(data, "--ranks", "2", "--steps", "3", "--loader", "local", "--json", "-", "--trace", trace)...)
	if raw, err := os.ReadFile(trace); code != 0 || err != nil || bytes.Count(raw, []byte("\n")) != 2*3 || json.Unmarshal([]byte(stdout), &rs) != nil {
		t.Errorf("--json - --trace FILE: exit %d, stderr %q: want the summaries on stdout and 6 lines in the trace", code, stderr)
	}
	code, stdout, stderr = runMain(fastRun(data, "--ranks", "2", "--steps", "3", "--loader", "local", "--trace", "-")...)
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	for _, l := range lines {
		var v map[string]any
		if err := json.Unmarshal([]byte(l), &v); err != nil || v["loader"] != "local" {
			t.Errorf("--trace -: stdout line %q is no trace record (%v)", l, err)
		}
	}
	if code != 0 || len(lines) != 2*3 || !hasRunTable(stderr) {
		t.Errorf("--trace -: exit %d, %d stdout lines, stderr %q; want 6 records and the table on stderr", code, len(lines), stderr)
	}
	if _, err := os.Stat("-"); !os.IsNotExist(err) {
		t.Errorf("a file named - was created (stat: %v)", err)
	}
}

// TestRunWarnsNoCheckpoint gives --checkpoint-dir without a
// --checkpoint-every that saves one within --steps: nothing was saved,
// silently, and a later --resume failed. One warning line says so,
// unless the run resumes.
func TestRunWarnsNoCheckpoint(t *testing.T) {
	data := gentest.Tiny(t)
	dir := filepath.Join(t.TempDir(), "y")
	for _, c := range []struct {
		flags []string
		want  string
	}{
		{nil, "datahelix: warning: --checkpoint-dir " + dir + ": no checkpoint will be written (--checkpoint-every 0)\n"},
		{[]string{"--checkpoint-every", "100"}, "datahelix: warning: --checkpoint-dir " + dir + ": no checkpoint will be written (--checkpoint-every 100 steps, beyond --steps 3)\n"},
		{[]string{"--checkpoint-every", "3"}, "datahelix: warning: --checkpoint-dir " + dir + ": no checkpoint will be written (--checkpoint-every 3 steps, beyond --steps 3)\n"},
		{[]string{"--checkpoint-every", "2"}, ""},
	} {
		code, _, stderr := runMain(fastRun(data, append([]string{"--ranks", "2", "--steps", "3", "--loader", "local", "--checkpoint-dir", dir}, c.flags...)...)...)
		if code != 0 || stderr != c.want {
			t.Errorf("%q: exit %d, stderr %q; want %q", c.flags, code, stderr, c.want)
		}
	}
	// Resuming (from the checkpoint at step 2) needs to save none: the
	// one line says where it resumes from.
	code, _, stderr := runMain(fastRun(data, "--ranks", "2", "--steps", "3", "--loader", "local", "--checkpoint-dir", dir, "--resume")...)
	if want := "datahelix: loader local resumes from step 2 of " + filepath.Join(dir, "local") + "\n"; code != 0 || stderr != want {
		t.Errorf("--resume: exit %d, stderr %q; want %q and no warning", code, stderr, want)
	}
}

// TestPrintTableSteadyRowsAnyLoader prints a resumed torch of 5 steps
// beside a helix of 20: the steady rows were left out because the first
// loader had none; they must show, n/a for torch, and no steady
// comparison (testdata/print_table_steady_rows.golden).
func TestPrintTableSteadyRowsAnyLoader(t *testing.T) {
	sum := func(loader string, steps int) metrics.Summary {
		return metrics.Summary{Loader: loader, Ranks: 2, Steps: steps, WarmupSteps: 8, SteadyMissRate: 0.25, SteadyGPUWaitFrac: 0.5, SteadyThroughputSPS: 12}
	}
	var b bytes.Buffer
	printTable(&b, []metrics.Summary{sum("torch", 5), sum("helix", 20)}, 2, &runFlags{})
	clitest.Golden(t, "print_table_steady_rows.golden", b.String())
}
