package eval

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/datahelix/datahelix/internal/bench/workload"
	"github.com/datahelix/datahelix/internal/costmodel"
	"github.com/datahelix/datahelix/internal/planlimits"
	"github.com/datahelix/datahelix/internal/sim"
	"github.com/datahelix/datahelix/internal/step"
)

// ScaleConfig is the scale run: one workload, one loader, many ranks.
type ScaleConfig struct {
	Workload string    // "" means panda70m
	Loader   step.Kind // KindHelix, the zero Kind
	// MemoryLimit is as EvalConfig's.
	MemoryLimit float64
	Ranks       int // 0 means 8192
	Batch       int // 0 means 16
	Steps       int // 0 means 100
	Seed        uint64
}

// DefaultScale is the scale goal (issue 27 §5): 8192 ranks, B=16,
// 100 steps of helix on the Panda-70M-like workload (about 55 s and
// 2.5 GB on the 2-core development machine).
var DefaultScale = ScaleConfig{Workload: "panda70m", Loader: step.KindHelix, Ranks: 8192, Batch: 16, Steps: 100}

// ScaleResult is what the scale run measured. ElapsedS is the whole run
// (drawing the samples and simulating); PlanUS* are the planning thread's CPU
// time per step.
type ScaleResult struct {
	Workload      string  `json:"workload"`
	Loader        string  `json:"loader"`
	Ranks         int     `json:"ranks"`
	Batch         int     `json:"batch"`
	Steps         int     `json:"steps"`
	ElapsedS      float64 `json:"elapsed_s"`
	PrepareS      float64 `json:"prepare_s"`
	SimulateS     float64 `json:"simulate_s"`
	PlanUSP50     float64 `json:"plan_us_p50"`
	PlanUSP99     float64 `json:"plan_us_p99"`
	PlanUSMax     float64 `json:"plan_us_max"`
	PlanShare     float64 `json:"plan_share"` // planner time / simulate time
	MissRate      float64 `json:"miss_rate"`
	GPUWaitFrac   float64 `json:"gpu_wait_frac"`
	ThroughputSPS float64 `json:"throughput_sps"`
}

func (c ScaleConfig) withDefaults() ScaleConfig {
	if c.Workload == "" {
		c.Workload = DefaultScale.Workload
	}
	if c.Ranks == 0 {
		c.Ranks = DefaultScale.Ranks
	}
	if c.Batch == 0 {
		c.Batch = DefaultScale.Batch
	}
	if c.Steps == 0 {
		c.Steps = DefaultScale.Steps
	}
	return c
}

// Check refuses a scale run the simulator cannot do, naming the bench
// command's flags (--scale-ranks, --scale-batch, --scale-steps,
// --scale-workload), so that the command can check them before its other
// runs. It checks the fields as given: a zero is a flag's value to refuse
// there, and RunScale fills zero fields with DefaultScale's before it.
func (c ScaleConfig) Check() error {
	switch {
	case c.Ranks < 1 || c.Ranks > planlimits.Ranks:
		return fmt.Errorf("bench: --scale-ranks %d: want 1..%d", c.Ranks, planlimits.Ranks)
	case c.Batch < 1 || c.Batch > planlimits.Batch:
		return fmt.Errorf("bench: --scale-batch %d: want 1..%d", c.Batch, planlimits.Batch)
	case c.Steps < 1:
		return fmt.Errorf("bench: --scale-steps %d: want at least 1", c.Steps)
	}
	ws, err := workload.SelectWorkloads(c.Workload)
	if err != nil {
		return workload.Wrapf(err, "--scale-workload")
	}
	return checkSimMemory(ws[0], c.Ranks, c.Steps, c.Batch, c.MemoryLimit, "--scale-ranks", "--scale-steps", "--scale-batch")
}

// Title is the scale section's title for this run.
func (c ScaleConfig) Title() string {
	return fmt.Sprintf("Scale: simulated %d ranks", c.withDefaults().Ranks)
}

// RunScale simulates the scale run and times it.
func RunScale(ctx context.Context, cfg ScaleConfig, cal *costmodel.Calibration) (*ScaleResult, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	if cal == nil {
		cal = workload.DefaultCalibration()
	}
	ws, err := workload.SelectWorkloads(cfg.Workload)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	t0 := time.Now()
	p, err := prepare(ctx, ws[0], cal, cfg.Ranks, cfg.Batch, cfg.Steps, cfg.Seed, false, nil)
	if err != nil {
		return nil, err
	}
	t1 := time.Now()
	ec := EvalConfig{Workloads: ws, Ranks: cfg.Ranks, Steps: cfg.Steps, Seed: cfg.Seed, KeepPlanTimes: true}
	if err := ec.Defaults(); err != nil {
		return nil, err
	}
	res, err := sim.RunContext(ctx, p.simConfig(cfg.Loader, &ec))
	if err != nil {
		return nil, workload.Wrapf(err, "scale run")
	}
	t2 := time.Now()
	var plans []float64
	var total float64
	for _, r := range res.Records {
		if r.Rank == 0 && r.PlanUS > 0 {
			plans = append(plans, float64(r.PlanUS))
			total += float64(r.PlanUS)
		}
	}
	out := &ScaleResult{Workload: cfg.Workload, Loader: cfg.Loader.String(), Ranks: cfg.Ranks, Batch: p.setup.Batch, Steps: cfg.Steps,
		ElapsedS: t2.Sub(t0).Seconds(), PrepareS: t1.Sub(t0).Seconds(), SimulateS: t2.Sub(t1).Seconds(),
		MissRate: res.Summary.MissRate, GPUWaitFrac: res.Summary.GPUWaitFrac, ThroughputSPS: res.Summary.ThroughputSPS}
	if len(plans) > 0 {
		slices.Sort(plans)
		out.PlanUSP50 = quantile(plans, 0.50)
		out.PlanUSP99 = quantile(plans, 0.99)
		out.PlanUSMax = plans[len(plans)-1]
		out.PlanShare = total / 1e6 / out.SimulateS
	}
	return out, nil
}

// quantile returns the nearest-rank q-quantile of sorted xs.
func quantile(sorted []float64, q float64) float64 {
	i := int(q*float64(len(sorted))+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}
