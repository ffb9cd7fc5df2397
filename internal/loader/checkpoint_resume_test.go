package loader

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/datahelix/datahelix/collective"
	"github.com/datahelix/datahelix/internal/gen/gentest"
)

// TestResumeNoReadableCheckpointNamesFiles damages a file of each
// complete step: a bare --resume failed in CheckJob, which walks quietly,
// with "the newer ones do not read (see above)" and nothing above. The
// error must name each damaged file and why, on every rank, whether
// CheckJob or the loader (which logs nowhere here) finds it.
func TestResumeNoReadableCheckpointNamesFiles(t *testing.T) {
	data := gentest.Tiny(t)
	cfg, _ := runCheckpointed(t, 4, data, KindHelix, 12, 4)
	dir := cfg.CheckpointDir
	p8, p4 := checkpointPath(dir, KindHelix, 8, 1), checkpointPath(dir, KindHelix, 4, 2)
	if err := os.WriteFile(p8, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p4, []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg.CheckpointEvery, cfg.Resume = 0, true
	want := "--resume: no readable checkpoint of loader helix in " + loaderCheckpointDir(dir, KindHelix) +
		": a file of each complete step does not read (" + p8 + ": unexpected end of JSON input; " + p4 + ": unexpected end of JSON input)"
	wantExactEveryRank(t, "CheckJob", checkJob(t, 4, data, cfg, KindHelix), want)
	_, errs := runInProcess(t, 4, data, cfg)
	wantExactEveryRank(t, "Run", errs, want)
}

// wantExactEveryRank fails the test unless every error of errs is the
// every-rank error want.
func wantExactEveryRank(t *testing.T, what string, errs []error, want string) {
	t.Helper()
	for r, err := range errs {
		if err == nil || !collective.IsAllRanks(err) || err.Error() != want {
			t.Errorf("%s: rank %d:\n got %v\nwant the every-rank error %s", what, r, err, want)
		}
	}
}

// TestResumeFallsBackPastNonCheckpointJSON puts JSON that is no
// checkpoint where rank 2's file of the newest step belongs: it was
// refused as "version 0, this binary reads 1", while a file that does not
// read is passed over for the step before. A file of another version
// stays refused.
func TestResumeFallsBackPastNonCheckpointJSON(t *testing.T) {
	data := gentest.Tiny(t)
	cfg, full := runCheckpointed(t, 4, data, KindLocal, 12, 4)
	dir := cfg.CheckpointDir
	p8 := checkpointPath(dir, KindLocal, 8, 2)
	good, err := os.ReadFile(p8)
	if err != nil {
		t.Fatal(err)
	}
	cfg.CheckpointEvery, cfg.Resume = 0, true
	for _, c := range []struct {
		name, content, refused string
	}{
		{"another object", `{"garbage":1}`, ""},
		{"null", `null`, ""},
		{"null version", `{"version":null,"step":8}`, ""},
		{"version and step only", `{"version":2,"step":8}`, ""},
		{"another version", strings.Replace(string(good), `"version": 2,`, `"version": 1,`, 1),
			"--resume: " + p8 + ": version 1, this binary reads 2"},
	} {
		if err := os.WriteFile(p8, []byte(c.content), 0o644); err != nil {
			t.Fatal(err)
		}
		errs := checkJob(t, 4, data, cfg, KindLocal)
		if c.refused != "" {
			wantExactEveryRank(t, c.name, errs, c.refused)
			continue
		}
		for r, err := range errs {
			if err != nil {
				t.Errorf("%s: CheckJob: rank %d: %v; want the step passed over", c.name, r, err)
			}
		}
	}

	if err := os.WriteFile(p8, []byte(`{"version":2,"step":8}`), 0o644); err != nil {
		t.Fatal(err)
	}
	var log syncBuffer
	cfg.Log = &log
	resumed, errs := runInProcess(t, 4, data, cfg)
	requireOK(t, errs)
	if resumed.Summary.FirstStep != 4 || perStep(resumed.Records)[4] != perStep(full.Records)[4] {
		t.Errorf("resumed at step %d, want 4 with the uninterrupted run's batch", resumed.Summary.FirstStep)
	}
	want := "datahelix: rank 2: --resume: " + p8 + ": not a checkpoint (no rank, ranks, loader, batch, seed, shards, reader, cost_model fields): trying the checkpoint before step 8\n" +
		"datahelix: loader local resumes from step 4 of " + loaderCheckpointDir(dir, KindLocal) + "\n"
	if log.String() != want {
		t.Errorf("log:\n%s\nwant:\n%s", log.String(), want)
	}
}

// TestResumeSaysWhichStepItPassesOver leaves the newest step incomplete
// (a rank's file missing): the resume went back to the step before
// without a word. Rank 0 must say which step it passes over and why,
// once. A stray file of a rank the job that wrote the step has not (left
// by a job of more ranks) does not make it incomplete: no rank reads it.
func TestResumeSaysWhichStepItPassesOver(t *testing.T) {
	data := gentest.Tiny(t)
	cfg, _ := runCheckpointed(t, 4, data, KindLocal, 12, 4)
	dir := cfg.CheckpointDir
	ld := loaderCheckpointDir(dir, KindLocal)
	touchCheckpoints(t, dir, KindLocal, 8, 8, 7)
	cfg.CheckpointEvery, cfg.Resume = 0, true
	resumes := func(step int) string {
		return fmt.Sprintf("datahelix: loader local resumes from step %d of %s\n", step, ld)
	}
	for _, c := range []struct {
		name  string
		setup func()
		want  string
	}{
		{"stray rank 7", func() {}, resumes(8)},
		{"rank 3 missing", func() {
			if err := os.Remove(checkpointPath(dir, KindLocal, 8, 3)); err != nil {
				t.Fatal(err)
			}
		}, "datahelix: --resume: loader local passes over step 8 of " + ld + ": it has no file of rank 3 of the 4-rank job that wrote it (killed while saving it)\n" + resumes(4)},
		{"ranks 0 and 3 missing", func() {
			if err := os.Remove(checkpointPath(dir, KindLocal, 8, 0)); err != nil {
				t.Fatal(err)
			}
		}, "datahelix: --resume: loader local passes over step 8 of " + ld + ": it has no file of ranks 0, 3 of the 4-rank job that wrote it (killed while saving it)\n" + resumes(4)},
	} {
		c.setup()
		var log syncBuffer
		cfg.Log = &log
		_, errs := runInProcess(t, 4, data, cfg)
		requireOK(t, errs)
		if got := log.String(); got != c.want {
			t.Errorf("%s: log:\n%s\nwant:\n%s", c.name, got, c.want)
		}
	}
}

// TestIncompleteStepsListsFew checks incompleteSteps on a step of a much
// larger job's files, and that steps outside (after, before) and
// complete ones are left out.
func TestIncompleteStepsListsFew(t *testing.T) {
	dir := t.TempDir()
	ranks := make([]int, 30)
	for i := range ranks {
		ranks[i] = i
	}
	touchCheckpoints(t, dir, KindTorch, 12, 40, ranks...)
	touchCheckpoints(t, dir, KindTorch, 10, 2, 0, 1)
	touchCheckpoints(t, dir, KindTorch, 8, 4, 1, 3)
	touchCheckpoints(t, dir, KindTorch, 6, 2, 0)
	touchCheckpoints(t, dir, KindTorch, 2, 2, 0)
	got := incompleteSteps(dir, KindTorch, 2, 12)
	want := []incompleteStep{{8, "it has no file of ranks 0, 2 of the 4-rank job that wrote it (killed while saving it)"},
		{6, "it has no file of rank 1 of the 2-rank job that wrote it (killed while saving it)"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("incompleteSteps(after 2, before 12) = %v, want %v", got, want)
	}
	got = incompleteSteps(dir, KindTorch, 10, 13)
	want = []incompleteStep{{12, "it has no file of ranks 30, 31, 32, 33, 34, 35, 36, 37, and 2 more ranks of the 40-rank job that wrote it (killed while saving it)"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("incompleteSteps(after 10, before 13) = %v, want %v", got, want)
	}
}

// TestResumeHintOnlyForLoadersNotRun checks the hint of "no complete
// checkpoint" to resume with the --loader that wrote the directory's
// other checkpoints: it was given when that loader was already among the
// job's (--loader torch,helix, torch's steps incomplete).
func TestResumeHintOnlyForLoadersNotRun(t *testing.T) {
	data := gentest.Tiny(t)
	dir := t.TempDir()
	touchCheckpoints(t, dir, KindTorch, 4, 2, 0)
	touchCheckpoints(t, dir, KindHelix, 4, 2, 0, 1)
	cfg := testConfig(KindTorch)
	cfg.CheckpointDir, cfg.Resume = dir, true
	none := "--resume: no complete checkpoint of loader torch in " + filepath.Join(dir, "torch") +
		" (its one step directory lacks some rank's file: written by a job killed while saving it)"
	hint := " (" + dir + " holds other loaders' checkpoints, the latest at step 4: resume with the --loader that wrote them)"
	wantExactEveryRank(t, "--loader torch,helix", checkJob(t, 2, data, cfg, KindTorch, KindHelix), none)
	wantExactEveryRank(t, "--loader torch", checkJob(t, 2, data, cfg, KindTorch), none+hint)
	wantExactEveryRank(t, "--loader torch,local", checkJob(t, 2, data, cfg, KindTorch, KindLocal), none+hint)
}
