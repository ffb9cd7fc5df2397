package sim

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/datahelix/datahelix/decode"
	"github.com/datahelix/datahelix/gpu"
	"github.com/datahelix/datahelix/internal/gen/gentest"
	"github.com/datahelix/datahelix/internal/loader"
	"github.com/datahelix/datahelix/internal/step"
	"github.com/datahelix/datahelix/plan"
)

// stepTrace is what one step's plan was made of and what it decided.
type stepTrace struct {
	progress []plan.Progress
	params   plan.Params
	samples  []plan.Sample
	moves    []plan.Move
	orders   [][]int32 // per rank, input indices in decode order
}

func traceOf(in *plan.Input, p *plan.Plan) stepTrace {
	tr := stepTrace{progress: slices.Clone(in.Ranks), params: in.Params, samples: slices.Clone(in.Samples)}
	for _, mv := range p.Moves {
		mv.Samples = slices.Clone(mv.Samples)
		tr.moves = append(tr.moves, mv)
	}
	for r := range in.Ranks {
		tr.orders = append(tr.orders, slices.Clone(p.DecodeOrder(r)))
	}
	return tr
}

func (a stepTrace) diff(b stepTrace) string {
	switch {
	case !slices.Equal(a.progress, b.progress):
		return fmt.Sprintf("progress %+v, %+v", a.progress, b.progress)
	case a.params != b.params:
		return fmt.Sprintf("parameters %+v, %+v", a.params, b.params)
	case !slices.Equal(a.samples, b.samples):
		return fmt.Sprintf("samples\n%+v\n%+v", a.samples, b.samples)
	case !slices.EqualFunc(a.moves, b.moves, func(x, y plan.Move) bool {
		return x.Src == y.Src && x.Dst == y.Dst && x.Bytes == y.Bytes && slices.Equal(x.Samples, y.Samples)
	}):
		return fmt.Sprintf("moves\n%+v\n%+v", a.moves, b.moves)
	case !slices.EqualFunc(a.orders, b.orders, slices.Equal[[]int32]):
		return fmt.Sprintf("decode orders %v, %v", a.orders, b.orders)
	}
	return ""
}

// TestRuntimeAndSimulatorStepAlike runs one job through the runtime (an
// in-process world of loaders decoding a real dataset) and through the
// simulator fed the samples the runtime read, and checks that every step
// plans alike: the same blocks gathered, the same moves, the same decode
// order on every rank. The ranks' progress comes from clocks in the
// runtime and from a virtual clock in the simulator, so the simulator is
// given the runtime's (Config.Progress): what the test pins is
// everything else a driver does around the step.
func TestRuntimeAndSimulatorStepAlike(t *testing.T) {
	for _, k := range []step.Kind{step.KindStatic, step.KindHelix, step.KindHelixNoGate} {
		t.Run(k.String(), func(t *testing.T) { stepAlike(t, k) })
	}
}

func stepAlike(t *testing.T, k step.Kind) {
	data := gentest.Tiny(t)
	const ranks, batch, steps = 3, 2, 6
	model := gpu.Model{Base: 2 * time.Millisecond, PerSample: 100 * time.Microsecond, PerFrame: 50 * time.Microsecond}
	var mu sync.Mutex
	real := map[int64][]stepTrace{} // every rank's, in the order they planned
	cfg := loader.Config{Loader: loader.Kind(k), Batch: batch, Steps: steps, Workers: 2, Seed: 7, Margin: 500,
		Decode: decode.Options{Frames: 2, Size: 32}, GPU: model, CheckEvery: 2,
		OnPlan: func(s int64, in *plan.Input, p *plan.Plan) {
			mu.Lock()
			defer mu.Unlock()
			real[s] = append(real[s], traceOf(in, p))
		}}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, errs := loader.RunInProcess(ctx, ranks, data, t.TempDir(), cfg); errs != nil {
		for r, err := range errs {
			if err != nil {
				t.Fatalf("rank %d: %v", r, err)
			}
		}
	}
	for s := int64(0); s < steps; s++ {
		if len(real[s]) != ranks {
			t.Fatalf("step %d: %d ranks planned, want %d", s, len(real[s]), ranks)
		}
		for r, tr := range real[s][1:] {
			if d := real[s][0].diff(tr); d != "" {
				t.Fatalf("step %d: two ranks planned differently: %s (rank order %d)", s, d, r+1)
			}
		}
	}

	simulated := map[int64]stepTrace{}
	_, err := Run(Config{Loader: k, Ranks: ranks, Batch: batch, Steps: steps, Workers: 2, GPU: model,
		Seed: cfg.Seed, Margin: cfg.Margin,
		Samples: func(s int64, r int) []Sample {
			own := real[s][0].samples[r*batch : (r+1)*batch]
			out := make([]Sample, len(own))
			for i, x := range own {
				out[i] = Sample{ID: x.ID, Bytes: x.Bytes, Cost: x.Cost, Est: x.Cost, Train: x.Train, Frames: 1}
			}
			return out
		},
		Progress: func(s int64, r int) plan.Progress { return real[s][0].progress[r] },
		OnPlan:   func(s, _ int64, in *plan.Input, p *plan.Plan) { simulated[s] = traceOf(in, p) },
	})
	if err != nil {
		t.Fatal(err)
	}
	moved := 0
	for s := int64(0); s < steps; s++ {
		if d := real[s][0].diff(simulated[s]); d != "" {
			t.Errorf("step %d: the runtime and the simulator planned differently: %s", s, d)
		}
		moved += len(simulated[s].moves)
	}
	if moved == 0 {
		t.Errorf("no step moved a sample: the scenario does not exercise the exchange")
	}
}
