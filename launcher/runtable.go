package launcher

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"

	"github.com/datahelix/datahelix/internal/metrics"
)

// printTable prints the loaders side by side, then how the last loader
// compares with the first (helix against torch by default).
func printTable(w io.Writer, rs []metrics.Summary, ranks int, f *runFlags) {
	if len(rs) == 0 {
		return
	}
	fmt.Fprintf(w, "\n%d ranks x %d workers, batch %d per rank, %d steps, F=%d S=%d\n",
		ranks, f.cfg.Workers, f.cfg.Batch, f.cfg.Steps, f.cfg.Decode.Frames, f.cfg.Decode.Size)
	for _, s := range rs {
		if s.FirstStep > 0 {
			fmt.Fprintf(w, "loader %s resumed at step %d: its figures and batches hash cover steps %d-%d only\n",
				s.Loader, s.FirstStep, s.FirstStep, s.FirstStep+s.Steps-1)
		}
	}
	row := func(name string, val func(s metrics.Summary) string) {
		fmt.Fprintf(w, "%-22s", name)
		for _, s := range rs {
			fmt.Fprintf(w, " %14s", val(s))
		}
		fmt.Fprintln(w)
	}
	row("loader", func(s metrics.Summary) string { return s.Loader })
	row("deadline misses", func(s metrics.Summary) string { return fmt.Sprintf("%d (%.1f%%)", s.Misses, 100*s.MissRate) })
	// The mean rank's wait, so that seconds / wall time gives the fraction
	// beside it (the JSON's gpu_wait_s is summed over ranks).
	row("GPU wait per rank", func(s metrics.Summary) string {
		return fmt.Sprintf("%.2fs (%.1f%%)", s.GPUWaitS/float64(max(s.Ranks, 1)), 100*s.GPUWaitFrac)
	})
	row("throughput", func(s metrics.Summary) string { return fmt.Sprintf("%.1f samples/s", s.ThroughputSPS) })
	row("wall time", func(s metrics.Summary) string { return fmt.Sprintf("%.2fs", s.WallS) })
	row("first batch after", func(s metrics.Summary) string { return fmt.Sprintf("%.2fs", s.TimeToFirstBatchS) })
	warm := rs[0].WarmupSteps
	// The warm-up's stall: the slowest rank's wait in each of its steps.
	row("warm-up stall", func(s metrics.Summary) string { return fmt.Sprintf("%.2fs", s.WarmupStallS) })
	// A loader with no step after the warm-up (a resumed one may have
	// few) shows n/a there; the rows show when any loader has one.
	steady := func(s metrics.Summary) bool { return s.Steps > s.WarmupSteps }
	if slices.ContainsFunc(rs, steady) {
		steadyRow := func(name string, val func(s metrics.Summary) string) {
			row(name, func(s metrics.Summary) string {
				if !steady(s) {
					return "n/a"
				}
				return val(s)
			})
		}
		steadyRow(fmt.Sprintf("after %d steps: misses", warm), func(s metrics.Summary) string { return fmt.Sprintf("%.1f%%", 100*s.SteadyMissRate) })
		steadyRow("             GPU wait", func(s metrics.Summary) string { return fmt.Sprintf("%.1f%%", 100*s.SteadyGPUWaitFrac) })
		steadyRow("             throughput", func(s metrics.Summary) string { return fmt.Sprintf("%.1f samples/s", s.SteadyThroughputSPS) })
		// The job's figures: a step lasts as long as its slowest rank.
		steadyRow("  job: steps missed", func(s metrics.Summary) string { return fmt.Sprintf("%.1f%%", 100*s.SteadyStepMissRate) })
		steadyRow("       stall", func(s metrics.Summary) string { return fmt.Sprintf("%.1f%%", 100*s.SteadyJobStallFrac) })
		steadyRow("       GPU efficiency", func(s metrics.Summary) string {
			if s.SteadyEfficiency == 0 {
				return "n/a"
			}
			return fmt.Sprintf("%.1f%%", 100*s.SteadyEfficiency)
		})
	}
	row("moved per step", func(s metrics.Summary) string { return fmt.Sprintf("%.0f KiB", s.BytesMovedPerStep/1024) })
	if slices.ContainsFunc(rs, func(s metrics.Summary) bool { return s.NetBytesMovedPerStep > 0 }) {
		row("  across nodes", func(s metrics.Summary) string { return fmt.Sprintf("%.0f KiB", s.NetBytesMovedPerStep/1024) })
	}
	row("plan p50", func(s metrics.Summary) string { return fmt.Sprintf("%.0f µs", s.PlanUSP50) })
	row("allgather p50", func(s metrics.Summary) string { return fmt.Sprintf("%.0f µs", s.AllgatherUSP50) })
	row("cost model MAPE", func(s metrics.Summary) string {
		if s.CostMAPE == nil {
			return "n/a"
		}
		return fmt.Sprintf("%.1f%%", 100**s.CostMAPE)
	})
	if rs[0].GPUModelMAPE != nil {
		row("GPU model MAPE", func(s metrics.Summary) string {
			if s.GPUModelMAPE == nil {
				return "n/a"
			}
			return fmt.Sprintf("%.1f%%", 100**s.GPUModelMAPE)
		})
	}
	row("dropped samples", func(s metrics.Summary) string { return fmt.Sprint(s.DroppedSamples) })
	row("damaged samples", func(s metrics.Summary) string { return fmt.Sprint(s.DamagedSamples) })
	row("peak RSS", func(s metrics.Summary) string { return fmt.Sprintf("%.0f MiB", float64(s.PeakRSSBytes)/(1<<20)) })
	row("batches hash", func(s metrics.Summary) string { return s.BatchesHash })
	if len(rs) > 1 {
		a, b := rs[0], rs[len(rs)-1]
		fmt.Fprintf(w, "\n%s vs %s: %s, %s, throughput %.2fx\n", b.Loader, a.Loader,
			change("misses", a.MissRate, b.MissRate), change("GPU wait", a.GPUWaitFrac, b.GPUWaitFrac), b.ThroughputSPS/max(a.ThroughputSPS, 1e-9))
		if a.FirstStep != b.FirstStep {
			fmt.Fprintf(w, "(over different steps: %s from step %d, %s from step %d)\n", a.Loader, a.FirstStep, b.Loader, b.FirstStep)
		}
		switch left := min(a.Steps, b.Steps) - warm; {
		case !steady(a) || !steady(b):
		case left < minCompareSteps:
			fmt.Fprintf(w, "after the first %d steps (the warm-up, one planning horizon): %d steps, too few to compare (run more --steps)\n", warm, left)
		default:
			fmt.Fprintf(w, "after the first %d steps (the warm-up, one planning horizon): %s, %s, throughput %.2fx\n", warm,
				change("misses", a.SteadyMissRate, b.SteadyMissRate), change("GPU wait", a.SteadyGPUWaitFrac, b.SteadyGPUWaitFrac),
				b.SteadyThroughputSPS/max(a.SteadyThroughputSPS, 1e-9))
		}
	}
}

