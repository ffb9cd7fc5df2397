package bench

import (
	"context"
	"fmt"

	"github.com/datahelix/datahelix/internal/bench/report"
)

// PlannerRanks are the world sizes of the planner microbenchmark.
var PlannerRanks = []int{8, 16, 32, 64, 128, 256, 512, 1024}

// plannerBatch is its per-rank batch, the scale goal's B.
const plannerBatch = 16

// plannerSection times the planner on VideoPlanInput inputs (RunPlanBench,
// the code of datahelix bench plan) from 8 to 1024 ranks. The headline is
// how plan time grows against the samples planned.
func plannerSection(ctx context.Context, env *report.SectionEnv) (*report.Section, error) {
	s := &report.Section{Columns: []string{"ranks", "samples", "plan_us_p50", "plan_us_p99", "ns_per_sample", "time_vs_8_ranks", "samples_vs_8_ranks", "makespan_over_lower_bound", "bytes_moved_frac"},
		Note: "CPU time of the planning thread (ModeHelix, reused Planner), heavy-tailed video inputs drawn by VideoPlanInput, as `datahelix bench plan`"}
	var base float64
	var last PlanBenchResult
	for _, n := range PlannerRanks {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		plans := 40
		if n >= 256 {
			plans = 15
		}
		res, err := RunPlanBench(PlanBenchConfig{Ranks: n, Batch: plannerBatch, Plans: plans, Seed: env.Seed})
		if err != nil {
			return nil, err
		}
		if base == 0 {
			base = res.PlanUSP50
		}
		s.Rows = append(s.Rows, []any{n, res.Samples, res.PlanUSP50, res.PlanUSP99, 1000 * res.PlanUSP50 / float64(res.Samples),
			res.PlanUSP50 / base, float64(n) / float64(PlannerRanks[0]), res.MakespanOverLowerBoundP50, res.BytesMovedFracP50})
		last = res
	}
	s.Headline = fmt.Sprintf("%d ranks x %d (%d samples): %.0f µs p50, %.1fx the %d-rank time for %dx the samples",
		last.Ranks, plannerBatch, last.Samples, last.PlanUSP50, last.PlanUSP50/base, PlannerRanks[0], last.Ranks/PlannerRanks[0])
	return s, nil
}
