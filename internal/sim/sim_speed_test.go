package sim

import (
	"reflect"
	"testing"
	"time"

	"github.com/datahelix/datahelix/gpu"
	"github.com/datahelix/datahelix/internal/step"
	"github.com/datahelix/datahelix/plan"
)

// TestSpeedAtSlowsSpells checks time-varying speed (noisy neighbours):
// a spell in which rank 1 decodes 4x slower costs torch GPU wait that a
// constant speed does not, the run is deterministic, and a SpeedAt that
// returns the constant Speed gives exactly the run with Speed.
func TestSpeedAtSlowsSpells(t *testing.T) {
	samples := func(s int64, r int) []Sample {
		out := make([]Sample, 4)
		for i := range out {
			out[i] = Sample{ID: uint64(s*100 + int64(r*4+i)), Bytes: 1000, Cost: 5000, Est: 5000}
		}
		return out
	}
	cfg := func(k step.Kind) Config {
		return Config{Loader: k, Ranks: 2, Batch: 4, Steps: 60, Workers: 2,
			GPU: gpu.Model{Base: 12 * time.Millisecond}, Samples: samples, Speed: []int64{plan.One, plan.One}}
	}
	spell := func(s int64, r int) int64 {
		if r == 1 && s >= 20 && s < 40 {
			return 4 * plan.One
		}
		return plan.One
	}
	for _, k := range []step.Kind{step.KindTorch, step.KindHelix} {
		base, err := Run(cfg(k))
		if err != nil {
			t.Fatal(err)
		}
		c := cfg(k)
		c.SpeedAt = func(s int64, r int) int64 { return plan.One }
		same, err := Run(c)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(base.Summary, same.Summary) {
			t.Errorf("%s: a constant SpeedAt changed the run: %+v, want %+v", k, same.Summary, base.Summary)
		}
		c.SpeedAt = spell
		a, err := Run(c)
		if err != nil {
			t.Fatal(err)
		}
		b, err := Run(c)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(a.Summary, b.Summary) {
			t.Errorf("%s: two runs with one SpeedAt differ", k)
		}
		if a.WallUS <= base.WallUS {
			t.Errorf("%s: a 4x slow spell on rank 1: wall %d µs, want more than the steady %d", k, a.WallUS, base.WallUS)
		}
		if k == step.KindTorch && a.Summary.GPUWaitS <= base.Summary.GPUWaitS {
			t.Errorf("torch: a 4x slow spell: GPU wait %v s, want more than the steady %v", a.Summary.GPUWaitS, base.Summary.GPUWaitS)
		}
	}
}
