package loader

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/datahelix/datahelix/collective"
	"github.com/datahelix/datahelix/decode"
	"github.com/datahelix/datahelix/internal/gen/gentest"
	"github.com/datahelix/datahelix/internal/metrics"
	"github.com/datahelix/datahelix/internal/step"
)

// stepIDs runs cfg on n in-process ranks and returns, per step, the ids
// of every sample of the global batch (delivered or dropped), sorted,
// and, when keep, rank 0's loader state after its last step.
func stepIDs(t *testing.T, n int, data string, cfg Config, keep bool) (map[int64][]uint64, []byte) {
	t.Helper()
	var mu sync.Mutex
	ids := map[int64][]uint64{}
	var state []byte
	var end func(rank int, l *Loader)
	if keep {
		end = func(rank int, l *Loader) {
			if rank == 0 {
				state = l.State()
			}
		}
	}
	runLoaders(t, n, data, cfg, func(_ int, b *Batch) error {
		mu.Lock()
		defer mu.Unlock()
		for _, s := range b.Samples {
			ids[b.Step] = append(ids[b.Step], s.ID)
		}
		for _, d := range b.Dropped {
			ids[b.Step] = append(ids[b.Step], d.ID)
		}
		return nil
	}, end)
	for _, v := range ids {
		slices.Sort(v)
	}
	return ids, state
}

// wantSplitAsWhole checks that the steps of a run split in two, split
// then rest, are those of the unsplit run whole, each step once; it
// leaves the joined steps in split.
func wantSplitAsWhole(t *testing.T, split, rest, whole map[int64][]uint64, steps int) {
	t.Helper()
	for s, v := range rest {
		if _, ok := split[s]; ok {
			t.Fatalf("step %d delivered before and after the split", s)
		}
		split[s] = v
	}
	for s := range int64(steps) {
		if !slices.Equal(split[s], whole[s]) {
			t.Errorf("step %d: split run trained %v, the unsplit one %v", s, split[s], whole[s])
		}
	}
}

// batchesHash folds the per-step ids as a run's summary does.
func batchesHash(ids map[int64][]uint64) string {
	var recs []metrics.StepRecord
	for s, v := range ids {
		r := metrics.StepRecord{Step: s}
		for _, id := range v {
			r.Hash += metrics.IDDigest(id)
		}
		recs = append(recs, r)
	}
	return metrics.Summarize(step.KindHelix, recs, 1, len(ids), 1, 1, 0, 1).BatchesHash
}

// TestElasticResume: a run split at step k, saved at N ranks and resumed
// at M with the same global batch, trains the global batches the unsplit
// run trains: 2 ranks to 4 and 4 ranks to 3, under helix (which moves
// samples between ranks) and torch.
func TestElasticResume(t *testing.T) {
	data := gentest.Tiny(t) // 8 shards of 4 samples
	const steps, k = 9, 4
	for _, c := range []struct {
		kind         Kind
		from, to, gb int
	}{{KindHelix, 2, 4, 8}, {KindTorch, 4, 3, 12}} {
		t.Run(fmt.Sprintf("%s %d to %d ranks", c.kind, c.from, c.to), func(t *testing.T) {
			cfg := testConfig(c.kind)
			cfg.Steps, cfg.Batch = steps, c.gb/c.from
			whole, _ := stepIDs(t, c.from, data, cfg, false)
			cfg.Steps = k
			split, state := stepIDs(t, c.from, data, cfg, true)
			cfg.Steps, cfg.Batch, cfg.Restore = steps, c.gb/c.to, state
			rest, _ := stepIDs(t, c.to, data, cfg, false)
			wantSplitAsWhole(t, split, rest, whole, steps)
			if a, b := batchesHash(split), batchesHash(whole); a != b {
				t.Errorf("batches hash %s split, %s unsplit", a, b)
			}
		})
	}
}

