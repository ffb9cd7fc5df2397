package report

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/datahelix/datahelix/internal/bench/workload"
	"github.com/datahelix/datahelix/internal/step"
)

// Goal is one of the targets with the measured figure.
type Goal struct {
	Name   string `json:"name"`
	Target string `json:"target"`
	Figure string `json:"figure"`
	// Status is GoalPass, GoalShort or GoalNA (not measured in this run).
	Status string `json:"status"`
	// Note adds information the verdict does not use: for the two
	// reductions, the same figure on the steady figures (without the
	// warm-up, whose misses no loader avoids). The verdict is on Figure.
	Note string `json:"note,omitempty"`
}

// Goal statuses.
const (
	GoalPass  = "PASS"
	GoalShort = "FALL SHORT"
	GoalNA    = "n/a"
)

// The goals' thresholds, from the issue (§4): judged in steady state, at
// GoalRanks ranks, against torch on the skewed workloads.
const (
	goalStepMissReduction = 0.80
	goalStallReduction    = 0.90
	goalThroughputRatio   = 2.7
	goalOracleRatio       = 0.97
	goalUniformRegression = 0.02
	// GoalRanks is the world size the goals are judged at; at another,
	// they are reported but not judged.
	GoalRanks = 8
	// The scale goal (issue 27 §5): GoalScaleRanks x 16 for 100 steps
	// simulated in under GoalScaleSeconds, the plan's p50 per step at
	// most GoalScalePlanUS.
	GoalScaleRanks   = 8192
	GoalScaleSeconds = 120
	GoalScalePlanUS  = 20000
)

func status(ok bool) string {
	if ok {
		return GoalPass
	}
	return GoalShort
}

func pct(v *float64) string {
	if v == nil {
		return "undefined"
	}
	return fmt.Sprintf("%.1f %%", 100**v)
}

// plural is "1 rank", "2 ranks": n and the noun, with an s unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// meanOver is a goal's mean and the workloads it is over, "25.4 % mean
// over 10 workloads", or "no workload to average over" when there are
// none.
func meanOver(v *float64, n int) string {
	if v == nil || n == 0 {
		return "no workload to average over"
	}
	return fmt.Sprintf("%s mean over %s", pct(v), plural(n, "workload"))
}

