package loader

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/datahelix/datahelix/collective"
	"github.com/datahelix/datahelix/internal/gen/gentest"
)

// runBounded runs n in-process ranks of Run and fails the test, instead of
// hanging it, when they take longer than limit: a loader that waits for a
// batch nobody will prepare must show up as a failure.
func runBounded(t *testing.T, n int, data string, cfg Config, limit time.Duration) (*Result, []error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	res, errs := RunInProcess(ctx, n, data, t.TempDir(), cfg)
	if ctx.Err() != nil {
		t.Fatalf("%s (decoded budget %d): the run did not finish in %v (a hang?): %v", cfg.Loader, cfg.DecodedBudget, limit, errs)
	}
	return res, errs
}

// TestResumeEveryLoader checkpoints a 12-step run every 4 steps with each
// loader, all into one directory as --loader torch,local,static,helix
// does, then resumes each from its own latest checkpoint (step 8): the
// resumed run must deliver steps 8..11 only, with the same global batches
// as the uninterrupted run (and, for the unplanned loaders, the same share
// on every rank). "local budget 1" resumes with a decoded-bytes budget
// smaller than one sample, which only the earliest batch may exceed.
func TestResumeEveryLoader(t *testing.T) {
	const ranks, steps, every, limit = 4, 12, 4, time.Minute
	data := gentest.Tiny(t)
	dir := t.TempDir()
	cases := []struct {
		name   string
		k      Kind
		budget int64
	}{
		{"torch", KindTorch, 0},
		{"local", KindLocal, 0},
		{"static", KindStatic, 0},
		{"helix", KindHelix, 0},
		{"local budget 1", KindLocal, 1},
	}
	full := map[Kind]*Result{}
	for _, c := range cases {
		if full[c.k] != nil {
			continue
		}
		cfg := testConfig(c.k)
		cfg.Steps, cfg.CheckpointDir, cfg.CheckpointEvery = steps, dir, every
		res, errs := runBounded(t, ranks, data, cfg, limit)
		requireOK(t, errs)
		full[c.k] = res
	}
	// Every loader kept its own checkpoints: none overwrote another's.
	for k := range full {
		if got := scanCheckpoints(dir, k, math.MaxInt64, nil).latest; got != 8 {
			t.Errorf("%s: latest checkpoint at step %d, want 8", k, got)
		}
		for _, step := range []int64{4, 8} {
			for r := 0; r < ranks; r++ {
				path := checkpointPath(dir, k, step, r)
				var st checkpointState
				data, err := os.ReadFile(path)
				if err == nil {
					err = json.Unmarshal(data, &st)
				}
				if err != nil || st.Loader != k.String() || st.Step != step || st.Rank != r {
					t.Errorf("%s: %s holds loader %q step %d rank %d (%v), want %s %d %d", k, path, st.Loader, st.Step, st.Rank, err, k, step, r)
				}
			}
		}
	}
	for _, c := range cases {
		cfg := testConfig(c.k)
		cfg.Steps, cfg.CheckpointDir, cfg.Resume, cfg.DecodedBudget = steps, dir, true, c.budget
		resumed, errs := runBounded(t, ranks, data, cfg, limit)
		requireOK(t, errs)
		if resumed.Summary.Steps != 4 || len(resumed.Records) != ranks*4 {
			t.Fatalf("%s: resumed run: %d steps, %d records, want 4 steps (8..11) and %d records",
				c.name, resumed.Summary.Steps, len(resumed.Records), ranks*4)
		}
		want, got := perStep(full[c.k].Records), perStep(resumed.Records)
		for st := int64(0); st < steps; st++ {
			switch _, ok := got[st]; {
			case st < 8 && ok:
				t.Errorf("%s: resumed run delivered step %d, before its checkpoint", c.name, st)
			case st >= 8 && (!ok || got[st] != want[st]):
				t.Errorf("%s: step %d: resumed run's digest %016x, uninterrupted run's %016x", c.name, st, got[st], want[st])
			}
		}
		if c.k.stepKind().Planned() {
			continue // the plan also depends on timing: only the global batch must match
		}
		byRank := map[[2]int64]uint64{}
		for _, r := range full[c.k].Records {
			byRank[[2]int64{r.Step, int64(r.Rank)}] = r.Hash
		}
		for _, r := range resumed.Records {
			if w := byRank[[2]int64{r.Step, int64(r.Rank)}]; w != r.Hash {
				t.Errorf("%s: rank %d step %d: digest %016x after resume, %016x uninterrupted", c.name, r.Rank, r.Step, r.Hash, w)
			}
		}
	}

	t.Run("at or past --steps", func(t *testing.T) {
		for _, n := range []int{8, 4} {
			cfg := testConfig(KindHelix)
			cfg.Steps, cfg.CheckpointDir, cfg.Resume = n, dir, true
			_, errs := runBounded(t, ranks, data, cfg, limit)
			want := fmt.Sprintf("--resume: the checkpoint in %s is at step 8, at or past --steps %d: nothing to run", filepath.Join(dir, "helix"), n)
			for r, err := range errs {
				if err == nil || err.Error() != want || !collective.IsAllRanks(err) {
					t.Errorf("--steps %d: rank %d: got %v, want the every-rank error %q", n, r, err, want)
				}
			}
		}
	})

	t.Run("no checkpoint of this loader", func(t *testing.T) {
		cfg := testConfig(KindHelixNoGate)
		cfg.Steps, cfg.CheckpointDir, cfg.Resume = steps, dir, true
		_, errs := runBounded(t, ranks, data, cfg, limit)
		for r, err := range errs {
			if !errors.Is(err, ErrNoCheckpoint) || !collective.IsAllRanks(err) ||
				!strings.Contains(err.Error(), "--resume: no complete checkpoint of loader helix-nogate in "+filepath.Join(dir, "helix-nogate")) ||
				!strings.Contains(err.Error(), "other loaders' checkpoints, the latest at step 8") {
				t.Errorf("rank %d: got %v, want the every-rank error naming helix-nogate and the others' step 8", r, err)
			}
		}
	})

	t.Run("file of another loader", func(t *testing.T) {
		// torch's checkpoint put where helix-nogate's belongs.
		for r := 0; r < ranks; r++ {
			b, err := os.ReadFile(checkpointPath(dir, KindTorch, 8, r))
			if err != nil {
				t.Fatal(err)
			}
			p := checkpointPath(dir, KindHelixNoGate, 8, r)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		cfg := testConfig(KindHelixNoGate)
		cfg.Steps, cfg.CheckpointDir, cfg.Resume = steps, dir, true
		_, errs := runBounded(t, ranks, data, cfg, limit)
		// Each rank finds the mismatch in its own file, or is aborted by
		// the first rank that did; either way its error names the file.
		files := filepath.Join(dir, "helix-nogate", "step-000000008", "rank-0000")
		want := `.json was written by loader "torch", this run's loader is helix-nogate`
		for r, err := range errs {
			if err == nil || !strings.Contains(err.Error(), files) || !strings.Contains(err.Error(), want) {
				t.Errorf("rank %d: got %v, want an error naming %sR%s", r, err, files, want)
			}
		}
	})
}

// touchCheckpoints writes checkpoint files of loader k at step for the
// ranks, as a job of n ranks that saved them would leave them in dir:
// they record the rank and n, and nothing else (they do not read as
// checkpoints).
func touchCheckpoints(t *testing.T, dir string, k Kind, step int64, n int, ranks ...int) {
	t.Helper()
	for _, r := range ranks {
		p := checkpointPath(dir, k, step, r)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, fmt.Appendf(nil, `{"rank": %d, "ranks": %d}`, r, n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// latestCheckpoint returns the newest complete step of any loader in
// dir, or -1.
func latestCheckpoint(dir string) int64 {
	latest := int64(-1)
	for k := range KindOracle {
		latest = max(latest, scanCheckpoints(dir, k, math.MaxInt64, nil).latest)
	}
	return latest
}

// TestLatestCheckpointIsPerLoader checks the choice of the step to resume
// from on hand-made directories: the newest step with the files of every
// rank of the job that wrote it, whatever its number of ranks, counted
// for each loader on its own.
func TestLatestCheckpointIsPerLoader(t *testing.T) {
	dir := t.TempDir()
	touch := func(k Kind, step int64, n int, ranks ...int) { touchCheckpoints(t, dir, k, step, n, ranks...) }
	touch(KindTorch, 4, 2, 0, 1)
	touch(KindTorch, 8, 2, 0)          // rank 1 never wrote step 8
	touch(KindHelix, 12, 2, 0, 1)      // helix got further
	touch(KindLocal, 4, 3, 0, 1, 2)    // written by a 3-rank run
	touch(KindLocal, 10, 2, 0, 1)      // and a 2-rank one
	touch(KindLocal, 14, 4, 0, 1)      // a 4-rank one killed while saving: its ranks 0 and 1 are no 2-rank step
	touch(KindHelixNoGate, 6, 2, 0, 1) // a 2-rank step over a file a 4-rank job left: complete
	touch(KindHelixNoGate, 6, 4, 3)
	touch(KindStatic, 16, 2, 0, 1) // a stray temporary file is no checkpoint:
	os.Rename(checkpointPath(dir, KindStatic, 16, 1), checkpointPath(dir, KindStatic, 16, 1)+".tmp")
	os.MkdirAll(filepath.Join(dir, "helix", "step-junk"), 0o755)
	os.MkdirAll(filepath.Join(dir, "step-000000020"), 0o755) // the old layout is not read
	for _, c := range []struct {
		k     Kind
		want  int64
		ranks int
	}{
		{KindTorch, 4, 2},
		{KindHelix, 12, 2},
		{KindLocal, 10, 2},
		{KindHelixNoGate, 6, 2},
		{KindStatic, -1, 0},
	} {
		if got := scanCheckpoints(dir, c.k, math.MaxInt64, nil); got.latest != c.want || got.ranks != c.ranks {
			t.Errorf("scanCheckpoints(%s) = step %d of %d ranks, want %d of %d", c.k, got.latest, got.ranks, c.want, c.ranks)
		}
	}
	if got := latestCheckpoint(dir); got != 12 {
		t.Errorf("latestCheckpoint = %d, want 12", got)
	}
	if got := scanCheckpoints(filepath.Join(dir, "missing"), KindTorch, math.MaxInt64, nil).latest; got != -1 {
		t.Errorf("missing directory: got %d, want -1", got)
	}
}

// TestLatestCheckpointCollective checks that every rank gets rank 0's
// answer, that a step a killed job left half-written is passed over for
// the complete one before it, and that "none" is ErrNoCheckpoint on every
// rank, which --resume=auto tells from other failures.
func TestLatestCheckpointCollective(t *testing.T) {
	const ranks = 3
	touch := func(dir string, k Kind, step int64, ranks ...int) { touchCheckpoints(t, dir, k, step, 3, ranks...) }
	complete, partial, empty, other := t.TempDir(), t.TempDir(), t.TempDir(), t.TempDir()
	touch(complete, KindHelix, 4, 0, 1, 2)
	touch(complete, KindHelix, 8, 0, 2) // rank 1 was killed before saving step 8
	touch(partial, KindHelix, 4, 1, 2)
	touch(other, KindTorch, 6, 0, 1, 2)
	// latest calls LatestCheckpoint on every rank, rank r with dirs[r].
	latest := func(dirs [ranks]string) ([ranks]int64, [ranks]error) {
		var steps [ranks]int64
		var errs [ranks]error
		comms := collective.NewLocal(ranks)
		done := make(chan int)
		for r := range comms {
			go func() {
				steps[r], errs[r] = LatestCheckpoint(comms[r], dirs[r], KindHelix)
				done <- r
			}()
		}
		for range comms {
			<-done
		}
		return steps, errs
	}
	for _, c := range []struct {
		name string
		dirs [ranks]string
		want int64 // -1: ErrNoCheckpoint
		msg  string
	}{
		{"complete then half-written", [ranks]string{complete, complete, complete}, 4, ""},
		// Ranks that see another directory (a lagging shared file system)
		// still follow rank 0.
		{"rank 0 decides", [ranks]string{complete, empty, partial}, 4, ""},
		{"rank 0 sees none", [ranks]string{empty, complete, complete}, -1, "no complete checkpoint of loader helix in "},
		{"only half-written", [ranks]string{partial, partial, partial}, -1, "its one step directory lacks some rank's file"},
		{"other loaders only", [ranks]string{other, other, other}, -1, "other loaders' checkpoints, the latest at step 6"},
		{"missing directory", [ranks]string{filepath.Join(empty, "nope")}, -1, "no complete checkpoint of loader helix"},
	} {
		for r := range c.dirs {
			if c.dirs[r] == "" {
				c.dirs[r] = c.dirs[0]
			}
		}
		steps, errs := latest(c.dirs)
		for r := range ranks {
			switch {
			case c.want >= 0 && (errs[r] != nil || steps[r] != c.want):
				t.Errorf("%s: rank %d: got %d, %v, want step %d", c.name, r, steps[r], errs[r], c.want)
			case c.want < 0 && (!errors.Is(errs[r], ErrNoCheckpoint) || !collective.IsAllRanks(errs[r]) || !strings.Contains(fmt.Sprint(errs[r]), c.msg)):
				t.Errorf("%s: rank %d: got %d, %v, want an every-rank ErrNoCheckpoint saying %q", c.name, r, steps[r], errs[r], c.msg)
			}
		}
	}
}

// TestLatestCheckpointMessages checks the whole every-rank message of "no
// complete checkpoint" in each of its variants, and what one scan of the
// directory counts for it.
func TestLatestCheckpointMessages(t *testing.T) {
	const ranks = 2
	const killed = "lacks some rank's file: written by a job killed while saving it)"
	const killedEach = "lacks some rank's file: written by jobs killed while saving them)"
	others := func(dir string, step int) string {
		return fmt.Sprintf(" (%s holds other loaders' checkpoints, the latest at step %d: resume with the --loader that wrote them)", dir, step)
	}
	for _, c := range []struct {
		name  string
		setup func(t *testing.T, dir string)
		scan  checkpointScan
		// suffix follows "no complete checkpoint of loader helix for 2
		// ranks in DIR/helix"; DIR stands for the directory.
		suffix string
	}{
		{"nothing", func(t *testing.T, dir string) {}, checkpointScan{-1, 0, 0, -1}, ""},
		{"one incomplete", func(t *testing.T, dir string) {
			touchCheckpoints(t, dir, KindHelix, 4, 2, 0)
		}, checkpointScan{-1, 0, 1, -1}, " (its one step directory " + killed},
		{"several incomplete", func(t *testing.T, dir string) {
			touchCheckpoints(t, dir, KindHelix, 4, 2, 0)
			touchCheckpoints(t, dir, KindHelix, 8, 2, 1)
			touchCheckpoints(t, dir, KindHelix, 12, 3, 0, 2) // a 3-rank run's, rank 1 killed
			os.MkdirAll(filepath.Join(dir, "helix", "step-junk"), 0o755)
		}, checkpointScan{-1, 0, 3, -1}, " (each of its 3 step directories " + killedEach},
		{"other loaders", func(t *testing.T, dir string) {
			touchCheckpoints(t, dir, KindTorch, 6, 2, 0, 1)
			touchCheckpoints(t, dir, KindLocal, 10, 2, 0, 1)
			touchCheckpoints(t, dir, KindLocal, 12, 2, 0) // incomplete: not the latest
			touchCheckpoints(t, dir, KindStatic, 14, 2, 1)
		}, checkpointScan{-1, 0, 0, 10}, others("DIR", 10)},
		{"incomplete and other loaders", func(t *testing.T, dir string) {
			touchCheckpoints(t, dir, KindHelix, 4, 2, 1)
			touchCheckpoints(t, dir, KindHelix, 9, 2, 0)
			touchCheckpoints(t, dir, KindHelixNoGate, 7, 2, 0, 1)
		}, checkpointScan{-1, 0, 2, 7}, " (each of its 2 step directories " + killedEach + others("DIR", 7)},
	} {
		dir := t.TempDir()
		c.setup(t, dir)
		if got := scanCheckpoints(dir, KindHelix, math.MaxInt64, nil); got != c.scan {
			t.Errorf("%s: scanCheckpoints = %+v, want %+v", c.name, got, c.scan)
		}
		want := fmt.Sprintf("no complete checkpoint of loader helix in %s", filepath.Join(dir, "helix")) +
			strings.ReplaceAll(c.suffix, "DIR", dir)
		comms := collective.NewLocal(ranks)
		errs := make([]error, ranks)
		steps := make([]int64, ranks)
		done := make(chan struct{})
		for r := range comms {
			go func() {
				steps[r], errs[r] = LatestCheckpoint(comms[r], dir, KindHelix)
				done <- struct{}{}
			}()
		}
		for range comms {
			<-done
		}
		for r, err := range errs {
			if err == nil || err.Error() != want || !errors.Is(err, ErrNoCheckpoint) || !collective.IsAllRanks(err) || steps[r] != -1 {
				t.Errorf("%s: rank %d: got %d, %v; want -1 and the every-rank ErrNoCheckpoint %q", c.name, r, steps[r], err, want)
			}
		}
	}

	// With a complete step, the scan counts the newer incomplete ones and
	// does not look at the other loaders.
	dir := t.TempDir()
	touchCheckpoints(t, dir, KindHelix, 4, 2, 0, 1)
	touchCheckpoints(t, dir, KindHelix, 8, 2, 0)
	touchCheckpoints(t, dir, KindHelix, 12, 2, 1)
	touchCheckpoints(t, dir, KindHelix, 2, 2, 0)
	touchCheckpoints(t, dir, KindTorch, 20, 2, 0, 1)
	if got, want := scanCheckpoints(dir, KindHelix, math.MaxInt64, nil), (checkpointScan{4, 2, 2, -1}); got != want {
		t.Errorf("complete step 4 under 8 and 12: scanCheckpoints = %+v, want %+v", got, want)
	}
}

// TestResumeFallsBackPastUnreadableCheckpoints empties one rank's file of
// the newest checkpoint, as a node crash right after saving can: the
// resume failed, and --resume=auto with it, on every requeue. Every rank
// must fall back to the checkpoint before, delivering what the
// uninterrupted run delivered from there; with none readable, --resume
// fails naming the cause and --resume=auto starts from step 0.
func TestResumeFallsBackPastUnreadableCheckpoints(t *testing.T) {
	data := gentest.Tiny(t)
	cfg, full := runCheckpointed(t, 4, data, KindHelix, 12, 4)
	dir := cfg.CheckpointDir
	if err := os.WriteFile(checkpointPath(dir, KindHelix, 8, 1), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var log syncBuffer
	cfg.CheckpointEvery, cfg.Resume, cfg.Log = 0, true, &log
	resumed, errs := runInProcess(t, 4, data, cfg)
	requireOK(t, errs)
	if len(resumed.Records) != 8*4 {
		t.Fatalf("resumed run delivered %d rank-steps, want 32 (steps 4..11 on 4 ranks)", len(resumed.Records))
	}
	if full.Summary.FirstStep != 0 || resumed.Summary.FirstStep != 4 || resumed.Summary.Steps != 8 {
		t.Errorf("summaries: full run first step %d, resumed run first step %d over %d steps; want 0, and 4 over 8",
			full.Summary.FirstStep, resumed.Summary.FirstStep, resumed.Summary.Steps)
	}
	want, got := perStep(full.Records), perStep(resumed.Records)
	for st := int64(4); st < 12; st++ {
		if got[st] == 0 || got[st] != want[st] {
			t.Errorf("step %d: resumed run delivered other samples", st)
		}
	}
	wantLog := []string{
		"datahelix: rank 1: --resume: " + checkpointPath(dir, KindHelix, 8, 1) + ": unexpected end of JSON input: trying the checkpoint before step 8\n",
		"datahelix: loader helix resumes from step 4 of " + loaderCheckpointDir(dir, KindHelix) + "\n",
	}
	if log.String() != strings.Join(wantLog, "") {
		t.Errorf("log:\n%s\nwant:\n%s", log.String(), strings.Join(wantLog, ""))
	}

	// Step 4 unreadable too, on rank 2: nothing left to resume from.
	if err := os.WriteFile(checkpointPath(dir, KindHelix, 4, 2), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, errs = runInProcess(t, 4, data, cfg)
	for r, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "--resume: no readable checkpoint of loader helix") {
			t.Errorf("rank %d: %v; want no readable checkpoint", r, err)
		}
	}
	var autoLog syncBuffer
	cfg.ResumeIfAny, cfg.Log = true, &autoLog
	fresh, errs := runInProcess(t, 4, data, cfg)
	requireOK(t, errs)
	if len(fresh.Records) != 12*4 {
		t.Errorf("--resume=auto with no readable checkpoint delivered %d rank-steps, want all 48", len(fresh.Records))
	}
	if !strings.Contains(autoLog.String(), "--resume=auto: no readable checkpoint of loader helix") {
		t.Errorf("--resume=auto log does not say no checkpoint reads:\n%s", autoLog.String())
	}
}

// TestResumeRefusesAnotherDataset resumes a checkpoint on a dataset of
// as many shards under other names: it was accepted, and the run went on
// from the first dataset's reader positions in the second. It is
// refused, naming the first shard that differs.
func TestResumeRefusesAnotherDataset(t *testing.T) {
	data := gentest.Tiny(t)
	cfg, _ := runCheckpointed(t, 4, data, KindLocal, 8, 4)
	other := t.TempDir()
	shards, _ := filepath.Glob(filepath.Join(data, "*.tar"))
	for i, p := range shards {
		if err := os.Symlink(p, filepath.Join(other, fmt.Sprintf("other-%02d.tar", i))); err != nil {
			t.Fatal(err)
		}
	}
	cfg.CheckpointEvery, cfg.Resume = 0, true
	_, errs := runInProcess(t, 4, other, cfg)
	named := false
	for r, err := range errs {
		if err == nil {
			t.Errorf("rank %d resumed on another dataset", r)
		}
		named = named || err != nil && strings.Contains(err.Error(), "was written reading another dataset") &&
			strings.Contains(err.Error(), "(shard 0: "+filepath.Base(shards[0])+" with 4 samples when saved, other-00.tar with 4 samples now)")
	}
	if !named {
		t.Errorf("no rank said the dataset differs: %v", errs)
	}
	// The same shards under the same names elsewhere resume.
	same := t.TempDir()
	for _, p := range shards {
		if err := os.Symlink(p, filepath.Join(same, filepath.Base(p))); err != nil {
			t.Fatal(err)
		}
	}
	_, errs = runInProcess(t, 4, same, cfg)
	requireOK(t, errs)
}

// TestCheckpointKeep saves every 4 of 20 steps keeping 2: the newest two
// complete checkpoints (12, 16) stay, step 4 is gone, step 8 is gone or
// incomplete (a rank prunes from what it sees when it saves), and the
// run resumes from 16. Checkpoints used to pile up for good.
func TestCheckpointKeep(t *testing.T) {
	data := gentest.Tiny(t)
	dir := t.TempDir()
	cfg := testConfig(KindLocal)
	cfg.Steps, cfg.CheckpointDir, cfg.CheckpointEvery, cfg.CheckpointKeep = 20, dir, 4, 2
	_, errs := runInProcess(t, 4, data, cfg)
	requireOK(t, errs)
	var complete []int64
	for _, s := range checkpointSteps(dir, KindLocal) {
		if _, ok := stepComplete(dir, KindLocal, s); ok {
			complete = append(complete, s)
		}
	}
	if !slices.Equal(complete, []int64{16, 12}) {
		t.Errorf("complete checkpoints %v, want [16 12]", complete)
	}
	if _, err := os.Stat(filepath.Dir(checkpointPath(dir, KindLocal, 4, 0))); !os.IsNotExist(err) {
		t.Errorf("step 4 still there: %v", err)
	}
	if got := latestCheckpoint(dir); got != 16 {
		t.Errorf("latest checkpoint %d, want 16", got)
	}
	cfg.CheckpointEvery, cfg.Resume = 0, true
	resumed, errs := runInProcess(t, 4, data, cfg)
	requireOK(t, errs)
	if len(resumed.Records) != 4*4 {
		t.Errorf("resumed run delivered %d rank-steps, want 16 (steps 16..19)", len(resumed.Records))
	}
}

// TestPruneByTheLastRank: a rank that ran ahead saved step 16 before
// step 12 was complete and so pruned nothing; the last rank to save 16
// sees 16 and 12 complete and removes steps 8 and 4 whole, the files of
// the ranks that had moved on included. A step older than an incomplete
// one is kept while fewer than keep newer steps are complete.
func TestPruneByTheLastRank(t *testing.T) {
	dir := t.TempDir()
	for _, s := range []int64{4, 8, 12} {
		touchCheckpoints(t, dir, KindLocal, s, 4, 0, 1, 2, 3)
	}
	touchCheckpoints(t, dir, KindLocal, 16, 4, 0) // rank 0 ran ahead
	pruneCheckpoints(dir, KindLocal, 2)
	if got := checkpointSteps(dir, KindLocal); !slices.Equal(got, []int64{16, 12, 8}) {
		t.Fatalf("after rank 0 saved 16: steps %v, want [16 12 8]", got)
	}
	touchCheckpoints(t, dir, KindLocal, 16, 4, 1, 2, 3)
	pruneCheckpoints(dir, KindLocal, 2)
	if got := checkpointSteps(dir, KindLocal); !slices.Equal(got, []int64{16, 12}) {
		t.Fatalf("after the last rank saved 16: steps %v, want [16 12]", got)
	}
	for _, s := range []int64{16, 12} {
		if n, ok := stepComplete(dir, KindLocal, s); !ok || n != 4 {
			t.Errorf("step %d: complete %v with %d ranks, want 4", s, ok, n)
		}
	}
}
