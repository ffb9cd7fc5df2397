package loader

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/datahelix/datahelix/collective"
	"github.com/datahelix/datahelix/decode"
	"github.com/datahelix/datahelix/gpu"
	"github.com/datahelix/datahelix/internal/gen/gentest"
	"github.com/datahelix/datahelix/internal/metrics"
	"github.com/datahelix/datahelix/internal/reader"
	"github.com/datahelix/datahelix/internal/step"
)

// testConfig is a small, fast configuration: 2-frame 32x32 clips.
func testConfig(k Kind) Config {
	return Config{Loader: k, Batch: 2, Steps: 6, Workers: 2, Seed: 7,
		Decode: decode.Options{Frames: 2, Size: 32}, GPU: gpu.Model{Base: 2 * time.Millisecond}, CheckEvery: 2}
}

// runInProcess runs RunInProcess with a 2-minute limit.
func runInProcess(t *testing.T, n int, data string, cfg Config) (*Result, []error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, errs := RunInProcess(ctx, n, data, t.TempDir(), cfg)
	if ctx.Err() != nil {
		t.Fatal("in-process run did not finish in 2 minutes")
	}
	return res, errs
}

// runCheckpointed runs n in-process ranks of loader k for steps steps,
// saving a checkpoint every every steps into a new directory, and
// returns the run's config (its CheckpointDir that directory) and
// result.
func runCheckpointed(t *testing.T, n int, data string, k Kind, steps, every int) (Config, *Result) {
	t.Helper()
	cfg := testConfig(k)
	cfg.Steps, cfg.CheckpointDir, cfg.CheckpointEvery = steps, t.TempDir(), every
	res, errs := runInProcess(t, n, data, cfg)
	requireOK(t, errs)
	return cfg, res
}

func requireOK(t *testing.T, errs []error) {
	t.Helper()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
}

// perStep sums the record digests of every rank per step: the global
// batch of each step, whoever prepared it.
func perStep(recs []metrics.StepRecord) map[int64]uint64 {
	m := map[int64]uint64{}
	for _, r := range recs {
		m[r.Step] += r.Hash
	}
	return m
}

func TestEveryLoaderDeliversTheSameGlobalBatches(t *testing.T) {
	data := gentest.Tiny(t)
	var want map[int64]uint64
	for _, k := range []Kind{KindTorch, KindLocal, KindStatic, KindHelix, KindHelixNoGate, KindHelixNoTrain} {
		res, errs := runInProcess(t, 8, data, testConfig(k))
		requireOK(t, errs)
		s := res.Summary
		if s.Ranks != 8 || s.Steps != 6 || len(res.Records) != 8*6 {
			t.Fatalf("%s: summary %+v with %d records, want 8 ranks x 6 steps", k, s, len(res.Records))
		}
		for _, r := range res.Records {
			if r.Samples+r.Dropped != 2 {
				t.Errorf("%s: rank %d step %d got %d samples (+%d dropped), want 2", k, r.Rank, r.Step, r.Samples, r.Dropped)
			}
			// The simulated GPU's 2 ms, and the step from delivery to the
			// next request holds it and the allreduce.
			if r.GPUUS != 2000 || r.ComputeUS < r.GPUUS {
				t.Errorf("%s: rank %d step %d: gpu_us %d, compute_us %d, want 2000 and at least that", k, r.Rank, r.Step, r.GPUUS, r.ComputeUS)
			}
		}
		var cpu, dec int64
		rankCPU := make([]int64, 8)
		for _, r := range res.Records {
			if r.CPUUS < 0 || r.DecodeCPUUS < 0 {
				t.Errorf("%s: rank %d step %d: negative cpu_us %d or decode_cpu_us %d", k, r.Rank, r.Step, r.CPUUS, r.DecodeCPUUS)
			}
			cpu += r.CPUUS
			dec += r.DecodeCPUUS
			rankCPU[r.Rank] += r.CPUUS
		}
		if cpu <= 0 || dec <= 0 {
			t.Errorf("%s: the records show no CPU time (%d µs) or no decode CPU time (%d µs) for a run that decoded", k, cpu, dec)
		}
		// The ranks are goroutines of this process: each rank's cpu_us
		// adds up to the process's CPU time, which holds every rank's
		// decodes (a clock tick of slack per record).
		if most := slices.Max(rankCPU); dec > most+int64(len(res.Records))*10_000 {
			t.Errorf("%s: the ranks' decodes took %d µs of CPU, more than the process's %d", k, dec, most)
		}
		got := perStep(res.Records)
		if want == nil {
			want = got
		}
		for st, h := range want {
			if got[st] != h {
				t.Errorf("%s: step %d delivered other samples than torch", k, st)
			}
		}
		if k.stepKind().Planned() && k != KindStatic && s.PlanUSP50 <= 0 && s.AllgatherUSP50 <= 0 {
			t.Errorf("%s: no plan or allgather time recorded", k)
		}
		t.Logf("%s: misses %d, moved %.0f B/step, hash %s", k, s.Misses, s.BytesMovedPerStep, s.BatchesHash)
	}
}