// TestElasticResumeRefusals: a state resumes only with the same global
// batch, seed and dataset, and says which differs.
func TestElasticResumeRefusals(t *testing.T) {
	data := gentest.Tiny(t)
	cfg := testConfig(KindHelix)
	cfg.Steps, cfg.Batch = 3, 2
	_, state := stepIDs(t, 2, data, cfg, true)
	for _, c := range []struct {
		name  string
		ranks int
		edit  func(c *Config)
		want  string
	}{
		{"global batch", 3, func(c *Config) { c.Batch = 2 }, "a global batch of 4 (2 ranks x 2), this run's is 6 (3 x 2)"},
		{"seed", 2, func(c *Config) { c.Seed++ }, "seed 7, this run's 8"},
		{"streams", 2, func(c *Config) { c.Streams = 2 }, "4 streams, this run's 2"},
	} {
		r := cfg
		r.Steps, r.Restore = 6, state
		c.edit(&r)
		errs := checkJobErrs(t, c.ranks, data, r)
		for rank, err := range errs {
			if !errors.Is(err, ErrState) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: rank %d: %v, want ErrState saying %q", c.name, rank, err, c.want)
			}
		}
	}
}

// checkJobErrs starts cfg's loaders on n in-process ranks and returns
// each rank's error from NewLoader.
func checkJobErrs(t *testing.T, n int, data string, cfg Config) []error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	errs := make([]error, n)
	collective.RunLocal(ctx, n, func(ctx context.Context, c collective.Comm) error {
		ds, err := decode.OpenDataset(data, t.TempDir())
		if err != nil {
			return err
		}
		defer ds.Close()
		l, err := NewLoader(ctx, c, ds, cfg)
		if err == nil {
			l.Close()
		}
		errs[c.Rank()] = err
		return nil
	})
	return errs
}

// TestElasticCheckpoints: checkpoint files saved at N ranks resume at M
// with the same global batch, rank r of M reading the file of rank r mod
// N, and the resumed run trains the global batches of the unsplit run: 2
// ranks to 4 (half the batch) under helix, 4 ranks to 3 under torch. The
// resumed 3-rank run then saves every 2 steps keeping 1: its pruning
// removes the 4-rank step, rank 3's file included.
func TestElasticCheckpoints(t *testing.T) {
	data := gentest.Tiny(t) // 8 shards of 4 samples
	const steps, every = 9, 4
	for _, c := range []struct {
		kind         Kind
		from, to, gb int
	}{{KindHelix, 2, 4, 8}, {KindTorch, 4, 3, 12}} {
		t.Run(fmt.Sprintf("%s %d to %d ranks", c.kind, c.from, c.to), func(t *testing.T) {
			cfg := testConfig(c.kind)
			cfg.Steps, cfg.Batch = steps, c.gb/c.from
			whole, _ := stepIDs(t, c.from, data, cfg, false)
			// A job that saves step 4 and ends at 6, as one killed there.
			dir := t.TempDir()
			cfg.Steps, cfg.CheckpointDir, cfg.CheckpointEvery = 6, dir, every
			split, _ := stepIDs(t, c.from, data, cfg, false)
			for s := range split {
				if s >= every {
					delete(split, s)
				}
			}
			var log syncBuffer
			cfg.Steps, cfg.Batch, cfg.Resume, cfg.Log = steps, c.gb/c.to, true, &log
			cfg.CheckpointEvery, cfg.CheckpointKeep = 2, 1
			rest, _ := stepIDs(t, c.to, data, cfg, false)
			want := fmt.Sprintf("datahelix: loader %s resumes from step %d of %s, saved by %d ranks\n", c.kind, every, loaderCheckpointDir(dir, c.kind), c.from)
			if log.String() != want {
				t.Errorf("log:\n%s\nwant:\n%s", log.String(), want)
			}
			wantSplitAsWhole(t, split, rest, whole, steps)
			// Pruning as the last rank of the resumed job to save step 8
			// does: step 4, saved by c.from ranks, goes whole.
			pruneCheckpoints(dir, c.kind, 1)
			if got := checkpointSteps(dir, c.kind); !slices.Equal(got, []int64{8}) {
				t.Errorf("steps left after pruning to 1: %v, want [8]", got)
			}
			if n, ok := stepComplete(dir, c.kind, 8); !ok || n != c.to {
				t.Errorf("step 8: complete %v with %d ranks, want %d", ok, n, c.to)
			}
		})
	}
}

