package loader

import (
	"testing"
	"time"

	"github.com/datahelix/datahelix/decode"
	"github.com/datahelix/datahelix/gpu"
	"github.com/datahelix/datahelix/internal/gen/gentest"
)

// lockstepGPUTime runs n in-process ranks of loader k on data, each
// "training" every batch by sleeping its GPU time under m, and returns
// per step the GPU time of the most loaded rank: what a lockstep step
// waits for.
func lockstepGPUTime(t *testing.T, n int, data string, k Kind, m gpu.Model) []time.Duration {
	t.Helper()
	cfg := Config{Loader: k, Batch: 4, Steps: 12, Workers: 2, Seed: 5,
		Decode: decode.Options{Frames: 2, Size: 32}, GPU: m}
	steps := make([][]time.Duration, n) // each rank appends only to its own
	eachBatch(t, n, data, cfg, func(r int, b *Batch) error {
		d := m.StepTime(b.Contents())
		steps[r] = append(steps[r], d)
		time.Sleep(d)
		return nil
	})
	out := make([]time.Duration, cfg.Steps)
	for _, st := range steps {
		if len(st) != cfg.Steps {
			t.Fatalf("%s: a rank trained %d steps, want %d", k, len(st), cfg.Steps)
		}
		for i, d := range st {
			out[i] = max(out[i], d)
		}
	}
	return out
}

// TestHelixEvensOutGPUWork checks, on the runtime with real decoding,
// that the plan spreads GPU work: the test dataset's shards are
// source-homogeneous (clips, images, text), so with every rank training
// its own samples (local) the rank holding clips sets every step's
// length, while helix's ranks, once on time, train batches of nearly
// equal GPU time.
func TestHelixEvensOutGPUWork(t *testing.T) {
	data := gentest.Tiny(t)
	// GPU steps long enough that the ranks stay on time (the phase that
	// evens out GPU work runs only then) on a loaded machine under -race.
	m := gpu.Model{Base: 8 * time.Millisecond, PerFrame: 32 * time.Millisecond, PerToken: 160 * time.Microsecond}
	sum := func(ds []time.Duration) (s time.Duration) {
		for _, d := range ds[4:] { // after the first steps, planned before any progress
			s += d
		}
		return s
	}
	local := sum(lockstepGPUTime(t, 4, data, KindLocal, m))
	helix := sum(lockstepGPUTime(t, 4, data, KindHelix, m))
	t.Logf("slowest rank's GPU time over steps 4-11: local %v, helix %v", local, helix)
	if float64(helix) > 0.9*float64(local) {
		t.Errorf("helix's lockstep GPU time %v is not below 0.9x local's %v: the plan did not even out the GPU work", helix, local)
	}
}
