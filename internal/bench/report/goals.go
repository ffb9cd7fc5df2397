package report

import (
	"fmt"
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

// The goals' thresholds, from the issue.
const (
	goalMissReduction   = 0.80
	goalWaitReduction   = 0.90
	goalThroughputRatio = 2.7
	goalUniformGap      = 0.02
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
	// Without torch, every workload is left out for want of it.
	noTorch := !slices.Contains(loadersRun(r.Results), step.KindTorch.String())
	leftOut := func(n int, why string) string {
		if noTorch {
			why = "torch was not run"
		}
		return fmt.Sprintf(" (%d left out: %s)", n, why)
	}
	meanGoal := func(name string, v *float64, n int, target float64, oracle, steady *float64, steadyN int) {
		g := Goal{Name: name, Target: fmt.Sprintf(">= %.0f %% (mean over the workloads)", 100*target), Status: GoalNA,
			Figure: meanOver(v, n)}
		if n < len(r.Comparisons) {
			g.Figure += leftOut(len(r.Comparisons)-n, "torch had nothing to reduce")
		}
		if oracle != nil {
			g.Figure += fmt.Sprintf("; the oracle reaches %s", pct(oracle))
		}
		if v != nil {
			g.Status = status(*v >= target)
		}
		g.Note = "steady state (without the warm-up; not judged): " + meanOver(steady, steadyN)
		if steadyN < len(r.Comparisons) {
			g.Note += leftOut(len(r.Comparisons)-steadyN, "torch had nothing to reduce after its warm-up, or no steady steps")
		}
		out = append(out, g)
	}
	meanGoal("deadline-miss reduction vs torch", s.MissReductionVsTorchMean, s.MissReductionWorkloads, goalMissReduction, s.OracleMissReductionVsTorchMean,
		s.SteadyMissReductionVsTorchMean, s.SteadyMissReductionWorkloads)
	meanGoal("GPU-wait reduction vs torch", s.WaitReductionVsTorchMean, s.WaitReductionWorkloads, goalWaitReduction, s.OracleWaitReductionVsTorchMean,
		s.SteadyWaitReductionVsTorchMean, s.SteadyWaitReductionWorkloads)

	g := Goal{Name: "throughput vs torch on the most skewed workload", Target: fmt.Sprintf(">= %.1fx", goalThroughputRatio), Status: GoalNA, Figure: "no skewed workload"}
	if noTorch {
		g.Figure = "torch was not run"
	}
	if v := s.ThroughputRatioVsTorchMostSkewed; v != nil {
		g.Figure = fmt.Sprintf("%.2fx on %s (highest imbalance); max over workloads %.2fx", *v, s.MostSkewed, deref(s.ThroughputRatioVsTorchMax))
		if o := s.OracleThroughputRatioVsTorchMax; o != nil {
			g.Figure += fmt.Sprintf("; the oracle's max %.2fx", *o)
		}
		g.Status = status(*v >= goalThroughputRatio)
	}
	out = append(out, g)

	var behind, short, over []string
	skewed, uniform, bounded := 0, 0, 0
	for _, c := range r.Comparisons {
		if c.OracleBound != nil {
			bounded++
			if h := find(r.Results, c.Workload, step.KindHelix); h != nil && h.GPUWaitFrac > *c.OracleBound {
				over = append(over, fmt.Sprintf("%s (%.1f %% > %.1f %%)", c.Workload, 100*h.GPUWaitFrac, 100**c.OracleBound))
			}
		}
		if c.Skew == workload.Skewed {
			if c.VsLocal.ThroughputRatio == nil || c.VsStatic.ThroughputRatio == nil {
				continue
			}
			skewed++
			if l, st := *c.VsLocal.ThroughputRatio, *c.VsStatic.ThroughputRatio; l <= 1 || st <= 1 {
				behind = append(behind, fmt.Sprintf("%s (%.3fx local, %.3fx static)", c.Workload, l, st))
			}
		} else if c.HelixVsBest != nil {
			uniform++
			if *c.HelixVsBest < 1-goalUniformGap {
				short = append(short, fmt.Sprintf("%s (%.3fx %s)", c.Workload, *c.HelixVsBest, c.BestOther))
			}
		}
	}
	list := func(prefix string, xs []string) string {
		if len(xs) == 0 {
			return ""
		}
		return "; " + prefix + ": " + strings.Join(xs, ", ")
	}
	g = Goal{Name: "ahead of local and static on every skewed workload (throughput)", Target: "helix > local and > static", Status: GoalNA,
		Figure: fmt.Sprintf("ahead on %d of %s%s", skewed-len(behind), plural(skewed, "skewed workload"), list("not ahead on", behind))}
	if skewed > 0 {
		g.Status = status(len(behind) == 0)
	} else {
		g.Figure = "no skewed workload with local and static run"
	}
	out = append(out, g)
	g = Goal{Name: "within 2 % of the best loader on uniform workloads", Target: ">= 0.98x the best other loader", Status: GoalNA,
		Figure: fmt.Sprintf("worst shortfall %s over %s%s", pct(s.UniformShortfallMax), plural(uniform, "uniform workload"), list("short on", short))}
	if v := s.UniformShortfallMax; v != nil && *v <= 0 {
		// A negative shortfall is helix ahead: say so, not "-147 %".
		g.Figure = fmt.Sprintf("no shortfall: helix at least as fast as the best other loader on all %s (its lowest ratio %.3fx)", plural(uniform, "uniform workload"), 1-*v)
	}
	if uniform > 0 {
		g.Status = status(len(short) == 0)
	} else {
		g.Figure = "no uniform workload with another loader run"
	}
	out = append(out, g)
	g = Goal{Name: "GPU wait near the oracle's", Target: "helix wait <= 1.5x oracle's + 1 % of wall, every workload", Status: GoalNA,
		Figure: fmt.Sprintf("within on %d of %s, mean gap %s of wall%s", bounded-len(over), plural(bounded, "workload"), pct(s.OracleGapMean), list("over on", over))}
	if bounded > 0 {
		g.Status = status(len(over) == 0)
	} else {
		g.Figure = "no workload with the oracle run"
		if r.Mode == "real" {
			g.Figure += " (--real has none)"
		}
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

func deref(v *float64) float64 {
	if v == nil {
		return 0
	}
	return *v
}
