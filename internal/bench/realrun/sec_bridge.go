package realrun

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/datahelix/datahelix/decode"
	"github.com/datahelix/datahelix/gpu"
	"github.com/datahelix/datahelix/internal/bench/eval"
	"github.com/datahelix/datahelix/internal/bench/report"
	"github.com/datahelix/datahelix/internal/bench/workload"
	"github.com/datahelix/datahelix/internal/costmodel"
	"github.com/datahelix/datahelix/internal/shardindex"
	"github.com/datahelix/datahelix/internal/sim"
	"github.com/datahelix/datahelix/internal/step"
)

// BridgeSection trains examples/train.py for real, fed by datahelix train
// and by stock PyTorch (torch.distributed.run and the DataLoader of
// examples/torch_loader.py), at each rank count of the configuration
// (RealEnv.Bridge), simulates each run's configuration — the same
// dataset, ranks, batch, workers and seed, the GPU step the trainer
// measured, the cores the trainers used — and reports the steady figures
// of both with the simulator's error: relative on throughput, absolute on
// the input wait and the job's stall. A run that fails (the trainer, a
// missing python or module, a timeout) is a row saying why, and the
// others still run; where the repository's examples are not found the
// section is skipped.
func BridgeSection(ctx context.Context, env *report.SectionEnv) (*report.Section, error) {
	re, err := CurrentRealEnv()
	if err != nil {
		return nil, err
	}
	c := re.Bridge
	if c.Examples, err = c.examplesDir(re.Binary); err != nil {
		return &report.Section{Status: report.SectionSkipped, Note: err.Error()}, nil
	}
	data, err := c.bridgeData(ctx, re, env.Seed)
	if err != nil {
		return nil, err
	}
	ds, err := decode.OpenDataset(data, shardindex.Dir(re.CacheDir))
	if err != nil {
		return nil, workload.Wrapf(err, "bridge: dataset %s", data)
	}
	defer ds.Close()
	tmp, err := os.MkdirTemp("", "datahelix-bridge-")
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	defer os.RemoveAll(tmp)
	// Python and its modules are checked once per trainer: without them
	// every run of that trainer fails alike, and at once.
	missing := map[string]error{}
	for _, l := range bridgeLoaders {
		missing[l] = checkPython(ctx, c.Python, l)
	}
	var runs []*bridgeRun
	for _, n := range c.Ranks {
		for _, l := range bridgeLoaders {
			run := &bridgeRun{loader: l, ranks: n, err: missing[l]}
			if run.err == nil {
				run = c.runBridge(ctx, re, l, n, data, env.Seed, tmp)
			}
			if ctx.Err() != nil {
				return nil, context.Cause(ctx)
			}
			if run.err == nil {
				run.sim, run.others, run.err = c.simulateBridge(ds, env.Calibration, run, env.Seed, re.Cores)
			}
			logBridgeRun(re, run)
			runs = append(runs, run)
		}
	}
	s := bridgeTable(runs)
	s.Note = fmt.Sprintf("real: examples/train.py (DDP on gloo, %d torch thread per rank) on %s, B=%d, W=%d, F=%d, S=%d, %d steps, seed %d, "+
		"through %s; datahelix: mpirun -np N datahelix train (helix) -- python train.py --loader datahelix; torch: examples/torchrun.py "+
		"(torch.distributed.run) train.py --loader torch, the DataLoader's W workers per rank decoding with PyAV and Pillow; "+
		"the steady figures leave out the first %d steps (the planning horizon, train.py --warmup): throughput in samples/s, "+
		"wait: the mean rank's input wait over the wall time, job stall: the largest rank wait of each step, summed, over the wall time, "+
		"server_*: datahelix train's own summary, the wait from the trainer's request to the batch's delivery (the trainer's wait "+
		"also holds the hand-off to Python, which the simulator does not model) and the steps in which any rank's batch was late; "+
		"sim: sim.Run of the same dataset in the runtime's reader order (NewDatasetSamples; for torch a stream per DataLoader worker, "+
		"taking turns, where the ranks x W streams do not outnumber the shards), with the calibrated cost model's costs of datahelix's decoder, "+
		"the same ranks, B, W, horizon and seed, a GPU step of the trainer's steady_step_ms_p50 (the median over ranks of each rank's median "+
		"step after the warm-up: forward, backward with the gradient allreduce, optimizer, as the trainer's thread got the cores), the ranks' workers on this machine's %d cores (datahelix's ranks pinned as datahelix pins them, torch's not) beside "+
		"trainer_cores threads always ready to run (the trainers' CPU time over the wall time), exchange at %.0f MB/s and %d µs per message; "+
		"errors: throughput_rel_err = sim/real - 1, wait_abs_err and stall_abs_err = sim - real (fractions of the wall time); "+
		"run_s: the whole command, start-up included",
		bridgeThreads, data, c.Batch, c.Workers, c.Frames, c.Size, c.Steps, env.Seed, c.Python, c.Warmup(), re.Cores,
		validationNetwork.BandwidthMBs, validationNetwork.LatencyUS)
	return s, nil
}

