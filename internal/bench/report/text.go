package report

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/datahelix/datahelix/internal/bench/eval"
	"github.com/datahelix/datahelix/internal/bench/workload"
	"github.com/datahelix/datahelix/internal/step"
)

// WriteText prints the report for a terminal: setup, the workload x
// loader table, helix against the others, the summary, the goals with
// PASS or FALL SHORT, and every section (failed ones with their error).
func (r *Report) WriteText(w io.Writer) error {
	ew := &errWriter{w: w}
	ew.printf("datahelix bench (%s): %s, %s, %d steps, seed %d\n", r.Mode, plural(len(r.Workloads), "workload"), plural(r.Ranks, "rank"), r.Steps, r.Seed)
	ew.printf("machine: %s\n", r.Machine)
	c := r.Calibration
	if c.Source == "default" {
		ew.printf("costs: %s\n", c.Note)
	} else {
		ew.printf("costs: calibration %s (%s, %s), held-out estimate error %.1f %%\n", c.Source, c.Machine, c.Created, 100*c.MAPE)
		if c.Note != "" {
			ew.printf("       %s\n", c.Note)
		}
		if len(c.SplitRatio) > 0 {
			var parts []string
			for _, p := range workload.CalibratePresets {
				if v, ok := c.SplitRatio[p]; ok {
					parts = append(parts, fmt.Sprintf("%s %.2fx", p, v))
				}
			}
			ew.printf("       clips decoded task by task cost, over whole: %s\n", strings.Join(parts, ", "))
		}
	}
	if r.Mode != "real" { // the simulator's settings: real runs move real bytes and decode real samples
		ew.printf("network: %.0f MB/s per rank, %d µs per message; gate margin %d µs\n", r.Network.BandwidthMBs, r.Network.LatencyUS, eval.GateMarginUS)
		if r.NoiseOnTruth {
			ew.printf("SENSITIVITY: the cost model's error is on the true costs, the planner sees the prediction (--noise-on-truth)\n")
		} else {
			ew.printf("true cost = the calibrated model's prediction; the planner's estimate carries the measured error\n")
		}
	}
	if r.NoSplit {
		ew.printf("ABLATION: no loader splits clips into keyframe-aligned tasks (--no-split); the runtime does\n")
	}
	ew.printf("\n")

	ratio := workload.ProvisionRatio
	if len(r.Workloads) > 0 {
		ratio = r.Workloads[0].Ratio
	}
	ew.printf("Workloads (W fixed; g = %.1f x B x mean cost / (W x mean over ranks of 1/slowdown), or a stated model's step; GPU step = g on the mean batch):\n", ratio)
	tw := ew.table()
	fmt.Fprintln(tw, "workload\tskew\timbalance\tB\tW\tH\tmean cost ms\tGPU step ms\tlockstep\tslow ranks\tsplit work\t")
	for _, s := range r.Workloads {
		fmt.Fprintf(tw, "%s\t%s\t%.1f%%\t%d\t%d\t%d\t%.2f\t%.2f\t%.3fx\t%d\t%.3fx\t\n", s.Workload, s.Skew, 100*s.Imbalance, s.Batch, s.Workers, s.Horizon,
			s.MeanCostUS/1000, s.GPUStepMS, s.LockstepFactor, s.SlowRanks, s.SplitWorkRatio)
	}
	ew.flush(tw)
	ew.printf("(imbalance: busiest rank's work over the mean rank's, per window of H steps, minus 1 — what balancing across ranks can gain;\n lockstep: the mean slowest rank's GPU step over the mean batch's when every rank trains its own samples, as torch and local do: how much more slowly their GPUs train;\n split work: CPU work when clips are split into keyframe-aligned tasks over unsplit, paid by every loader but torch)\n")

	ew.printf("\nResults, steady state (after the first H steps, the warm-up), the job's figures first:\n")
	tw = ew.table()
	fmt.Fprintln(tw, "workload\tloader\tstep miss %\tjob stall %\tefficiency %\tsamples/s\tGPU step ms\t|\tmiss %\tGPU wait %\t|\tMB moved/step\t")
	prev := ""
	for _, x := range r.Results {
		name := x.Workload
		if name == prev {
			name = ""
		}
		prev = x.Workload
		cells := []string{"n/a", "n/a", "n/a", "n/a", "n/a", "n/a"} // the run was not longer than the warm-up
		if x.HasSteady() {
			cells = []string{fmt.Sprintf("%.2f", 100*x.SteadyStepMissRate), fmt.Sprintf("%.2f", 100*x.SteadyJobStallFrac), "n/a",
				fmt.Sprintf("%.1f", x.SteadyThroughputSPS), fmt.Sprintf("%.2f", 100*x.SteadyMissRate), fmt.Sprintf("%.2f", 100*x.SteadyGPUWaitFrac)}
			if x.SteadyEfficiency > 0 {
				cells[2] = fmt.Sprintf("%.1f", 100*x.SteadyEfficiency)
			}
		}
		step := "n/a"
		if g := x.MeanGPUStepS(); g > 0 {
			step = fmt.Sprintf("%.1f", 1000*g)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t|\t%s\t%s\t|\t%.2f\t\n", name, x.Loader, cells[0], cells[1], cells[2], cells[3], step, cells[4], cells[5],
			x.BytesMovedPerStep/1e6)
	}
	ew.flush(tw)
	ew.printf("(step miss: a step in which any rank's batch was ready more than its tolerance (max(1 ms, 2 %% of the GPU step)) after the GPU asked;\n" +
		" job stall: the sum over steps of the largest rank wait, over wall time (a step lasts as long as its slowest rank);\n" +
		" efficiency: throughput over the GPUs' ceiling, ranks x B / mean GPU step (GPU step ms: the mean over the loader's own batches;\n" +
		"  loaders that train other batches, as torch-ddp does, may train a lighter or heavier mix: compare them by efficiency);\n" +
		" per rank, beside them: miss over rank-steps, and GPU wait, the input wait summed over ranks over ranks x wall time, which\n" +
		" leaves out the time a GPU idles in the gradient allreduce waiting for a slower rank)\n")

	ew.printf("\nWarm-up (the first H steps) and whole run:\n")
	tw = ew.table()
	fmt.Fprintln(tw, "workload\tloader\tH\tfirst batch s\twarm-up stall s\t|\twhole run: miss %\tGPU wait %\tsamples/s\t")
	prev = ""
	for _, x := range r.Results {
		name := x.Workload
		if name == prev {
			name = ""
		}
		prev = x.Workload
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.3f\t%.3f\t|\t%.2f\t%.2f\t%.1f\t\n", name, x.Loader, x.Steps-x.SteadySteps, x.TimeToFirstBatchS, x.WarmupStallS,
			100*x.MissRate, 100*x.GPUWaitFrac, x.ThroughputSPS)
	}
	ew.flush(tw)

	ew.printf("\nHelix versus the others, steady state (change of helix's figure relative to the other loader's: -80%% = 80%% fewer;\n"+
		" a reduction only where the other had at least %.0f %% to reduce, '-' elsewhere; throughput ratios):\n", 100*ReduceFloor)
	tw = ew.table()
	fmt.Fprintln(tw, "workload\tskew\tstep miss vs torch\tstall vs torch\ttput vs torch\ttput vs torch-ddp\teff vs torch-ddp\ttput vs torch-pack\t"+
		"tput vs local\ttput vs static\tvs oracle\tbest other (eff)\t")
	for _, x := range r.Comparisons {
		best := "-"
		if x.BestOther != "" {
			best = x.BestOther + " " + fmtX(x.HelixVsBest)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", x.Workload, x.Skew, fmtPct(x.VsTorch.StepMissReduction), fmtPct(x.VsTorch.StallReduction),
			fmtX(x.VsTorch.ThroughputRatio), fmtX(x.VsTorchDDP.ThroughputRatio), fmtX(x.VsTorchDDP.EfficiencyRatio), fmtX(x.VsTorchPack.ThroughputRatio), fmtX(x.VsLocal.ThroughputRatio),
			fmtX(x.VsStatic.ThroughputRatio), fmtX(x.HelixVsOracle), best)
	}
	ew.flush(tw)

	ew.printf("\nAttribution of helix's gain over torch (ratios of steady throughput; the first three multiply to helix/torch):\n")
	tw = ew.table()
	fmt.Fprintln(tw, "workload\tskew\tscheduling\tdecode balancing\tGPU-work balancing\t= helix/torch\t|\ttorch-pack/torch\thelix/torch-pack\ttorch-ddp/torch\t")
	for _, x := range r.Comparisons {
		a := x.Attribution
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t|\t%s\t%s\t%s\t\n", x.Workload, x.Skew, fmtX(a.Scheduling), fmtX(a.DecodeBalancing), fmtX(a.GPUBalancing),
			fmtX(x.VsTorch.ThroughputRatio), fmtX(a.PackVsTorch), fmtX(a.HelixVsPack), fmtX(a.DDPVsTorch))
	}
	ew.flush(tw)
	ew.printf("(scheduling: local/torch, within-rank scheduling; decode balancing: helix-notrain/local, across ranks;\n" +
		" GPU-work balancing: helix/helix-notrain; torch-pack: torch with the global batch packed across ranks by GPU work, as a user can without datahelix)\n")

	s := r.Summary
	ew.printf("\nSummary (steady state; the goals' figures over the skewed workloads: %s):\n", cmp.Or(strings.Join(s.SkewedWorkloads, ", "), "none"))
	run := loadersRun(r.Results)
	torchRun := slices.Contains(run, step.KindTorch.String())
	// A summary key the JSON has as null prints null and why.
	key := func(v *float64, text, why string) string {
		if v != nil {
			return text
		}
		return "null: " + why
	}
	// vsTorch is why a figure against torch is null.
	vsTorch := func(why string) string {
		if !torchRun {
			return "torch was not run"
		}
		return why
	}
	floor := fmt.Sprintf("no skewed workload where torch had %.0f %% to reduce", 100*ReduceFloor)
	// ci is " ± h" for a figure with a confidence half-width over the
	// seeds: points for a percentage (pct), else a ratio's.
	ci := func(name string, points bool) string {
		h, ok := s.CI95[name]
		switch {
		case !ok:
			return ""
		case points:
			return fmt.Sprintf(" ± %.1f points", 100*h)
		}
		return fmt.Sprintf(" ± %.3fx", h)
	}
	ew.printf("  steady_step_miss_reduction_vs_torch_mean %s\n", key(s.SteadyStepMissReductionVsTorchMean,
		meanOverText(s.SteadyStepMissReductionVsTorchMean, s.StepMissReductionWorkloads)+ci("steady_step_miss_reduction_vs_torch_mean", true), vsTorch(floor)))
	ew.printf("  steady_stall_reduction_vs_torch_mean     %s\n", key(s.SteadyStallReductionVsTorchMean,
		meanOverText(s.SteadyStallReductionVsTorchMean, s.StallReductionWorkloads)+ci("steady_stall_reduction_vs_torch_mean", true), vsTorch(floor)))
	ew.printf("  throughput_ratio_vs_torch_max            %s\n", key(s.ThroughputRatioVsTorchMax,
		fmtX(s.ThroughputRatioVsTorchMax)+ci("throughput_ratio_vs_torch_max", false)+" ("+s.ThroughputRatioVsTorchMaxWorkload+")", vsTorch("no skewed workload")))
	ew.printf("  throughput_ratio_vs_oracle_min           %s\n", key(s.ThroughputRatioVsOracleMin,
		fmtX(s.ThroughputRatioVsOracleMin)+ci("throughput_ratio_vs_oracle_min", false)+" ("+s.ThroughputRatioVsOracleMinWorkload+")", "the oracle was not run"))
	ew.printf("  uniform_regression_max                   %s\n", key(s.UniformRegressionMax,
		pct(s.UniformRegressionMax)+ci("uniform_regression_max", true)+" ("+s.UniformRegressionMaxWorkload+"), by GPU efficiency", "no uniform workload with another loader run"))
	ew.printf("  uniform_regression_max_samples           %s\n", key(s.UniformRegressionMaxSPS,
		pct(s.UniformRegressionMaxSPS)+ci("uniform_regression_max_samples", true)+" ("+s.UniformRegressionMaxSPSWorkload+"), by samples/s", "no uniform workload with another loader run"))
	if s.Seeds > 1 {
		ew.printf("  seeds %d (the results are their means; ± the 95 %% confidence half-width over the seeds), steps %d\n", s.Seeds, s.Steps)
	} else {
		ew.printf("  seeds %d, steps %d\n", s.Seeds, s.Steps)
	}
	if torchRun {
		ew.printf("  per rank, beside them, helix vs torch: %s, %s\n",
			reductionText(s.SteadyMissReductionVsTorchMean, "fewer misses", "misses"), reductionText(s.SteadyWaitReductionVsTorchMean, "less wait", "wait"))
	}
	if s.OracleThroughputRatioVsTorchMax != nil {
		ew.printf("  the oracle (perfect knowledge, free transfers) in helix's place: %s, %s, %s throughput at most\n",
			reductionText(s.OracleStepMissReductionVsTorchMean, "fewer step misses", "step misses"),
			reductionText(s.OracleStallReductionVsTorchMean, "less stall", "stall"), fmtX(s.OracleThroughputRatioVsTorchMax))
	}
	if s.SchedulingMean != nil || s.DecodeBalancingMean != nil || s.GPUBalancingMean != nil {
		ew.printf("  attribution, geometric means over the skewed workloads: scheduling %s, decode balancing %s, GPU-work balancing %s; torch-pack's best %s torch\n",
			fmtX(s.SchedulingMean), fmtX(s.DecodeBalancingMean), fmtX(s.GPUBalancingMean), fmtX(s.PackVsTorchMax))
	}

	ew.printf("\nGoals:\n")
	for _, g := range r.Goals {
		ew.printf("  %-10s %s: %s (goal %s)\n", g.Status, g.Name, g.Figure, g.Target)
		if g.Note != "" {
			ew.printf("  %-10s   note: %s\n", "", g.Note)
		}
	}
	for _, sec := range r.Sections {
		ew.printf("\n== %s [%s] ==\n", sec.Title, sec.Status)
		if sec.Headline != "" {
			ew.printf("%s\n", sec.Headline)
		}
		if sec.Note != "" {
			ew.printf("(%s)\n", sec.Note)
		}
		if len(sec.Rows) == 0 {
			continue
		}
		tw = ew.table()
		fmt.Fprintln(tw, strings.Join(sec.Columns, "\t")+"\t")
		for _, row := range sec.Rows {
			cells := make([]string, len(row))
			for i, v := range row {
				cells[i] = formatCell(v)
			}
			fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
		}
		ew.flush(tw)
	}
	return ew.err
}