// minCompareSteps is the fewest steps after the warm-up for which the
// table compares the loaders' steady-state figures: over one or two steps
// the ratio of two tiny waits is noise.
const minCompareSteps = 5

// change says how the fraction named went from a to b, with both
// values, "GPU wait 0.7% → 1.4% (+100.0%)": a relative change alone
// reads as a verdict even when both are a small part of the wall time.
// The change is that of the values as printed (to 0.1 %), so that the
// line never says "0.1% → 0.1% (+100.0%)".
func change(name string, a, b float64) string {
	// As the table prints it (%.1f of the percentage, which rounds a
	// half to even: 0.2625 is 26.2%), not math.Round's half up.
	round := func(x float64) float64 {
		v, _ := strconv.ParseFloat(strconv.FormatFloat(100*x, 'f', 1, 64), 64)
		return v / 100
	}
	a, b = round(a), round(b)
	return fmt.Sprintf("%s %.1f%% → %.1f%% (%s)", name, 100*a, 100*b, reduction(a, b))
}

// reduction says how much smaller the fraction b is than a, as "-67.8%".
// Fractions that both print as 0.0% are "same": a ratio of two values
// below the table's precision would be noise (0.00001 against 0.00006 is
// "+500%").
func reduction(a, b float64) string {
	const tiny = 0.0005 // rounds to 0.0%
	switch {
	case a < tiny && b < tiny:
		return "same"
	case a < tiny:
		return "more"
	}
	return fmt.Sprintf("%+.1f%%", 100*(b-a)/a)
}