// logBridgeRun writes one progress line for a finished run.
func logBridgeRun(re RealEnv, run *bridgeRun) {
	if run.err != nil {
		re.Logf("bridge: %s at %d ranks failed after %.1fs: %v", run.loader, run.ranks, run.wall.Seconds(), run.err)
		return
	}
	t := run.trainer.Steady
	re.Logf("bridge: %s at %d ranks: %.1fs, steady %.1f samples/s (sim %.1f), input wait %.1f %% (sim %.1f %%)", run.loader, run.ranks, run.wall.Seconds(),
		t.ThroughputSPS, run.sim.SteadyThroughputSPS, 100*t.WaitFrac, 100*run.sim.SteadyGPUWaitFrac)
}

// simKind is the simulator's loader for a trainer's: datahelix train's
// default, helix, or the DataLoader's semantics, torch.
func simKind(loader string) step.Kind {
	if loader == "datahelix" {
		return step.KindHelix
	}
	return step.KindTorch
}

// simulateBridge simulates a real run's configuration (BridgeSection
// says how) and returns its result and the cores the trainers took.
func (c BridgeConfig) simulateBridge(ds *decode.Dataset, cal *costmodel.Calibration, run *bridgeRun, seed uint64, cores int) (*eval.Result, float64, error) {
	t := run.trainer
	stepMS := t.stepMS()
	if !(stepMS > 0) {
		return nil, 0, fmt.Errorf("simulate: train.py measured no step time")
	}
	dc := workload.DatasetSimConfig{Ranks: run.ranks, Batch: c.Batch, Steps: t.Steps, Workers: c.Workers, Frames: c.Frames, Size: c.Size, Seed: seed}
	others := trainerCores(t)
	cpus := nodeShare(run.ranks, cores, others)
	if run.loader == "torch" {
		// The DataLoader's layout: each rank's batch whole from one of
		// its W workers' shards in turn, where the reader can give every
		// worker a shard of its own. Its ranks are not pinned.
		if n := run.ranks * c.Workers; n <= ds.NumShards() {
			dc.Streams, dc.StreamTurns = n, c.Workers
		}
		cpus = &sim.CPUShare{Group: make([]int, run.ranks), Cores: []int{max(cores, 1)}, Others: cpus.Others}
	}
	src, err := workload.NewDatasetSamples(ds, cal, dc)
	if err != nil {
		return nil, 0, fmt.Errorf("simulate: %w", err)
	}
	h := c.Warmup()
	cfg := sim.Config{Loader: simKind(run.loader), Ranks: run.ranks, Batch: c.Batch, Steps: t.Steps, Workers: c.Workers, Horizon: h,
		Budget: int64(h) * int64(c.Batch) * int64(c.Frames) * int64(c.Size) * int64(c.Size) * 3,
		GPU:    gpu.Model{Base: time.Duration(stepMS * float64(time.Millisecond))}, Bandwidth: validationNetwork.FixedBandwidth(),
		LatencyUS: validationNetwork.LatencyUS, Margin: eval.GateMarginUS, CPUs: cpus, Samples: src.Samples, Seed: seed}
	t0 := time.Now()
	res, err := sim.Run(cfg)
	if err != nil {
		return nil, 0, fmt.Errorf("simulate: %w", err)
	}
	r := eval.ResultOf(&workload.Workload{Name: filepath.Base(ds.String())}, res.Summary, time.Since(t0))
	return &r, others, nil
}

// trainerCores is how many cores the run's trainers kept busy: their CPU
// time over the wall time, or where train.py did not measure it, each
// rank's thread for the share of the wall time its steps took.
func trainerCores(t *TrainerSummary) float64 {
	if !(t.WallS > 0) {
		return 0
	}
	if t.CPUS != nil {
		return *t.CPUS / t.WallS
	}
	busy := min(float64(t.Steps)*t.stepMS()/1000/t.WallS, 1)
	return float64(t.Ranks*bridgeThreads) * busy
}

// bridgeError is the simulator's error on one run's steady figures:
// relative on throughput (sim/real - 1), absolute on the input wait and
// the job's stall, fractions of the wall time (sim - real). NaN where the
// real run has no such figure.
type bridgeError struct {
	throughput, wait, stall float64
}

