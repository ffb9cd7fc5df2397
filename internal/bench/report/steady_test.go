package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/datahelix/datahelix/internal/bench/eval"
	"github.com/datahelix/datahelix/internal/bench/workload"
)

// TestReduceFloor checks the gating of reductions: a baseline with a
// steady step-miss rate or stall of exactly 1 % has its reduction
// reported, one just under does not, whatever helix does; the absolute
// figures stay in the results either way.
func TestReduceFloor(t *testing.T) {
	for _, tt := range []struct {
		torchMiss, torchStall float64
		miss, stall           bool
	}{
		{0.01, 0.01, true, true},
		{0.0099, 0.02, false, true},
		{0.5, 0.0099, true, false},
		{0, 0, false, false},
	} {
		h := res("W", "helix", workload.Skewed, 0.001, 0.001, 100)
		o := res("W", "torch", workload.Skewed, tt.torchMiss, tt.torchStall, 90)
		v := versus(&h, &o)
		if (v.StepMissReduction != nil) != tt.miss || (v.StallReduction != nil) != tt.stall {
			t.Errorf("torch at %v step misses, %v stall: step-miss reduction %v, stall reduction %v; want defined %v, %v",
				tt.torchMiss, tt.torchStall, v.StepMissReduction, v.StallReduction, tt.miss, tt.stall)
		}
		if !near(v.ThroughputRatio, 100.0/90) {
			t.Errorf("throughput ratio %v, want %v whatever the floor", v.ThroughputRatio, 100.0/90)
		}
	}
	// Without steady steps nothing is compared.
	h, o := res("W", "helix", workload.Skewed, 0.5, 0.5, 100), res("W", "torch", workload.Skewed, 0.5, 0.5, 100)
	h.SteadySteps = 0
	if v := versus(&h, &o); v != (Versus{}) {
		t.Errorf("helix without steady steps: %+v, want nothing defined", v)
	}
}

// checkText writes r's text report and checks that it holds every one of
// want and none of bad.
func checkText(t *testing.T, r *Report, want, bad []string) {
	t.Helper()
	var buf bytes.Buffer
	if err := r.WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("text lacks %q:\n%s", w, out)
		}
	}
	for _, b := range bad {
		if strings.Contains(out, b) {
			t.Errorf("text says %q:\n%s", b, out)
		}
	}
}

// reportOf is handReport with only the results keep accepts.
func reportOf(keep func(eval.Result) bool) *Report {
	var kept []eval.Result
	for _, x := range handResults() {
		if keep(x) {
			kept = append(kept, x)
		}
	}
	return handReportOf(8, kept)
}

// TestGoalsSayTorchWasNotRun checks the reduction goals when torch is
// not among the loaders: they say so, not "torch had under 1 %".
func TestGoalsSayTorchWasNotRun(t *testing.T) {
	r := reportOf(func(x eval.Result) bool { return x.Loader != "torch" })
	for _, g := range r.Goals[:3] {
		if !strings.Contains(g.Figure, "torch was not run") || strings.Contains(g.Figure, "under 1 %") || g.Status != GoalNA {
			t.Errorf("goal %q: %s %q; want n/a as torch was not run", g.Name, g.Status, g.Figure)
		}
	}
}

// TestSummaryNothingToReduce checks the summary when torch has under 1 %
// to reduce on every skewed workload: null keys that say why, and goals
// with no verdict, not "undefined".
func TestSummaryNothingToReduce(t *testing.T) {
	rs := handResults()
	for i := range rs {
		if rs[i].Loader == "torch" {
			rs[i].SteadyStepMissRate, rs[i].SteadyJobStallFrac = 0.001, 0.001
		}
	}
	r := handReportOf(8, rs)
	checkText(t, r, []string{
		"  steady_step_miss_reduction_vs_torch_mean null: no skewed workload where torch had 1 % to reduce\n",
		"steady stall reduction vs torch: no workload to average over (2 left out: torch had under 1 % steady job stall)",
	}, []string{"undefined"})
	if g := r.Goals[0]; g.Status != GoalNA {
		t.Errorf("step-miss goal with nothing to reduce: %s, want n/a", g.Status)
	}
}

// TestSummaryWithoutTorchOrOracle checks the summary when --loaders left
// torch and the oracle out: each null key says which was not run, and
// the oracle goal does not blame --real in a simulated run.
func TestSummaryWithoutTorchOrOracle(t *testing.T) {
	r := reportOf(func(x eval.Result) bool { return x.Loader != "torch" && x.Loader != "oracle" })
	checkText(t, r, []string{
		"  steady_step_miss_reduction_vs_torch_mean null: torch was not run\n",
		"  throughput_ratio_vs_torch_max            null: torch was not run\n",
		"  throughput_ratio_vs_oracle_min           null: the oracle was not run\n",
		"near the oracle's throughput on every workload: no workload with the oracle run (goal",
	}, []string{"per rank, beside them, helix vs torch", "undefined", "--real has none"})
}