// goals evaluates the goals on the report.
func goals(r *Report) []Goal {
	s := r.Summary
	var out []Goal
	run := loadersRun(r.Results)
	noTorch := !slices.Contains(run, step.KindTorch.String())
	noOracle := !slices.Contains(run, step.KindOracle.String())
	skewed := len(s.SkewedWorkloads)
	// judge gives a goal its verdict, or none at another world size.
	judge := func(g *Goal, ok bool) {
		if r.Ranks != GoalRanks {
			g.Status = GoalNA
			g.Note = fmt.Sprintf("judged at %d ranks; this run has %d", GoalRanks, r.Ranks)
			return
		}
		g.Status = status(ok)
	}
	meanGoal := func(name, what string, v *float64, n int, target float64, oracle *float64) {
		g := Goal{Name: name, Target: fmt.Sprintf(">= %.0f %% (mean over the skewed workloads)", 100*target), Status: GoalNA,
			Figure: meanOver(v, n)}
		switch {
		case noTorch:
			g.Figure += " (torch was not run)"
		case skewed == 0:
			g.Figure = "no skewed workload"
		case n < skewed:
			g.Figure += fmt.Sprintf(" (%d left out: torch had under %.0f %% steady %s)", skewed-n, 100*ReduceFloor, what)
		}
		if v != nil {
			if *v < target {
				g.Figure += fmt.Sprintf("; %.1f points short", 100*(target-*v))
			}
			if oracle != nil {
				g.Figure += fmt.Sprintf("; the oracle reaches %s", pct(oracle))
			}
			judge(&g, *v >= target)
		}
		out = append(out, g)
	}
	meanGoal("steady step-miss reduction vs torch", "step misses", s.SteadyStepMissReductionVsTorchMean, s.StepMissReductionWorkloads,
		goalStepMissReduction, s.OracleStepMissReductionVsTorchMean)
	meanGoal("steady stall reduction vs torch", "job stall", s.SteadyStallReductionVsTorchMean, s.StallReductionWorkloads,
		goalStallReduction, s.OracleStallReductionVsTorchMean)

	g := Goal{Name: "largest steady throughput ratio vs torch", Target: fmt.Sprintf(">= %.1fx (over the skewed workloads)", goalThroughputRatio),
		Status: GoalNA, Figure: "no skewed workload"}
	if noTorch {
		g.Figure = "torch was not run"
	}
	if v := s.ThroughputRatioVsTorchMax; v != nil {
		g.Figure = fmt.Sprintf("%.2fx on %s", *v, s.ThroughputRatioVsTorchMaxWorkload)
		if *v < goalThroughputRatio {
			g.Figure += fmt.Sprintf("; %.2fx short", goalThroughputRatio-*v)
		}
		if o := s.OracleThroughputRatioVsTorchMax; o != nil {
			g.Figure += fmt.Sprintf("; the oracle's largest %.2fx", *o)
		}
		if p := s.PackVsTorchMax; p != nil {
			g.Figure += fmt.Sprintf("; torch-pack's %.2fx", *p)
		}
		judge(&g, *v >= goalThroughputRatio)
	}
	out = append(out, g)

	var below []string
	compared := 0
	for _, c := range r.Comparisons {
		if c.HelixVsOracle == nil {
			continue
		}
		compared++
		if *c.HelixVsOracle < goalOracleRatio {
			below = append(below, fmt.Sprintf("%s (%.3fx)", c.Workload, *c.HelixVsOracle))
		}
	}
	list := func(prefix string, xs []string) string {
		if len(xs) == 0 {
			return ""
		}
		return "; " + prefix + ": " + strings.Join(xs, ", ")
	}
	g = Goal{Name: "near the oracle's throughput on every workload", Target: fmt.Sprintf("helix >= %.0f %% of the oracle's steady throughput", 100*goalOracleRatio),
		Status: GoalNA, Figure: "no workload with the oracle run"}
	if noOracle && r.Mode == "real" {
		g.Figure += " (--real has none)"
	}
	if v := s.ThroughputRatioVsOracleMin; v != nil {
		g.Figure = fmt.Sprintf("lowest %.3fx on %s, at or above on %d of %s%s", *v, s.ThroughputRatioVsOracleMinWorkload,
			compared-len(below), plural(compared, "workload"), list("below on", below))
		if *v < goalOracleRatio {
			g.Figure += fmt.Sprintf("; %.1f points short", 100*(goalOracleRatio-*v))
		}
		judge(&g, len(below) == 0)
	}
	out = append(out, g)

	var short []string
	uniform := 0
	for _, c := range r.Comparisons {
		if c.Skew == workload.Skewed || c.HelixVsBest == nil {
			continue
		}
		uniform++
		if *c.HelixVsBest < 1-goalUniformRegression {
			short = append(short, fmt.Sprintf("%s (%.3fx %s's efficiency)", c.Workload, *c.HelixVsBest, c.BestOther))
		}
	}
	g = Goal{Name: "no regression on uniform workloads", Target: fmt.Sprintf("helix >= %.2fx the best other loader's steady GPU efficiency (throughput over its GPU ceiling: samples/s where both train the same batches)", 1-goalUniformRegression),
		Status: GoalNA, Figure: "no uniform workload with another loader run"}
	if v := s.UniformRegressionMax; v != nil {
		if *v <= 0 {
			// A negative regression is helix ahead: say so, not "-147 %".
			g.Figure = fmt.Sprintf("no regression: helix's GPUs at least as busy as the best other loader's on all %s (its lowest ratio %.3fx)",
				plural(uniform, "uniform workload"), 1-*v)
		} else {
			g.Figure = fmt.Sprintf("largest regression %s on %s, over %s%s", pct(v), s.UniformRegressionMaxWorkload, plural(uniform, "uniform workload"),
				list("beyond 2 % on", short))
			if *v > goalUniformRegression {
				g.Figure += fmt.Sprintf("; %.1f points beyond", 100*(*v-goalUniformRegression))
			}
		}
		// By samples/s beside it, where that tells another story (a loader
		// training other batches ahead by samples/s alone).
		if w := s.UniformRegressionMaxSPS; w != nil && *w > goalUniformRegression && math.Abs(*w-*v) > 0.001 {
			g.Figure += fmt.Sprintf("; by samples/s %s on %s%s", pct(w), s.UniformRegressionMaxSPSWorkload, lighterMix(r, s.UniformRegressionMaxSPSWorkload))
		}
		judge(&g, len(short) == 0)
	}
	out = append(out, g)

	out = append(out, validationGoal(r.Sections))

	g = Goal{Name: fmt.Sprintf("scale: %d ranks, B=16, 100 steps simulated", GoalScaleRanks), Target: fmt.Sprintf("< %d s, plan p50 <= %d ms per step", GoalScaleSeconds, GoalScalePlanUS/1000),
		Status: GoalNA, Figure: "not run (datahelix bench --sections scale)"}
	for _, sec := range r.Sections {
		if sec.Name == "scale" && sec.Status == SectionMeasured && sec.Scale != nil {
			sc := sec.Scale
			g.Figure = fmt.Sprintf("%d ranks x %d x %d steps (%s, %s): %.1f s, plan p50 %.0f µs, p99 %.0f µs per step",
				sc.Ranks, sc.Batch, sc.Steps, sc.Workload, sc.Loader, sc.ElapsedS, sc.PlanUSP50, sc.PlanUSP99)
			g.Status = status(sc.Ranks >= GoalScaleRanks && sc.ElapsedS < GoalScaleSeconds && sc.PlanUSP50 <= GoalScalePlanUS)
		}
	}
	out = append(out, g)
	return out
}