// loadersRun lists the loaders of results, in order of first result.
func loadersRun(results []eval.Result) []string {
	var out []string
	for _, r := range results {
		if !slices.Contains(out, r.Loader) {
			out = append(out, r.Loader)
		}
	}
	return out
}

// formatCell prints a section cell: floats with 4 significant digits.
func formatCell(v any) string {
	switch x := v.(type) {
	case float64:
		return fmt.Sprintf("%.4g", x)
	case float32:
		return fmt.Sprintf("%.4g", x)
	}
	return fmt.Sprint(v)
}

func fmtPct(v *float64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%+.1f%%", -100**v)
}

func fmtX(v *float64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%.3fx", *v)
}

// errWriter keeps the first write error.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) printf(format string, args ...any) {
	if e.err == nil {
		_, e.err = fmt.Fprintf(e.w, format, args...)
	}
}

func (e *errWriter) table() *tabwriter.Writer {
	return tabwriter.NewWriter(e, 0, 0, 2, ' ', tabwriter.AlignRight)
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}

func (e *errWriter) flush(tw *tabwriter.Writer) {
	if err := tw.Flush(); err != nil && e.err == nil {
		e.err = err
	}
}

// meanOverText is a summary key's mean, not nil, and the workloads it is
// over: "25.4 % (over 10 workloads)".
func meanOverText(v *float64, n int) string {
	return fmt.Sprintf("%s (over %s)", pct(v), plural(n, "workload"))
}

// reductionText is a mean reduction, "87.5 % less wait", or "no workload
// with wait to reduce" when it is over none (torch had nothing to reduce
// on any).
func reductionText(v *float64, less, what string) string {
	if v == nil {
		return "no workload with " + what + " to reduce"
	}
	return pct(v) + " " + less
}