// printCase prints one dataset's figures: its heading on the default job,
// the table of its median run (by the last loader's steady throughput
// over the first's, or the one loader's), and with several runs the
// spread over them.
func printCase(w io.Writer, cr caseResults, ranks int, f *runFlags) {
	if len(cr.runs) == 0 {
		return
	}
	if cr.name != "" {
		fmt.Fprintf(w, "\n== %s: %s\n", cr.name, cr.about)
	}
	order := make([]int, len(cr.runs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(runRatio(cr.runs[a]), runRatio(cr.runs[b])) })
	median := order[(len(order)-1)/2]
	if len(cr.runs) > 1 {
		fmt.Fprintf(w, "run %d of %d, the median by throughput:", median+1, len(cr.runs))
	}
	printTable(w, cr.runs[median], ranks, f)
	if len(cr.runs) > 1 {
		printSpread(w, cr.runs)
	}
}

// runRatio is the last loader's steady throughput over the first's in one
// run (the steady one alone when one loader ran).
func runRatio(row []metrics.Summary) float64 {
	a, b := row[0], row[len(row)-1]
	if len(row) == 1 {
		return a.SteadyThroughputSPS
	}
	return b.SteadyThroughputSPS / max(a.SteadyThroughputSPS, 1e-9)
}

// spread is the median and range of one figure over the runs.
type spread struct{ median, lo, hi float64 }

// spreadOf returns the spread of v over the runs.
func spreadOf(runs [][]metrics.Summary, v func(row []metrics.Summary) float64) spread {
	xs := make([]float64, len(runs))
	for i, row := range runs {
		xs[i] = v(row)
	}
	slices.Sort(xs)
	n := len(xs)
	return spread{median: (xs[(n-1)/2] + xs[n/2]) / 2, lo: xs[0], hi: xs[n-1]}
}

// format writes the spread with verb (of one value), "1.2 (1.0–1.5)".
// A verb ending in a unit repeats it: "%.1f%%" gives "8.3% (6.0%–9.1%)".
func (s spread) format(verb string) string {
	return fmt.Sprintf(verb+" ("+verb+"–"+verb+")", s.median, s.lo, s.hi)
}

// printSpread prints, per loader, the median and range over the runs of
// the steady figures the job is judged by, and of the last loader's
// throughput over the first's.
func printSpread(w io.Writer, runs [][]metrics.Summary) {
	fmt.Fprintf(w, "\nover %d runs, median (lowest–highest), after the warm-up:\n", len(runs))
	row := func(name string, val func(s metrics.Summary) float64, verb string) {
		fmt.Fprintf(w, "%-22s", name)
		for l := range runs[0] {
			sp := spreadOf(runs, func(row []metrics.Summary) float64 { return val(row[l]) })
			fmt.Fprintf(w, "  %s %s", runs[0][l].Loader, sp.format(verb))
		}
		fmt.Fprintln(w)
	}
	pct := func(v func(s metrics.Summary) float64) func(s metrics.Summary) float64 {
		return func(s metrics.Summary) float64 { return 100 * v(s) }
	}
	row("  samples/s", func(s metrics.Summary) float64 { return s.SteadyThroughputSPS }, "%.1f")
	row("  job: steps missed", pct(func(s metrics.Summary) float64 { return s.SteadyStepMissRate }), "%.1f%%")
	row("       stall", pct(func(s metrics.Summary) float64 { return s.SteadyJobStallFrac }), "%.1f%%")
	if n := len(runs[0]); n > 1 {
		sp := spreadOf(runs, runRatio)
		fmt.Fprintf(w, "%s vs %s throughput: %s\n", runs[0][n-1].Loader, runs[0][0].Loader, sp.format("%.2fx"))
	}
}

// printDefaultJob ends the default job's output with what it shows: the
// last loader's throughput over the first's on each dataset, median and
// range over the runs.
func printDefaultJob(w io.Writer, cases []caseResults) {
	if len(cases) < 2 || len(cases[0].runs) == 0 || len(cases[0].runs[0]) < 2 {
		return
	}
	row := cases[0].runs[0]
	a, b := row[0].Loader, row[len(row)-1].Loader
	fmt.Fprintf(w, "\n%s vs %s, steady throughput over %d runs:", b, a, len(cases[0].runs))
	for i, cr := range cases {
		sep := ";"
		if i == 0 {
			sep = ""
		}
		fmt.Fprintf(w, "%s %s %s", sep, cr.name, spreadOf(cr.runs, runRatio).format("%.2fx"))
	}
	fmt.Fprintln(w)
}
