package metrics

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/datahelix/datahelix/internal/step"
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
		if got := SteadyState(recs, 4, 401_000); got != (Steady{WarmupStallUS: 4 * 50_000}) {
			t.Errorf("first step %d: warm-up as long as the run gives %+v, want zeros but the warm-up stall", first, got)
		}
		// Summarize takes the wall time from the first request.
		s := Summarize(step.KindHelix, recs, 2, 4, 4, 1, 2, 400_000)
		if s.WarmupSteps != 2 || math.Abs(s.SteadyGPUWaitFrac-want.GPUWaitFrac) > 1e-12 || math.Abs(s.SteadyThroughputSPS-want.ThroughputSPS) > 1e-9 {
			t.Errorf("first step %d: Summarize steady figures %d %v %v, want 2 %v %v", first,
				s.WarmupSteps, s.SteadyGPUWaitFrac, s.SteadyThroughputSPS, want.GPUWaitFrac, want.ThroughputSPS)
		}
	}
}

// TestJobFigures checks the job-level figures on a hand-made run of two
// ranks and four 100 ms steps of a 80 ms GPU step, warm-up 1: a step is
// missed when any rank is, lasts as long as its slowest rank, and the
// efficiency is the GPU's share of the steady wall time.
func TestJobFigures(t *testing.T) {
	waits := [4][2]int64{{300_000, 250_000}, {0, 20_000}, {5_000, 0}, {0, 0}}
	var recs []StepRecord
	for s := range int64(4) {
		for r := range 2 {
			w := waits[s][r]
			recs = append(recs, StepRecord{Step: s, Rank: r, RequestUS: 500_000 + 100_000*s, DeliverUS: 500_000 + 100_000*s + w,
				WaitUS: w, Miss: w > 1000, Samples: 4, GPUUS: 80_000})
		}
	}
	got := SteadyState(recs, 1, 900_000) // steps 1..3, from 600 ms to 900 ms
	if got.Steps != 3 || got.FirstBatchUS != 800_000 || got.WarmupStallUS != 300_000 {
		t.Errorf("steps %d, first batch %d µs, warm-up stall %d µs; want 3, 800000, 300000", got.Steps, got.FirstBatchUS, got.WarmupStallUS)
	}
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"rank miss rate", got.MissRate, 2.0 / 6},
		{"step miss rate", got.StepMissRate, 2.0 / 3},
		{"job stall fraction", got.JobStallFrac, 25_000.0 / 300_000},
		{"efficiency", got.Efficiency, 3 * 80_000.0 / 300_000},
	} {
		if math.Abs(c.got-c.want) > 1e-12 {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	s := Summarize(step.KindHelix, recs, 2, 4, 4, 1, 1, 400_000)
	if s.TimeToFirstBatchS != 0.8 || s.WarmupStallS != 0.3 || math.Abs(s.SteadyStepMissRate-2.0/3) > 1e-12 {
		t.Errorf("Summarize: first batch %v s, warm-up stall %v s, step miss rate %v; want 0.8, 0.3, 0.667",
			s.TimeToFirstBatchS, s.WarmupStallS, s.SteadyStepMissRate)
	}
}

// TestSummaryJSONSteadyNullWithinWarmup checks that the steady_ figures
// are null in JSON when the run is not longer than its warm-up (a 0 would
// read as "no misses, no wait"), and numbers when it is longer.
func TestSummaryJSONSteadyNullWithinWarmup(t *testing.T) {
	var recs []StepRecord
	for s := int64(0); s < 4; s++ {
		for r := 0; r < 2; r++ {
			recs = append(recs, StepRecord{Step: s, Rank: r, RequestUS: 100_000 * s, WaitUS: 10_000 * int64(r), Miss: r == 1, Samples: 4})
		}
	}
	for _, c := range []struct {
		warmup, steadySteps int
		null                bool
	}{{2, 2, false}, {3, 1, false}, {4, 0, true}, {8, 0, true}} {
		s := Summarize(step.KindTorch, recs, 2, 4, 4, 1, c.warmup, 400_000)
		if s.SteadySteps != c.steadySteps {
			t.Errorf("warm-up %d: SteadySteps = %d, want %d", c.warmup, s.SteadySteps, c.steadySteps)
		}
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		for _, key := range []string{"steady_miss_rate", "steady_gpu_wait_frac", "steady_throughput_sps", "steady_step_miss_rate", "steady_job_stall_frac"} {
			v, ok := m[key]
			if !ok {
				t.Errorf("warm-up %d: %s missing from %s", c.warmup, key, b)
				continue
			}
			if (v == nil) != c.null {
				t.Errorf("warm-up %d: %s = %v, want null %v", c.warmup, key, v, c.null)
			}
		}
		if !c.null && m["steady_miss_rate"] != 0.5 {
			t.Errorf("warm-up %d: steady_miss_rate = %v, want 0.5", c.warmup, m["steady_miss_rate"])
		}
		// The other fields are written as before.
		if m["loader"] != "torch" || m["misses"] != 4.0 || m["gpu_wait_s"] != 0.04 || m["warmup_steps"] != float64(c.warmup) {
			t.Errorf("warm-up %d: JSON %s lost fields", c.warmup, b)
		}
	}
}

// TestGPUWaitPerRankAgreesWithTheFraction checks the per-rank wait that
// the results table prints next to the wall time: per-rank seconds over
// wall seconds must be the printed fraction.
func TestGPUWaitPerRankAgreesWithTheFraction(t *testing.T) {
	recs := []StepRecord{
		{Step: 0, Rank: 0, WaitUS: 1_000_000}, {Step: 0, Rank: 1, WaitUS: 3_000_000},
		{Step: 0, Rank: 2, WaitUS: 0}, {Step: 0, Rank: 3, WaitUS: 4_000_000},
	}
	s := Summarize(step.KindHelix, recs, 4, 1, 1, 1, 0, 10_000_000)
	if s.GPUWaitS != 8 || s.GPUWaitPerRankS() != 2 || math.Abs(s.GPUWaitPerRankS()/s.WallS-s.GPUWaitFrac) > 1e-12 {
		t.Errorf("wait %v rank-s, %v s per rank, fraction %v of %v s wall; want 8, 2, 0.2 of 10",
			s.GPUWaitS, s.GPUWaitPerRankS(), s.GPUWaitFrac, s.WallS)
	}
}
