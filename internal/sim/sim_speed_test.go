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

// TestOverheadsCharged checks that a planned loader's own work is no
// longer free: the allgather and the plan delay its steps and take CPU
// (WorkUS), deterministically, and torch, which plans nothing, is
// unchanged.
func TestOverheadsCharged(t *testing.T) {
	samples := func(s int64, r int) []Sample {
		out := make([]Sample, 4)
		for i := range out {
			c := int64(2000 + 3000*((s+int64(r))%3))
			out[i] = Sample{ID: uint64(s*100 + int64(r*4+i)), Bytes: 200000, Cost: c, Est: c}
		}
		return out
	}
	cfg := func(k step.Kind, ov *Overheads) Config {
		return Config{Loader: k, Ranks: 4, Batch: 4, Steps: 40, Workers: 2, LatencyUS: 10,
			GPU: gpu.Model{Base: 8 * time.Millisecond}, Samples: samples, Overheads: ov}
	}
	heavy := &Overheads{PlanNSPerSample: 100000, ExchangeUSPerMB: 1000} // 1.6 ms of plan a step
	free, err := Run(cfg(step.KindHelix, nil))
	if err != nil {
		t.Fatal(err)
	}
	a, err := Run(cfg(step.KindHelix, heavy))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Run(cfg(step.KindHelix, heavy))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a.Summary, b.Summary) {
		t.Error("two runs with the same overheads differ")
	}
	sum := func(xs []int64) (s int64) {
		for _, x := range xs {
			s += x
		}
		return s
	}
	// Every rank plans every step: 40 x 1.6 ms of CPU each, at least.
	if got, want := sum(a.WorkUS)-sum(free.WorkUS), int64(4*40*1600); got < want {
		t.Errorf("helix with overheads: %d µs more CPU than free, want at least %d", got, want)
	}
	if a.WallUS < free.WallUS {
		t.Errorf("helix with overheads: wall %d µs, below the free run's %d", a.WallUS, free.WallUS)
	}
	tf, err := Run(cfg(step.KindTorch, nil))
	if err != nil {
		t.Fatal(err)
	}
	ta, err := Run(cfg(step.KindTorch, heavy))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(tf.Summary, ta.Summary) {
		t.Error("torch plans nothing, yet the overheads changed its run")
	}
}

// TestLocalEngineSameAsGlobal checks that processing independent ranks
// one at a time (simEngine.local) gives exactly the records of the one
// time-ordered queue, for every loader, with slow ranks, overheads and a
// speed that changes over time.
func TestLocalEngineSameAsGlobal(t *testing.T) {
	samples := func(s int64, r int) []Sample {
		out := make([]Sample, 4)
		for i := range out {
			h := uint64(s)*7919 + uint64(r)*104729 + uint64(i)*1299709
			h ^= h >> 13
			h *= 0x9e3779b97f4a7c15
			c := int64(500 + h%20000)
			x := Sample{ID: uint64(s*100 + int64(r*4+i)), Bytes: int64(1000 + h%300000), Cost: c, Est: c + int64(h%3000) - 1500, Frames: 8}
			if h%3 == 0 {
				x.Parts, x.PartsEst = []int64{c / 2, c - c/2}, []int64{x.Est / 2, x.Est - x.Est/2}
			}
			out[i] = x
		}
		return out
	}
	for _, k := range []step.Kind{step.KindTorch, step.KindLocal, step.KindStatic, step.KindHelix, step.KindHelixNoGate, step.KindOracle} {
		cfg := Config{Loader: k, Ranks: 8, Batch: 4, Steps: 50, Workers: 3, LatencyUS: 10, Budget: 1 << 30,
			GPU: gpu.Model{Base: 9 * time.Millisecond, PerFrame: 100 * time.Microsecond}, Samples: samples,
			Overheads: &Overheads{PlanNSPerSample: 5000, ExchangeUSPerMB: 200},
			SpeedAt:   func(s int64, r int) int64 { return plan.One * (1 + int64(r%3)*(s/10%2)) }}
		local, err := Run(cfg)
		if err != nil {
			t.Fatal(err)
		}
		globalEngine = true
		global, err := Run(cfg)
		globalEngine = false
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(local.Records, global.Records) || !reflect.DeepEqual(local.Summary, global.Summary) || local.WallUS != global.WallUS {
			t.Errorf("%s: the local engine's run differs from the global one's: %+v, want %+v", k, local.Summary, global.Summary)
		}
	}
}
