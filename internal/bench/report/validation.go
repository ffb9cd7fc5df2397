package report

import (
	"fmt"

	"github.com/datahelix/datahelix/internal/bench/eval"
)

// The simulator is trusted where it agrees with real runs (issue 6): GPU
// wait fraction within 20 % relative and miss rate within 0.10 absolute.
const (
	ValidationWaitRel  = 0.20
	ValidationMissAbs  = 0.10
	validationWaitUnit = 0.01 // below this both waits count as equal
)

// ValidationSection compares simulated and real results of the same
// workloads and loaders, one row per pair present in both, and says
// whether each agrees. Wait fractions below 1 % of wall on both sides
// count as agreeing (a relative error of tiny waits means nothing).
// Section "validation" of the report is this table over the real runner's
// results and a simulation of the same setup.
func ValidationSection(sim, real []eval.Result) *Section {
	s := &Section{Name: "validation", Status: SectionMeasured,
		Columns: []string{"workload", "loader", "ranks", "sim_wait_frac", "real_wait_frac", "wait_rel_err", "sim_miss_rate", "real_miss_rate", "miss_abs_err", "agrees",
			"sim_steady_job_stall_frac", "real_steady_job_stall_frac", "sim_steady_step_miss_rate", "real_steady_step_miss_rate"},
		Note: fmt.Sprintf("agrees: wait fraction within %.0f %% relative (or both under %.0f %% of wall) and miss rate within %.2f absolute; "+
			"the job's steady figures (stall, steps missed; - without steps after the warm-up) are shown beside them, not judged",
			100*ValidationWaitRel, 100*validationWaitUnit, ValidationMissAbs)}
	agree, n := 0, 0
	for _, r := range real {
		var m *eval.Result
		for i := range sim {
			if sim[i].Workload == r.Workload && sim[i].Loader == r.Loader && sim[i].Ranks == r.Ranks {
				m = &sim[i]
				break
			}
		}
		if m == nil {
			continue
		}
		ok, rel, abs := Agrees(*m, r)
		n++
		if ok {
			agree++
		}
		steady := func(x *eval.Result, v float64) any {
			if !x.HasSteady() {
				return "-"
			}
			return v
		}
		s.Rows = append(s.Rows, []any{r.Workload, r.Loader, r.Ranks, m.GPUWaitFrac, r.GPUWaitFrac, rel, m.MissRate, r.MissRate, abs, ok,
			steady(m, m.SteadyJobStallFrac), steady(&r, r.SteadyJobStallFrac), steady(m, m.SteadyStepMissRate), steady(&r, r.SteadyStepMissRate)})
	}
	s.Headline = fmt.Sprintf("%d of %d simulated runs agree with the real ones", agree, n)
	s.Agreement = &Agreement{Agree: agree, Runs: n}
	if n == 0 {
		s.Status = SectionSkipped
		s.Headline = "no workload and loader ran both simulated and real"
		s.Agreement = nil
	}
	return s
}

// Agrees applies the validation rule to one pair and returns the errors.
func Agrees(sim, real eval.Result) (ok bool, waitRel, missAbs float64) {
	missAbs = sim.MissRate - real.MissRate
	if missAbs < 0 {
		missAbs = -missAbs
	}
	d := sim.GPUWaitFrac - real.GPUWaitFrac
	if d < 0 {
		d = -d
	}
	if real.GPUWaitFrac > 0 {
		waitRel = d / real.GPUWaitFrac
	} else if d > 0 {
		waitRel = 1
	}
	small := sim.GPUWaitFrac < validationWaitUnit && real.GPUWaitFrac < validationWaitUnit
	return (waitRel <= ValidationWaitRel || small) && missAbs <= ValidationMissAbs, waitRel, missAbs
}
