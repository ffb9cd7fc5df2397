package loader

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/datahelix/datahelix/internal/costmodel"
	"github.com/datahelix/datahelix/internal/reader"
	"github.com/datahelix/datahelix/internal/shard"

	"github.com/datahelix/datahelix/collective"
	"github.com/datahelix/datahelix/decode"
	"github.com/datahelix/datahelix/internal/gen/gentest"
)

// wantEveryRank fails the test unless every error of errs is the same
// collective.AllRanks error containing want.
func wantEveryRank(t *testing.T, what string, errs []error, want string) {
	t.Helper()
	for r, err := range errs {
		if err == nil || !collective.IsAllRanks(err) || !strings.Contains(err.Error(), want) || err.Error() != errs[0].Error() {
			t.Errorf("%s: rank %d: got %v; want the every-rank error containing %q", what, r, err, want)
		}
	}
}

// TestResumeAtAnotherGlobalBatch resumes a 4-rank job's checkpoint with
// 2 ranks of the same --batch, half its global batch: it must be refused
// on every rank alike, naming both global batches, with --resume=auto
// too (a requeue on another node count must not start over and mix its
// files into the 4-rank steps); the other way round (2 ranks'
// checkpoint, 4 ranks resuming) says the same. (TestElasticCheckpoints
// resumes the ones that hold.)
func TestResumeAtAnotherGlobalBatch(t *testing.T) {
	data := gentest.Tiny(t)
	cfg, _ := runCheckpointed(t, 4, data, KindLocal, 8, 4)
	dir := cfg.CheckpointDir

	cfg.CheckpointEvery, cfg.Resume = 0, true
	_, errs := runInProcess(t, 2, data, cfg)
	want := fmt.Sprintf("--resume: %s was written with a global batch of 8 (4 ranks x 2), this job's is 4 (2 x 2): keep ranks x --batch to resume at another number of ranks",
		checkpointPath(dir, KindLocal, 4, 0))
	wantEveryRank(t, "4-rank checkpoint, 2 ranks", errs, want)
	for r, err := range errs {
		if err.Error() != want {
			t.Errorf("rank %d: got %v, want exactly %q", r, err, want)
		}
	}
	cfg.ResumeIfAny = true
	_, errs = runInProcess(t, 2, data, cfg)
	wantEveryRank(t, "4-rank checkpoint, 2 ranks, --resume=auto", errs, want)
	wantEveryRank(t, "CheckJob, 4-rank checkpoint, 2 ranks, --resume=auto", checkJob(t, 2, data, cfg, KindLocal), want)
	cfg.ResumeIfAny = false

	// A 2-rank job's checkpoint, 4 ranks resuming.
	dir2 := t.TempDir()
	cfg.CheckpointDir, cfg.CheckpointEvery, cfg.Resume = dir2, 4, false
	_, errs = runInProcess(t, 2, data, cfg)
	requireOK(t, errs)
	cfg.CheckpointEvery, cfg.Resume = 0, true
	_, errs = runInProcess(t, 4, data, cfg)
	wantEveryRank(t, "2-rank checkpoint, 4 ranks", errs, "was written with a global batch of 4 (2 ranks x 2), this job's is 8 (4 x 2)")
}

// TestResumeAnotherBatchIsEveryRanks resumes with another --batch: every
// rank's file says so alike, and the error must be every rank's (one
// line, a clean exit), not each rank's own, which ended in MPI_Abort.
func TestResumeAnotherBatchIsEveryRanks(t *testing.T) {
	data := gentest.Tiny(t)
	cfg, _ := runCheckpointed(t, 4, data, KindTorch, 8, 4)
	cfg.CheckpointEvery, cfg.Resume, cfg.Batch = 0, true, 3
	_, errs := runInProcess(t, 4, data, cfg)
	wantEveryRank(t, "--batch 3 after --batch 2", errs, "was written with a global batch of 8 (4 ranks x 2), this job's is 12 (4 x 3)")
}

// checkJob runs CheckJob on n in-process ranks over the dataset at data.
func checkJob(t *testing.T, n int, data string, cfg Config, kinds ...Kind) []error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	index := t.TempDir()
	return collective.RunLocal(ctx, n, func(ctx context.Context, c collective.Comm) error {
		ds, err := decode.OpenDataset(data, index)
		if err != nil {
			return err
		}
		defer ds.Close()
		return CheckJob(c, ds, cfg, kinds)
	})
}

