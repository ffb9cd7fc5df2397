package bench

import (
	"context"
	"fmt"

	"github.com/datahelix/datahelix/internal/bench/eval"
	"github.com/datahelix/datahelix/internal/bench/report"
)

// scaleConfig is the scale run of a report: env.Scale, else DefaultScale.
func scaleConfig(env *report.SectionEnv) eval.ScaleConfig {
	cfg := env.Scale
	if cfg == (eval.ScaleConfig{}) {
		cfg = eval.DefaultScale
	}
	cfg.Seed = env.Seed
	return cfg
}

// scaleTitle is the scale section's title: the world size it simulates.
func scaleTitle(env *report.SectionEnv) string { return scaleConfig(env).Title() }

// scaleSection runs the scale run as a report section.
func scaleSection(ctx context.Context, env *report.SectionEnv) (*report.Section, error) {
	cfg := scaleConfig(env)
	r, err := eval.RunScale(ctx, cfg, env.Calibration)
	if err != nil {
		return nil, err
	}
	s := &report.Section{Scale: r,
		Columns: []string{"workload", "loader", "ranks", "batch", "steps", "elapsed_s", "prepare_s", "simulate_s", "plan_us_p50", "plan_us_p99", "plan_us_max", "plan_share", "miss_rate", "gpu_wait_frac"},
		Rows: [][]any{{r.Workload, r.Loader, r.Ranks, r.Batch, r.Steps, r.ElapsedS, r.PrepareS, r.SimulateS, r.PlanUSP50, r.PlanUSP99,
			r.PlanUSMax, r.PlanShare, r.MissRate, r.GPUWaitFrac}},
		Headline: fmt.Sprintf("%d ranks x %d x %d steps in %.1f s (goal < %d s); planner %.0f µs p50 per step, %.0f %% of the simulation",
			r.Ranks, r.Batch, r.Steps, r.ElapsedS, report.GoalScaleSeconds, r.PlanUSP50, 100*r.PlanShare),
		Note: "wall time on this machine, shared with other work; plan time is the planning thread's CPU time per step, as bench plan measures"}
	return s, nil
}
