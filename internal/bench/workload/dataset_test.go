package workload

import (
	"context"
	"testing"
	"time"

	"github.com/datahelix/datahelix/decode"
	"github.com/datahelix/datahelix/gpu"
	"github.com/datahelix/datahelix/internal/gen/gentest"
	"github.com/datahelix/datahelix/internal/loader"
	"github.com/datahelix/datahelix/internal/metrics"
	"github.com/datahelix/datahelix/internal/sim"
	"github.com/datahelix/datahelix/internal/step"
)

// runReal runs the runtime on n in-process ranks and returns rank 0's
// summary.
func runReal(t *testing.T, n int, data string, cfg loader.Config) metrics.Summary {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, errs := loader.RunInProcess(ctx, n, data, t.TempDir(), cfg)
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	return res.Summary
}

// TestDatasetSamplesTrainTheRuntimesBatches: the simulator fed with a
// real dataset trains exactly the batches the runtime trains on it.
func TestDatasetSamplesTrainTheRuntimesBatches(t *testing.T) {
	if testing.Short() {
		t.Skip("generates a dataset and runs the runtime")
	}
	data := gentest.Tiny(t)
	ds, err := decode.OpenDataset(data, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	const ranks = 2
	dc := DatasetSimConfig{Ranks: ranks, Batch: 2, Steps: 6, Workers: 2, Frames: 2, Size: 32, Seed: 7}
	d, err := NewDatasetSamples(ds, nil, dc)
	if err != nil {
		t.Fatal(err)
	}
	if !(d.MeanCostUS > 0) {
		t.Fatalf("mean cost %v", d.MeanCostUS)
	}
	model := gpu.Model{Base: 2 * time.Millisecond}
	for _, k := range []step.Kind{step.KindTorch, step.KindHelix} {
		res, err := sim.Run(sim.Config{Loader: k, Ranks: ranks, Batch: dc.Batch, Steps: dc.Steps, Workers: dc.Workers,
			GPU: model, Samples: d.Samples, Seed: dc.Seed})
		if err != nil {
			t.Fatal(err)
		}
		real := runReal(t, ranks, data, loader.Config{Loader: loader.Kind(k), Batch: dc.Batch, Steps: dc.Steps, Workers: dc.Workers, Seed: dc.Seed,
			Decode: decode.Options{Frames: dc.Frames, Size: dc.Size}, GPU: model, CheckEvery: 2})
		if res.Summary.BatchesHash != real.BatchesHash {
			t.Errorf("%s: simulated batches %s, real %s: the simulator does not train the runtime's batches", k, res.Summary.BatchesHash, real.BatchesHash)
		}
	}
}