// TestCheckJob checks what a job must refuse before its first loader
// trains, on every rank alike: a new run saving checkpoints where an
// earlier run's are (a later --resume took the earlier run's newer steps
// for its own), a --resume where some loader has no checkpoint (found
// only after the loaders before it trained), and shards that do not
// split over the ranks (said as if a loader's fault).
func TestCheckJob(t *testing.T) {
	data := gentest.Tiny(t)
	dir := t.TempDir()
	ds, err := decode.OpenDataset(data, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	sizes := make([]int, ds.NumShards())
	for i, s := range shard.ShardsOf(ds) {
		sizes[i] = s.Len()
	}
	ds.Close()
	cost, err := costmodel.New(nil).MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	// writeCheckpoints writes what a run of the given ranks and batch
	// saves at step, its readers where they start.
	writeCheckpoints := func(dir string, k Kind, step int64, ranks, batch int) {
		for r := range ranks {
			p := checkpointPath(dir, k, step, r)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			rd, err := reader.New(sizes, r, ranks, batch, 7, reader.DefaultShuffleBuffer, 0, 1)
			if err != nil {
				t.Fatal(err)
			}
			rs, err := rd.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			st := checkpointState{Version: checkpointVersion, Step: step, Rank: r, Ranks: ranks, Loader: k.String(), Batch: batch, Seed: 7, Shards: 8,
				Reader: rs, Cost: cost}
			b, err := json.Marshal(st)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	writeCheckpoints(dir, KindTorch, 10, 2, 2)
	writeCheckpoints(dir, KindTorch, 57, 2, 2)
	base := testConfig(KindTorch)
	base.Steps, base.CheckpointDir = 60, dir

	fresh := base
	fresh.CheckpointEvery = 5
	errs := checkJob(t, 2, data, fresh, KindTorch, KindHelix)
	wantEveryRank(t, "new run into an earlier run's directory", errs,
		fmt.Sprintf("--checkpoint-dir %s: %s holds checkpoints of an earlier run, the newest at step 57, which a later --resume would take for this run's: pass --resume to continue that run, or remove %s or pick another --checkpoint-dir",
			dir, filepath.Join(dir, "torch"), filepath.Join(dir, "torch")))
	// A loader with no checkpoint file there (a job killed while writing
	// its first left a temporary file), or a run that saves none, is fine.
	tmp := checkpointPath(dir, KindHelix, 5, 0) + ".tmp"
	if err := os.MkdirAll(filepath.Dir(tmp), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tmp, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	requireOK(t, checkJob(t, 2, data, fresh, KindHelix))
	none := base
	none.CheckpointEvery = 0
	requireOK(t, checkJob(t, 2, data, none, KindTorch))
	none.CheckpointEvery = 60
	requireOK(t, checkJob(t, 2, data, none, KindTorch))

	resume := base
	resume.Resume = true
	requireOK(t, checkJob(t, 2, data, resume, KindTorch))
	errs = checkJob(t, 2, data, resume, KindTorch, KindLocal)
	wantEveryRank(t, "--resume, local without a checkpoint", errs, "--resume: no complete checkpoint of loader local in "+filepath.Join(dir, "local"))
	for r, err := range errs {
		if !errors.Is(err, ErrNoCheckpoint) {
			t.Errorf("rank %d: %v is not ErrNoCheckpoint", r, err)
		}
	}
	// Another job's checkpoint (another batch) fails before any loader.
	other := resume
	other.Batch = 3
	wantEveryRank(t, "--resume --batch 3", checkJob(t, 2, data, other, KindTorch),
		"--resume: "+checkpointPath(dir, KindTorch, 57, 0)+" was written with a global batch of 4 (2 ranks x 2), this job's is 6 (2 x 3): keep ranks x --batch to resume at another number of ranks")
	resume.ResumeIfAny = true
	requireOK(t, checkJob(t, 2, data, resume, KindTorch, KindLocal))
	other.ResumeIfAny = true
	wantEveryRank(t, "--resume=auto --batch 3", checkJob(t, 2, data, other, KindLocal, KindTorch), "was written with a global batch of 4 (2 ranks x 2)")
	resume.Steps = 50
	wantEveryRank(t, "--resume=auto past --steps", checkJob(t, 2, data, resume, KindLocal, KindTorch),
		fmt.Sprintf("--resume: the checkpoint in %s is at step 57, at or past --steps 50: nothing to run", filepath.Join(dir, "torch")))

	// The walk restore will make: past a damaged newest step to another
	// job's checkpoint, which fails now, not once the loader starts
	// after the loaders before it trained.
	behind := t.TempDir()
	writeCheckpoints(behind, KindTorch, 10, 2, 3)
	writeCheckpoints(behind, KindTorch, 20, 2, 2)
	if err := os.WriteFile(checkpointPath(behind, KindTorch, 20, 1), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// Step 30: every header fits this run, rank 0's reader state does not
	// read, so restore falls back past it as well.
	writeCheckpoints(behind, KindTorch, 30, 2, 2)
	p30 := checkpointPath(behind, KindTorch, 30, 0)
	var st checkpointState
	if b, err := os.ReadFile(p30); err != nil || json.Unmarshal(b, &st) != nil {
		t.Fatalf("reading %s back: %v", p30, err)
	}
	st.Reader = json.RawMessage(`{}`)
	if b, err := json.Marshal(st); err != nil || os.WriteFile(p30, b, 0o644) != nil {
		t.Fatalf("writing %s: %v", p30, err)
	}
	walk := resume
	walk.CheckpointDir, walk.ResumeIfAny, walk.Steps = behind, false, 60
	wantEveryRank(t, "--resume, damaged steps 30 and 20, step 10 of batch 3", checkJob(t, 2, data, walk, KindTorch),
		"--resume: "+checkpointPath(behind, KindTorch, 10, 0)+" was written with a global batch of 6 (2 ranks x 3), this job's is 4 (2 x 2): keep ranks x --batch to resume at another number of ranks")
	for r := range 2 {
		if err := os.WriteFile(checkpointPath(behind, KindTorch, 10, r), []byte("{"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	wantEveryRank(t, "--resume, no step reads", checkJob(t, 2, data, walk, KindTorch),
		"--resume: no readable checkpoint of loader torch in "+filepath.Join(behind, "torch"))
	walk.ResumeIfAny = true
	requireOK(t, checkJob(t, 2, data, walk, KindTorch))

	// Any shard count on any rank count, but not an epoch shorter than a
	// global batch (8 shards of 4 samples, 2 a rank on 64 ranks).
	requireOK(t, checkJob(t, 3, data, none, KindTorch))
	requireOK(t, checkJob(t, 16, data, none, KindTorch))
	errs = checkJob(t, 64, data, none, KindTorch)
	wantEveryRank(t, "64 ranks", errs, "reader: an epoch of 32 samples is shorter than one global batch of 128")
}
