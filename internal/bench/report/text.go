package report

import (
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

	ew.printf("\nResults:\n")
	tw = ew.table()
	fmt.Fprintln(tw, "workload\tloader\tmiss %\tGPU wait %\tsamples/s\tMB moved/step\tsteady miss %\tsteady wait %\t")
	prev := ""
	for _, x := range r.Results {
		name := x.Workload
		if name == prev {
			name = ""
		}
		prev = x.Workload
		steadyMiss, steadyWait := "n/a", "n/a" // the run was not longer than the warm-up
		if x.HasSteady() {
			steadyMiss, steadyWait = fmt.Sprintf("%.2f", 100*x.SteadyMissRate), fmt.Sprintf("%.2f", 100*x.SteadyGPUWaitFrac)
		}
		fmt.Fprintf(tw, "%s\t%s\t%.2f\t%.2f\t%.1f\t%.2f\t%s\t%s\t\n", name, x.Loader, 100*x.MissRate, 100*x.GPUWaitFrac, x.ThroughputSPS,
			x.BytesMovedPerStep/1e6, steadyMiss, steadyWait)
	}
	ew.flush(tw)
	ew.printf("(miss: a rank-step whose batch was not ready when the GPU asked for it; GPU wait: the GPU's input wait, time it sat idle\n" +
		" for want of its batch, summed over ranks, over ranks x wall time; it leaves out the time a GPU idles in the gradient allreduce\n" +
		" waiting for a slower rank, so a loader can wait more than another and still train faster;\n" +
		" steady: the same figures without the first H steps, the warm-up)\n")

	ew.printf("\nHelix versus the others (change of helix's miss rate and GPU wait relative to the other loader: -80%% = 80%% fewer; throughput ratios; oracle gap in points of wall time):\n")
	tw = ew.table()
	fmt.Fprintln(tw, "workload\tskew\tmiss vs torch\twait vs torch\ttput vs torch\tmiss vs local\twait vs local\ttput vs local\t"+
		"miss vs static\twait vs static\ttput vs static\toracle gap\t")
	for _, x := range r.Comparisons {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", x.Workload, x.Skew, fmtPct(x.VsTorch.MissReduction), fmtPct(x.VsTorch.WaitReduction),
			fmtX(x.VsTorch.ThroughputRatio), fmtPct(x.VsLocal.MissReduction), fmtPct(x.VsLocal.WaitReduction), fmtX(x.VsLocal.ThroughputRatio),
			fmtPct(x.VsStatic.MissReduction), fmtPct(x.VsStatic.WaitReduction), fmtX(x.VsStatic.ThroughputRatio), fmtPts(x.OracleGap))
	}
	ew.flush(tw)

	s := r.Summary
	ew.printf("\nSummary:\n")
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
	ew.printf("  miss_reduction_vs_torch_mean         %s\n", key(s.MissReductionVsTorchMean,
		meanOverText(s.MissReductionVsTorchMean, s.MissReductionWorkloads), vsTorch("no workload with misses to reduce")))
	ew.printf("  wait_reduction_vs_torch_mean         %s\n", key(s.WaitReductionVsTorchMean,
		meanOverText(s.WaitReductionVsTorchMean, s.WaitReductionWorkloads), vsTorch("no workload with wait to reduce")))
	ew.printf("  throughput_ratio_vs_torch_max        %s\n", key(s.ThroughputRatioVsTorchMax, fmtX(s.ThroughputRatioVsTorchMax), vsTorch("no workload")))
	ew.printf("  throughput_ratio_vs_local_min_skewed %s\n", key(s.ThroughputRatioVsLocalMinSkewed, fmtX(s.ThroughputRatioVsLocalMinSkewed),
		"no skewed workload with local run"))
	ew.printf("  oracle_gap_mean                      %s\n", key(s.OracleGapMean, fmtPts(s.OracleGapMean)+" of wall", "the oracle was not run"))
	if s.OracleWaitReductionVsTorchMean != nil {
		ew.printf("  the oracle (perfect knowledge, free transfers) in helix's place: %s, %s, %s throughput at most\n",
			reductionText(s.OracleMissReductionVsTorchMean, "fewer misses", "misses"), reductionText(s.OracleWaitReductionVsTorchMean, "less wait", "wait"),
			fmtX(s.OracleThroughputRatioVsTorchMax))
	}
	if torchRun {
		ew.printf("  steady state (without the warm-up), helix vs torch: %s, %s\n",
			reductionOver(s.SteadyMissReductionVsTorchMean, s.SteadyMissReductionWorkloads, "fewer misses", "misses"),
			reductionOver(s.SteadyWaitReductionVsTorchMean, s.SteadyWaitReductionWorkloads, "less wait", "wait"))
	}
	if line := warmupFloorLine(r.Comparisons, loadersRun(r.Results)); line != "" {
		ew.printf("  %s\n", line)
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

// warmupFloorLine says how many misses every loader run (loaders: the
// oracle too when it ran) has in the warm-up of the workloads of
// miss_reduction_vs_torch_mean (Comparison.WarmupMisses) and the miss
// rate that floor is at the run's steps; "" when no workload has a
// floor above 0.
func warmupFloorLine(cs []Comparison, loaders []string) string {
	var misses, steps, floors []float64
	for _, c := range cs {
		if c.VsTorch.MissReduction == nil || c.WarmupMissFloor == nil {
			continue
		}
		misses = append(misses, float64(c.WarmupMisses))
		steps = append(steps, float64(c.WarmupSteps))
		floors = append(floors, *c.WarmupMissFloor)
	}
	if len(floors) == 0 || slices.Max(floors) <= 0 {
		return ""
	}
	span := func(xs []float64, format string) string {
		lo, hi := slices.Min(xs), slices.Max(xs)
		if lo == hi {
			return fmt.Sprintf(format, lo)
		}
		return fmt.Sprintf(format, lo) + " to " + fmt.Sprintf(format, hi)
	}
	varies := ""
	if slices.Min(misses) != slices.Max(misses) || slices.Min(steps) != slices.Max(steps) {
		varies = ", by workload,"
	}
	who := "every loader, the oracle too,"
	if !slices.Contains(loaders, step.KindOracle.String()) {
		who = "every loader run (" + strings.Join(loaders, ", ") + ")"
	}
	times := "times"
	if slices.Max(misses) == 1 {
		times = "time"
	}
	return fmt.Sprintf("%s misses %s %s%s in the warm-up (the first %s steps): a miss-rate floor of %s %% at these steps, which bounds the reductions above",
		who, span(misses, "%.0f"), times, varies, span(steps, "%.0f"), span(scaled(floors, 100), "%.2f"))
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

// scaled returns xs multiplied by k.
func scaled(xs []float64, k float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = k * x
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

func fmtPts(v *float64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%.2f%%", 100**v)
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

// reductionOver is reductionText with the workloads it is over, "87.5 % less
// wait (over 2 workloads)".
func reductionOver(v *float64, n int, less, what string) string {
	if v == nil || n == 0 {
		return reductionText(nil, less, what)
	}
	return fmt.Sprintf("%s (over %s)", reductionText(v, less, what), plural(n, "workload"))
}
