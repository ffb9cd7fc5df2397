package spmd

import (
	"math"
	"testing"
)

// TestSteadyState checks the after-warm-up figures on a hand-made run:
// two ranks, steps first..first+3 requested every 100 ms, each step's
// batch of 4 samples, rank 1 waiting 50 ms on every step and missing.
func TestSteadyState(t *testing.T) {
	for _, first := range []int64{0, 10} { // a fresh run and a resumed one
		var recs []StepRecord
		for s := int64(0); s < 4; s++ {
			for r := 0; r < 2; r++ {
				rec := StepRecord{Step: first + s, Rank: r, RequestUS: 1000 + 100_000*s, Samples: 4}
				if r == 1 {
					rec.WaitUS, rec.Miss = 50_000, true
				}
				recs = append(recs, rec)
			}
		}
		// Warm-up 2: steps first+2 and first+3, from 201 ms to the end at 401 ms.
		got := SteadyState(recs, 2, 401_000)
		want := Steady{MissRate: 0.5, GPUWaitFrac: 100_000.0 / (2 * 200_000), ThroughputSPS: 16 / 0.2}
		if math.Abs(got.MissRate-want.MissRate) > 1e-12 || math.Abs(got.GPUWaitFrac-want.GPUWaitFrac) > 1e-12 ||
			math.Abs(got.ThroughputSPS-want.ThroughputSPS) > 1e-9 {
			t.Errorf("first step %d: SteadyState = %+v, want %+v", first, got, want)
		}
		if got := SteadyState(recs, 4, 401_000); got != (Steady{}) {
			t.Errorf("first step %d: warm-up as long as the run gives %+v, want zeros", first, got)
		}
		// Summarize takes the wall time from the first request.
		s := Summarize(KindHelix, recs, 2, 4, 4, 1, 2, 400_000)
		if s.WarmupSteps != 2 || math.Abs(s.SteadyGPUWaitFrac-want.GPUWaitFrac) > 1e-12 || math.Abs(s.SteadyThroughputSPS-want.ThroughputSPS) > 1e-9 {
			t.Errorf("first step %d: Summarize steady figures %d %v %v, want 2 %v %v", first,
				s.WarmupSteps, s.SteadyGPUWaitFrac, s.SteadyThroughputSPS, want.GPUWaitFrac, want.ThroughputSPS)
		}
	}
}
