package bench

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/datahelix/datahelix/internal/bench/eval"
	"github.com/datahelix/datahelix/internal/bench/realrun"
	"github.com/datahelix/datahelix/internal/bench/report"
	"github.com/datahelix/datahelix/internal/bench/workload"
	"github.com/datahelix/datahelix/internal/collectivetest"
	"github.com/datahelix/datahelix/internal/machine"
	"github.com/datahelix/datahelix/internal/planlimits"
)

// RunReal runs the evaluation for real: for each workload, a dataset
// generated after its source mix (RealScale), its mean cost measured
// here, the GPU from the provisioning rule, and one mpirun job of
// datahelix run per loader (the oracle exists only in simulation). Its
// Results have the simulated ones' fields.
func RunReal(ctx context.Context, cfg eval.EvalConfig) (*eval.Evaluation, error) {
	if err := cfg.Defaults(); err != nil {
		return nil, err
	}
	return realrun.Evaluate(ctx, cfg)
}

// RunConfig is a whole datahelix bench invocation.
type RunConfig struct {
	Eval eval.EvalConfig
	Real bool // real runs instead of the simulator
	// Seeds is how many seeds the simulated evaluation runs, Eval.Seed and
	// the next ones (0 or 1: one): the report gives their means and the
	// spread of its goals' figures (report.NewReportOver).
	Seeds int
	// Sections to run after the evaluation, by name (nil: all, empty:
	// none).
	Sections []string
	Scale    eval.ScaleConfig
	OutDir   string
	// Timeline is the workload of the timeline figure (WritePlots); ""
	// picks one. Check refuses a workload that is not evaluated.
	Timeline string
	Machine  machine.Machine
	Log      io.Writer // progress lines (nil: discarded)
}

// Check reports the first setting of c that cannot run, naming the
// datahelix bench flag that sets it, without running anything: the
// evaluation's (EvalConfig.Check), a real run's loaders (the oracle
// exists only in simulation), ranks (MaxRealRanks) and mpirun (on PATH),
// the timeline workload, the section names
// and the scale run's (ScaleConfig.Check). A bad flag then costs no
// simulation, mpirun job or calibration load.
func (c *RunConfig) Check() error {
	// A real run's cap on ranks says more than the simulator's memory
	// limit (EvalConfig.Check) would.
	if limit := MaxRealRanks(runtime.NumCPU()); c.Real && c.Eval.Ranks > limit && c.Eval.Ranks <= planlimits.Ranks {
		return fmt.Errorf("bench: --ranks %d: --real runs at most %d ranks here (4 per core of this machine's %d, at least 8): "+
			"every rank runs its decode workers on these cores, so more ranks measure the oversubscription, not the loaders; "+
			"simulate larger worlds without --real", c.Eval.Ranks, limit, runtime.NumCPU())
	}
	if err := c.Eval.Check(); err != nil {
		return err
	}
	switch {
	case c.Seeds < 0 || c.Seeds > MaxSeeds:
		return fmt.Errorf("bench: --seeds %d: want 1..%d", c.Seeds, MaxSeeds)
	case c.Seeds > 1 && c.Real:
		return fmt.Errorf("bench: --seeds %d: --real runs one seed (each real run takes minutes; simulate to average seeds)", c.Seeds)
	}
	if c.Real && c.Eval.Loaders != nil && len(realrun.Loaders(c.Eval.Loaders)) == 0 {
		return fmt.Errorf("bench: --loaders oracle: --real needs another loader (the oracle exists only in simulation)")
	}
	if c.Real {
		if err := mpirunMissing(); err != nil {
			return err
		}
	}
	if names := workload.WorkloadNames(c.Eval.Workloads); c.Timeline != "" && !slices.Contains(names, c.Timeline) {
		return fmt.Errorf("bench: --timeline %s: not among the workloads run (%s)", c.Timeline, strings.Join(names, ", "))
	}
	for _, n := range c.Sections {
		if !slices.Contains(SectionNames(), n) {
			return fmt.Errorf("bench: --sections: unknown section %q (have %s)", n, strings.Join(SectionNames(), ", "))
		}
	}
	return c.Scale.Check()
}

// MaxSeeds bounds --seeds: the evaluation runs once per seed.
const MaxSeeds = 100

// MaxRealRanks is the largest world --real runs on a machine of cores
// cores: 4 ranks per core, at least 8 (the published setting). The
// ranks of a real run share this one machine's cores, each with its
// decode workers; beyond a few per core the run measures the
// oversubscription, and the generated dataset (which grows with the
// ranks) takes minutes to write.
func MaxRealRanks(cores int) int { return max(8, 4*cores) }

// mpirunMissing returns an error when the mpirun the real runs start
// (collectivetest.MPIRun's) is not on PATH, nil when it is.
func mpirunMissing() error {
	cmd := collectivetest.MPIRun(context.Background(), 1, "true")
	if cmd.Err == nil {
		return nil
	}
	return fmt.Errorf("bench: --real: %s not found on PATH (install openmpi-bin, or mpich for a -tags mpich build; without --real, bench simulates)",
		cmd.Args[0])
}

// BuildReport runs the evaluation (simulated or real) and the sections
// and assembles the report.
func BuildReport(ctx context.Context, cfg RunConfig) (*report.Report, error) {
	t0 := time.Now()
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	if cfg.Eval.Calibration == nil {
		cfg.Eval.Calibration = workload.DefaultCalibration()
	}
	run := eval.RunSim
	if cfg.Real {
		run = RunReal
	}
	evs := make([]*eval.Evaluation, max(cfg.Seeds, 1))
	for i := range evs {
		ec := cfg.Eval
		ec.Seed += uint64(i)
		if len(evs) > 1 {
			fmt.Fprintf(cfg.Log, "bench: seed %d (%d of %d)\n", ec.Seed, i+1, len(evs))
		}
		var err error
		if evs[i], err = run(ctx, ec); err != nil {
			return nil, err
		}
	}
	if cfg.Eval.Network == (eval.Network{}) {
		cfg.Eval.Network = eval.DefaultNetwork
	}
	r, err := report.NewReportOver(cfg.Machine, cfg.Eval, evs, cfg.Eval.Calibration)
	if err != nil {
		return nil, err
	}
	ev := evs[0]
	if cfg.Sections == nil || len(cfg.Sections) > 0 {
		env := &report.SectionEnv{Mode: ev.Mode, Ranks: cfg.Eval.Ranks, Seed: cfg.Eval.Seed, Workloads: cfg.Eval.Workloads,
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