// eachBatch runs n in-process ranks of a Loader with cfg on data, the
// training loop calling each(rank, batch) for every batch, and fails the
// test if a rank fails or the run takes over 2 minutes.
func eachBatch(t *testing.T, n int, data string, cfg Config, each func(rank int, b *Batch) error) {
	t.Helper()
	runLoaders(t, n, data, cfg, each, nil)
}

// runLoaders is eachBatch, calling end(rank, loader) (when not nil) after
// each rank's last batch, before its loader closes. A failed rank aborts
// the in-process job, as the launcher does, so that the others, blocked
// in a collective with it, fail too instead of hanging the test.
func runLoaders(t *testing.T, n int, data string, cfg Config, each func(rank int, b *Batch) error, end func(rank int, l *Loader)) {
	t.Helper()
	runLoadersOn(t, n, data, nil, cfg, each, end)
}

// runLoadersOn is runLoaders with each rank's loader reading the source
// wrap makes of the dataset it opened (nil: the dataset itself).
func runLoadersOn(t *testing.T, n int, data string, wrap func(rank int, ds *decode.Dataset) decode.Source, cfg Config, each func(rank int, b *Batch) error, end func(rank int, l *Loader)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	errs := collective.RunLocal(ctx, n, func(ctx context.Context, c collective.Comm) error {
		ds, err := decode.OpenDataset(data, t.TempDir())
		if err != nil {
			return err
		}
		var src decode.Source = ds
		if wrap != nil {
			src = wrap(c.Rank(), ds)
		}
		l, err := NewLoader(ctx, c, src, cfg)
		if err != nil {
			return err
		}
		defer l.Close()
		for {
			b, err := l.Next(ctx)
			if errors.Is(err, io.EOF) {
				if end != nil {
					end(c.Rank(), l)
				}
				return nil
			}
			if err != nil {
				return err
			}
			if err := each(c.Rank(), b); err != nil {
				return err
			}
		}
	})
	requireOK(t, errs)
}

func TestBatchTensorsHaveTheConfiguredShape(t *testing.T) {
	eachBatch(t, 4, gentest.Tiny(t), testConfig(KindHelix), func(_ int, b *Batch) error {
		for _, s := range b.Samples {
			for _, tn := range s.Tensors {
				want := 32 * 32 * 3
				if s.Modality == decode.ModalityVideo {
					want *= 2
				}
				if len(tn.Data) != want {
					return fmt.Errorf("step %d sample %s (%v): tensor %v of %d bytes, want %d", b.Step, s.Key, s.Modality, tn.Shape, len(tn.Data), want)
				}
			}
		}
		return nil
	})
}

// corruptCopy copies the dataset's shards into a new directory, replacing
// the video bytes of sample key with garbage.
func corruptCopy(t *testing.T, data, key string) string {
	t.Helper()
	return rewriteCopy(t, data, func(name string, body []byte) []byte {
		if strings.HasPrefix(name, key+".") && (strings.HasSuffix(name, ".mp4") || strings.HasSuffix(name, ".webm")) {
			return bytes.Repeat([]byte("not a video "), len(body)/12+1)
		}
		return body
	})
}

// rewriteCopy copies the dataset's shards into a new directory, each
// member's bytes replaced by what patch returns for them.
func rewriteCopy(t *testing.T, data string, patch func(name string, body []byte) []byte) string {
	t.Helper()
	out := t.TempDir()
	shards, _ := filepath.Glob(filepath.Join(data, "*.tar"))
	for _, p := range shards {
		in, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		copyMembers(t, tw, in, patch)
		tw.Close()
		os.WriteFile(filepath.Join(out, filepath.Base(p)), buf.Bytes(), 0o644)
	}
	return out
}

// copyMembers writes every member of the tar archive in to tw, each body
// replaced by what patch returns for it (nil: as it is).
func copyMembers(t *testing.T, tw *tar.Writer, in []byte, patch func(name string, body []byte) []byte) {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(in))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(tr)
		if patch != nil {
			body = patch(h.Name, body)
			h.Size = int64(len(body))
		}
		tw.WriteHeader(h)
		tw.Write(body)
	}
}

