package bench

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// RunReal runs the evaluation for real: for each workload, a dataset
// generated after its source mix (RealScale), its mean cost measured
// here, the GPU from the provisioning rule, and one mpirun job of
// datahelix run per loader (the oracle exists only in simulation). Its
// Results have the simulated ones' fields.
func RunReal(ctx context.Context, cfg EvalConfig) (*Evaluation, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	return runRealEval(ctx, cfg)
}

// RunConfig is a whole datahelix bench invocation.
type RunConfig struct {
	Eval EvalConfig
	Real bool // real runs instead of the simulator
	// Sections to run after the evaluation, by name (nil: all, empty:
	// none).
	Sections []string
	Scale    ScaleConfig
	OutDir   string
	// Timeline is the workload of the timeline figure (WritePlots); ""
	// picks one. Check refuses a workload that is not evaluated.
	Timeline string
	Machine  Machine
	Log      io.Writer // progress lines (nil: discarded)
}

// Check reports the first setting of c that cannot run, naming the
// datahelix bench flag that sets it, without running anything: the
// evaluation's (EvalConfig.Check), a real run's loaders (the oracle
// exists only in simulation), the timeline workload, the section names
// and the scale run's (ScaleConfig.Check). A bad flag then costs no
// simulation, mpirun job or calibration load.
func (c *RunConfig) Check() error {
	if err := c.Eval.Check(); err != nil {
		return err
	}
	if c.Real && c.Eval.Loaders != nil && len(realLoaders(c.Eval.Loaders)) == 0 {
		return fmt.Errorf("bench: --loaders oracle: --real needs another loader (the oracle exists only in simulation)")
	}
	if names := WorkloadNames(c.Eval.Workloads); c.Timeline != "" && !slices.Contains(names, c.Timeline) {
		return fmt.Errorf("bench: --timeline %s: not among the workloads run (%s)", c.Timeline, strings.Join(names, ", "))
	}
	for _, n := range c.Sections {
		if !slices.Contains(SectionNames(), n) {
			return fmt.Errorf("bench: --sections: unknown section %q (have %s)", n, strings.Join(SectionNames(), ", "))
		}
	}
	return c.Scale.Check()
}

// BuildReport runs the evaluation (simulated or real) and the sections
// and assembles the report.
func BuildReport(ctx context.Context, cfg RunConfig) (*Report, error) {
	t0 := time.Now()
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	if cfg.Eval.Calibration == nil {
		cfg.Eval.Calibration = DefaultCalibration()
	}
	run := RunSim
	if cfg.Real {
		run = RunReal
	}
	ev, err := run(ctx, cfg.Eval)
	if err != nil {
		return nil, err
	}
	if cfg.Eval.Network == (Network{}) {
		cfg.Eval.Network = DefaultNetwork
	}
	r := NewReport(cfg.Machine, cfg.Eval, ev, cfg.Eval.Calibration)
	if cfg.Sections == nil || len(cfg.Sections) > 0 {
		env := &SectionEnv{Mode: ev.Mode, Ranks: cfg.Eval.Ranks, Seed: cfg.Eval.Seed, Workloads: cfg.Eval.Workloads,
			Calibration: cfg.Eval.Calibration, Eval: ev, Scale: cfg.Scale, OutDir: cfg.OutDir, Log: cfg.Log}
		for _, s := range RunSections(ctx, env, cfg.Sections) {
			r.AddSection(s)
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	r.ElapsedS = time.Since(t0).Seconds()
	return r, nil
}