// validationGoal says whether the simulator agreed with the real runs
// of the validation section: the simulated figures are only trusted
// where it does.
func validationGoal(secs []Section) Goal {
	g := Goal{Name: "simulator agrees with real runs (validation)", Status: GoalNA,
		Target: fmt.Sprintf("every simulated run: GPU wait within %.0f %% relative, miss rate within %.2f", 100*ValidationWaitRel, ValidationMissAbs),
		Figure: "not run (datahelix bench --sections validation)"}
	for _, sec := range secs {
		if sec.Name != "validation" {
			continue
		}
		switch a := sec.Agreement; {
		case sec.Status == SectionFailed:
			g.Figure = "not measured: the validation section failed"
		case a == nil || a.Runs == 0:
			g.Figure = "not measured: no setup ran both simulated and real"
		default:
			g.Figure = fmt.Sprintf("%d of %d simulated runs agree with the real ones", a.Agree, a.Runs)
			g.Status = status(a.Agree == a.Runs)
		}
	}
	return g
}

// lighterMix says why a loader beats helix by samples/s on workload when
// its GPUs are idler: it trains a lighter mix of samples in the window,
// a shorter mean GPU step than helix's (" (torch-ddp's mean GPU step
// 141 ms, helix's 282 ms: a lighter mix of samples)"); "" when the best
// loader by samples/s does not train lighter batches than helix.
func lighterMix(r *Report, workload string) string {
	var c *Comparison
	for i := range r.Comparisons {
		if r.Comparisons[i].Workload == workload {
			c = &r.Comparisons[i]
		}
	}
	if c == nil || c.BestOtherSPS == "" {
		return ""
	}
	h, o := find(r.Results, workload, step.KindHelix), findLoader(r.Results, workload, c.BestOtherSPS)
	if h == nil || o == nil {
		return ""
	}
	hs, os := h.MeanGPUStepS(), o.MeanGPUStepS()
	if !(hs > 0 && os > 0 && os < hs) {
		return ""
	}
	return fmt.Sprintf(" (%s's mean GPU step %.0f ms, helix's %.0f ms: it trains a lighter mix of samples in the window)", o.Loader, 1000*os, 1000*hs)
}