func TestCorruptSampleIsDroppedAndLoggedOnce(t *testing.T) {
	data := corruptCopy(t, gentest.Tiny(t), "000000")
	var log syncBuffer
	cfg := testConfig(KindHelix)
	cfg.Steps = 8 // two epochs of the 4-sample shards at batch 2 on 4 ranks
	cfg.Log = &log
	res, errs := runInProcess(t, 4, data, cfg)
	requireOK(t, errs)
	// Replay the ranks' readers (shard 0's first sample is the corrupt
	// one) to count how often the sample was drawn.
	sizes := []int{4, 4, 4, 4, 4, 4, 4, 4}
	want := 0
	for rank := range 4 {
		r, err := reader.New(sizes, rank, 4, cfg.Batch, cfg.Seed, 64, 0, 1)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < cfg.Steps*cfg.Batch; i++ {
			if s, _ := r.Next(); s == (reader.SampleRef{Shard: 0, Index: 0}) {
				want++
			}
		}
	}
	if want == 0 || res.Summary.DroppedSamples != want {
		t.Errorf("dropped %d samples, want %d (each draw of the corrupt clip)", res.Summary.DroppedSamples, want)
	}
	lines := strings.Count(log.String(), "dropping sample")
	if lines != 1 || !strings.Contains(log.String(), `"000000"`) || !strings.Contains(log.String(), "mixed-000000.tar") {
		t.Errorf("log has %d drop lines, want one naming the key and shard:\n%s", lines, log.String())
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestResumeDeliversTheSameBatches runs 12 steps checkpointing every 4,
// then resumes from the last checkpoint (step 8) and checks that steps
// 8..11 deliver exactly the same samples as the uninterrupted run.
func TestResumeDeliversTheSameBatches(t *testing.T) {
	data := gentest.Tiny(t)
	for _, k := range []Kind{KindLocal, KindHelix} {
		cfg, full := runCheckpointed(t, 4, data, k, 12, 4)
		dir := cfg.CheckpointDir
		if got := latestCheckpoint(dir); got != 8 {
			t.Fatalf("%s: latest checkpoint at step %d, want 8", k, got)
		}
		cfg.CheckpointEvery, cfg.Resume = 0, true
		resumed, errs := runInProcess(t, 4, data, cfg)
		requireOK(t, errs)
		if len(resumed.Records) != 4*4 {
			t.Fatalf("%s: resumed run delivered %d rank-steps, want 16 (steps 8..11 on 4 ranks)", k, len(resumed.Records))
		}
		want, got := perStep(full.Records), perStep(resumed.Records)
		for st := int64(8); st < 12; st++ {
			if got[st] == 0 || got[st] != want[st] {
				t.Errorf("%s: step %d: resumed run delivered other samples", k, st)
			}
		}
		if k == KindLocal {
			// Without planning, each rank's own share matches too.
			byRank := map[[2]int64]uint64{}
			for _, r := range full.Records {
				byRank[[2]int64{r.Step, int64(r.Rank)}] = r.Hash
			}
			for _, r := range resumed.Records {
				if byRank[[2]int64{r.Step, int64(r.Rank)}] != r.Hash {
					t.Errorf("local: rank %d step %d differs after resume", r.Rank, r.Step)
				}
			}
		}
	}
}

// TestAnyShardCountTrains: 8 shards on 3 ranks (uneven), and on 16 (fewer
// shards than ranks: each cut into ranges) train, every step's global
// batch holding distinct samples, and every sample of an epoch read once.
func TestAnyShardCountTrains(t *testing.T) {
	data := gentest.Tiny(t)
	for _, n := range []int{3, 16} {
		cfg := testConfig(KindHelix)
		cfg.Batch, cfg.Steps = 1, 32/n // about one epoch of the 32 samples
		res, errs := runInProcess(t, n, data, cfg)
		requireOK(t, errs)
		if got := len(res.Records); got != n*cfg.Steps {
			t.Errorf("%d ranks: %d records, want %d", n, got, n*cfg.Steps)
		}
	}
}

func TestPlanHashMismatchAbortsNamingStepAndRanks(t *testing.T) {
	data := gentest.Tiny(t)
	cfg := testConfig(KindHelix)
	cfg.hashHook = func(rank int, h uint64) uint64 {
		if rank == 2 {
			return h ^ 1
		}
		return h
	}
	_, errs := runInProcess(t, 4, data, cfg)
	found := false
	for _, err := range errs {
		// The step and the rank are values the message must name.
		if errors.Is(err, ErrPlanMismatch) && strings.Contains(err.Error(), "at step 1") && strings.Contains(err.Error(), "rank 2 computed") {
			found = true
		}
	}
	if !found {
		t.Errorf("no rank reported the mismatch at step 1 naming rank 2: %v", errs)
	}
}

// TestSimulationOnlyLoadersRefused: the oracle, torch-ddp and torch-pack
// exist in bench's simulations only; a job asked for one says so.
func TestSimulationOnlyLoadersRefused(t *testing.T) {
	for _, k := range []Kind{KindOracle, Kind(step.KindTorchDDP), Kind(step.KindTorchPack)} {
		cfg := testConfig(k)
		err := cfg.setDefaults()
		if err == nil || !strings.Contains(err.Error(), "--loader "+k.String()+" exists only in simulation") {
			t.Errorf("%s: %v, want it refused as simulation-only", k, err)
		}
	}
}