// errorOf is the simulator's error on a run: sim against the trainer's
// steady figures.
func errorOf(real *TrainerSteady, sim *eval.Result) bridgeError {
	e := bridgeError{throughput: math.NaN(), wait: sim.SteadyGPUWaitFrac - real.WaitFrac, stall: math.NaN()}
	if real.ThroughputSPS > 0 {
		e.throughput = sim.SteadyThroughputSPS/real.ThroughputSPS - 1
	}
	if real.JobStallFrac != nil {
		e.stall = sim.SteadyJobStallFrac - *real.JobStallFrac
	}
	return e
}

// bridgeColumns are the bridge section's columns.
var bridgeColumns = []string{"ranks", "loader", "sim_loader", "status", "steps", "steady_step_ms_p50", "trainer_cores",
	"real_steady_throughput_sps", "sim_steady_throughput_sps", "throughput_rel_err",
	"real_steady_wait_frac", "sim_steady_wait_frac", "wait_abs_err",
	"real_steady_job_stall_frac", "sim_steady_job_stall_frac", "stall_abs_err",
	"server_steady_wait_frac", "server_steady_step_miss_rate", "sim_steady_step_miss_rate", "run_s", "reason"}

// cell is x, or "-" when it is not a number (JSON has no NaN).
func cell(x float64) any {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return "-"
	}
	return x
}

// bridgeTable builds the section from the runs: a row per run, failed
// ones with their reason, and the headline of the largest errors.
func bridgeTable(runs []*bridgeRun) *report.Section {
	s := &report.Section{Columns: bridgeColumns}
	failed := 0
	for _, run := range runs {
		row := []any{run.ranks, run.loader, simKind(run.loader).String()}
		if run.err != nil {
			failed++
			row = append(row, "failed")
			for len(row) < len(bridgeColumns)-2 {
				row = append(row, "-")
			}
			s.Rows = append(s.Rows, append(row, cell(run.wall.Seconds()), run.err.Error()))
			continue
		}
		t, m := run.trainer, run.sim
		e := errorOf(t.Steady, m)
		stall, swait, smiss := any("-"), any("-"), any("-")
		if t.Steady.JobStallFrac != nil {
			stall = *t.Steady.JobStallFrac
		}
		if run.server != nil && run.server.SteadySteps > 0 {
			swait, smiss = run.server.SteadyGPUWaitFrac, run.server.SteadyStepMissRate
		}
		s.Rows = append(s.Rows, append(row, "ok", t.Steps, t.stepMS(), run.others,
			t.Steady.ThroughputSPS, m.SteadyThroughputSPS, cell(e.throughput),
			t.Steady.WaitFrac, m.SteadyGPUWaitFrac, cell(e.wait),
			stall, m.SteadyJobStallFrac, cell(e.stall),
			swait, smiss, m.SteadyStepMissRate, run.wall.Seconds(), ""))
	}
	s.Headline = bridgeHeadline(runs)
	switch {
	case len(runs) > 0 && failed == len(runs):
		s.Status = report.SectionFailed
	case failed > 0:
		s.Headline += fmt.Sprintf("; %d of %d runs failed (reason in the table)", failed, len(runs))
	}
	return s
}

// bridgeHeadline gives, per trainer, the simulator's largest errors over
// the rank counts: throughput, input wait and job stall, each signed and
// with the ranks it was at.
func bridgeHeadline(runs []*bridgeRun) string {
	var parts []string
	for _, l := range bridgeLoaders {
		type worst struct {
			v     float64
			ranks int
		}
		var tp, wait, stall *worst
		keep := func(w **worst, v float64, ranks int) {
			if !math.IsNaN(v) && (*w == nil || math.Abs(v) > math.Abs((*w).v)) {
				*w = &worst{v, ranks}
			}
		}
		for _, run := range runs {
			if run.loader != l || run.err != nil {
				continue
			}
			e := errorOf(run.trainer.Steady, run.sim)
			keep(&tp, e.throughput, run.ranks)
			keep(&wait, e.wait, run.ranks)
			keep(&stall, e.stall, run.ranks)
		}
		if tp == nil && wait == nil {
			parts = append(parts, l+": no run")
			continue
		}
		p := []string{}
		if tp != nil {
			p = append(p, fmt.Sprintf("throughput %+.0f %% (%d ranks)", 100*tp.v, tp.ranks))
		}
		if wait != nil {
			p = append(p, fmt.Sprintf("input wait %+.3f (%d ranks)", wait.v, wait.ranks))
		}
		if stall != nil {
			p = append(p, fmt.Sprintf("job stall %+.3f (%d ranks)", stall.v, stall.ranks))
		}
		parts = append(parts, l+": "+strings.Join(p, ", "))
	}
	return "the simulator's largest errors against the real trainers — " + strings.Join(parts, "; ")
}