// TestElasticCheckpointRefusals: a checkpoint resumes at another number
// of ranks only with the same global batch, seed and dataset, refused on
// every rank alike saying which differs; a step whose files two jobs of
// other rank counts wrote (the later killed while saving) is not one.
func TestElasticCheckpointRefusals(t *testing.T) {
	data := gentest.Tiny(t)
	cfg, _ := runCheckpointed(t, 2, data, KindLocal, 6, 4) // batch 2 a rank
	dir := cfg.CheckpointDir
	file := checkpointPath(dir, KindLocal, 4, 0)
	cfg.CheckpointEvery, cfg.Resume = 0, true
	for _, c := range []struct {
		name  string
		ranks int
		edit  func(c *Config)
		want  string
	}{
		{"global batch", 3, func(c *Config) {}, file + " was written with a global batch of 4 (2 ranks x 2), this job's is 6 (3 x 2): keep ranks x --batch to resume at another number of ranks"},
		{"global batch, auto", 4, func(c *Config) { c.ResumeIfAny = true }, file + " was written with a global batch of 4 (2 ranks x 2), this job's is 8 (4 x 2)"},
		{"seed", 4, func(c *Config) { c.Batch, c.Seed = 1, 8 }, file + " was written with seed 7, this job's is 8"},
	} {
		r := cfg
		c.edit(&r)
		wantEveryRank(t, c.name, checkJob(t, c.ranks, data, r, KindLocal), c.want)
	}
	ok := cfg
	ok.Batch = 1
	requireOK(t, checkJob(t, 4, data, ok, KindLocal))

	// Rank 1's file of step 4 rewritten by a 4-rank job killed while
	// saving it: ranks 0 and 1 no longer agree on who wrote the step.
	// Resuming at 4 ranks reads both (each rank its own), and at 1 rank
	// rank 0 reads rank 1's too: there is no step to fall back to.
	b, err := os.ReadFile(checkpointPath(dir, KindLocal, 4, 1))
	if err != nil {
		t.Fatal(err)
	}
	b = bytes.Replace(b, []byte(`"ranks": 2`), []byte(`"ranks": 4`), 1)
	if err := os.WriteFile(checkpointPath(dir, KindLocal, 4, 1), b, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{4, 1} {
		r := ok
		r.Batch = 4 / n
		wantEveryRank(t, fmt.Sprintf("mixed step, %d ranks", n), checkJob(t, n, data, r, KindLocal),
			"--resume: no readable checkpoint of loader local in "+loaderCheckpointDir(dir, KindLocal)+": a file of each complete step does not read ("+
				checkpointPath(dir, KindLocal, 4, 1)+" holds rank 1 of 4, its step's files were written by 2 ranks (a job killed while saving it))")
	}
}

// TestResumeNamesTheChangedShard: a state saved on a dataset whose
// shard 3 then lost samples is refused, naming the shard, its count then
// and now.
func TestResumeNamesTheChangedShard(t *testing.T) {
	data := gentest.Tiny(t)
	cfg := testConfig(KindHelix)
	cfg.Steps, cfg.Batch = 3, 2
	_, state := stepIDs(t, 2, data, cfg, true)
	changed := t.TempDir()
	shards, _ := filepath.Glob(filepath.Join(data, "*.tar"))
	for i, p := range shards {
		dst := filepath.Join(changed, filepath.Base(p))
		if i == 3 {
			gentest.WriteFirstSample(t, p, dst)
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r := cfg
	r.Steps, r.Restore = 6, state
	want := "another dataset (shard 3: " + filepath.Base(shards[3]) + " with 4 samples when saved, " + filepath.Base(shards[3]) + " with 1 sample now)"
	for rank, err := range checkJobErrs(t, 2, changed, r) {
		if !errors.Is(err, ErrState) || !strings.Contains(err.Error(), want) {
			t.Errorf("rank %d: %v, want ErrState saying %q", rank, err, want)
		}
	}
}
