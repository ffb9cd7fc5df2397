package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/datahelix/datahelix/internal/bench/eval"
	"github.com/datahelix/datahelix/internal/bench/workload"
	"github.com/datahelix/datahelix/internal/machine"
)

// warmupReport is a report of two workloads, 8 ranks x 100 steps with a
// 16-step warm-up, in which every loader, the oracle too, misses once per
// rank in the warm-up (8 misses, a floor of 1 %). On A, torch also misses
// 16 times and waits after it; on U torch misses nothing.
func warmupReport() *Report {
	const ranks, steps, steady = 8, 100, 84
	res := func(w, l, skew string, misses, steadyMisses int, wait, steadyWait, tput float64) eval.Result {
		return eval.Result{Workload: w, Loader: l, Ranks: ranks, Steps: steps, Batch: 4, Mode: "sim", Skew: skew,
			Misses: misses, MissRate: float64(misses) / (ranks * steps), GPUWaitFrac: wait, ThroughputSPS: tput,
			SteadySteps: steady, SteadyMissRate: float64(steadyMisses) / (ranks * steady), SteadyGPUWaitFrac: steadyWait}
	}
	ev := &eval.Evaluation{Mode: "sim",
		Setups: []eval.Setup{{Workload: "A", Skew: workload.Skewed, Imbalance: 0.5, Horizon: 16}, {Workload: "U", Skew: workload.Uniform, Horizon: 16}},
		Results: []eval.Result{
			res("A", "torch", workload.Skewed, 24, 16, 0.04, 0.02, 100), res("A", "local", workload.Skewed, 8, 0, 0.01, 0, 110),
			res("A", "static", workload.Skewed, 9, 0, 0.01, 0, 110), res("A", "helix", workload.Skewed, 8, 0, 0.01, 0.005, 120),
			res("A", "oracle", workload.Skewed, 8, 0, 0.01, 0, 121),
			res("U", "torch", workload.Uniform, 0, 0, 0.03, 0.01, 100), res("U", "local", workload.Uniform, 0, 0, 0.01, 0, 100),
			res("U", "static", workload.Uniform, 0, 0, 0.01, 0, 100), res("U", "helix", workload.Uniform, 0, 0, 0.01, 0, 100),
			res("U", "oracle", workload.Uniform, 0, 0, 0.01, 0, 100),
		}}
	return NewReport(machine.Machine{Host: "h", Commit: "c0ffee"}, eval.EvalConfig{Ranks: ranks, Steps: steps, Seed: 1, Network: eval.DefaultNetwork}, ev, workload.DefaultCalibration())
}

// TestSteadySummary checks the steady-state counterparts of the two
// reductions and the warm-up floor: added next to the spec's figures,
// which stay as they were (they include the warm-up, whose misses no
// loader avoids, and so depend on --steps).
func TestSteadySummary(t *testing.T) {
	r := warmupReport()
	s := r.Summary
	checks := []struct {
		name string
		got  *float64
		want float64
	}{
		// The spec's figures, unchanged: A only (U's torch missed nothing).
		{"miss mean", s.MissReductionVsTorchMean, 1 - 8.0/24},
		{"wait mean", s.WaitReductionVsTorchMean, ((1 - 0.01/0.04) + (1 - 0.01/0.03)) / 2},
		// Steady: torch's 16 misses after the warm-up, helix's none; U's
		// torch missed nothing after it either.
		{"steady miss mean", s.SteadyMissReductionVsTorchMean, 1},
		{"steady wait mean", s.SteadyWaitReductionVsTorchMean, ((1 - 0.005/0.02) + 1) / 2},
		{"A floor", r.Comparisons[0].WarmupMissFloor, 8.0 / 800},
		{"floor min", s.WarmupMissFloorMin, 0.01},
		{"floor max", s.WarmupMissFloorMax, 0.01},
	}
	for _, c := range checks {
		if !near(c.got, c.want) {
			t.Errorf("%s = %v, want %v", c.name, fmtPts(c.got), c.want)
		}
	}
	if s.SteadyMissReductionWorkloads != 1 || s.SteadyWaitReductionWorkloads != 2 {
		t.Errorf("steady workloads: %d miss, %d wait; want 1 and 2", s.SteadyMissReductionWorkloads, s.SteadyWaitReductionWorkloads)
	}
	if c := r.Comparisons[0]; c.WarmupMisses != 8 || c.WarmupSteps != 16 {
		t.Errorf("A: %d warm-up misses in %d steps, want 8 in 16", c.WarmupMisses, c.WarmupSteps)
	}
	for _, g := range r.Goals[:2] {
		if !strings.HasPrefix(g.Note, "steady state (without the warm-up; not judged): ") {
			t.Errorf("goal %q: note %q, want the steady figure", g.Name, g.Note)
		}
	}
	if g := r.Goals[0]; g.Status != GoalShort || !strings.Contains(g.Note, "100.0 % mean over 1 workload (1 left out") {
		t.Errorf("miss goal %s, note %q: want the verdict on the spec's 66.7 %% and the steady 100.0 %% in the note", g.Status, g.Note)
	}
	checkText(t, r, []string{
		"  steady state (without the warm-up), helix vs torch: 100.0 % fewer misses (over 1 workload), 87.5 % less wait (over 2 workloads)\n",
		"  every loader, the oracle too, misses 8 times in the warm-up (the first 16 steps): a miss-rate floor of 1.00 % at these steps, which bounds the reductions above\n",
		"             note: steady state (without the warm-up; not judged): 100.0 % mean over 1 workload",
	}, nil)
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

// reportOf is warmupReport with only the results keep accepts, over the
// workloads of setups.
func reportOf(setups []eval.Setup, keep func(eval.Result) bool) *Report {
	var kept []eval.Result
	for _, x := range warmupReport().Results {
		if keep(x) {
			kept = append(kept, x)
		}
	}
	ev := &eval.Evaluation{Mode: "sim", Setups: setups, Results: kept}
	return NewReport(machine.Machine{Host: "h", Commit: "c0ffee"}, eval.EvalConfig{Ranks: 8, Steps: 100, Seed: 1, Network: eval.DefaultNetwork}, ev, workload.DefaultCalibration())
}

// TestWarmupFloorLineVaries checks the floor line when workloads differ.
func TestWarmupFloorLineVaries(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	one := 0.5
	cs := []Comparison{
		{VsTorch: Versus{MissReduction: &one}, WarmupMisses: 8, WarmupSteps: 16, WarmupMissFloor: f(0.005)},
		{VsTorch: Versus{MissReduction: &one}, WarmupMisses: 16, WarmupSteps: 24, WarmupMissFloor: f(0.01)},
		{WarmupMisses: 0, WarmupSteps: 16, WarmupMissFloor: f(0)}, // torch missed nothing: not in the mean
	}
	all := []string{"torch", "local", "helix", "oracle"}
	want := "every loader, the oracle too, misses 8 to 16 times, by workload, in the warm-up (the first 16 to 24 steps): a miss-rate floor of 0.50 to 1.00 % at these steps, which bounds the reductions above"
	if got := warmupFloorLine(cs, all); got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
	if got := warmupFloorLine(cs[2:], all); got != "" {
		t.Errorf("no workload in the mean: got %q, want no line", got)
	}
	// Without the oracle the line names the loaders run (it said "the
	// oracle too" of a run without it), and one miss is "1 time".
	cs[0].WarmupMisses, cs[1].WarmupMisses = 1, 1
	want = "every loader run (torch, helix) misses 1 time, by workload, in the warm-up"
	if got := warmupFloorLine(cs, []string{"torch", "helix"}); !strings.HasPrefix(got, want) {
		t.Errorf("torch and helix, one miss: got %q\nwant it to start %q", got, want)
	}
}

// TestGoalsSayTorchWasNotRun checks the goals' left-out count when torch
// is not among the loaders: every workload is left out for want of it,
// not because "torch had nothing to reduce".
func TestGoalsSayTorchWasNotRun(t *testing.T) {
	r := &Report{Results: []eval.Result{{Workload: "A", Loader: "helix"}, {Workload: "B", Loader: "helix"}},
		Comparisons: []Comparison{{Workload: "A"}, {Workload: "B"}}}
	for _, g := range goals(r)[:2] {
		if !strings.Contains(g.Figure, "(2 left out: torch was not run)") || strings.Contains(g.Figure+g.Note, "nothing to reduce") {
			t.Errorf("goal %q: figure %q, note %q; want 2 left out as torch was not run", g.Name, g.Figure, g.Note)
		}
	}
}

// TestSteadySummaryNothingToReduce checks the summary and goal notes when
// torch misses nothing after the warm-up on any workload (a real run of
// one workload often): they say there is no workload to average over,
// not "undefined ... over 0 workloads".
func TestSteadySummaryNothingToReduce(t *testing.T) {
	r := reportOf([]eval.Setup{{Workload: "U", Skew: workload.Uniform, Horizon: 16}}, func(x eval.Result) bool { return x.Workload == "U" })
	checkText(t, r, []string{
		"  steady state (without the warm-up), helix vs torch: no workload with misses to reduce, 100.0 % less wait (over 1 workload)\n",
		"deadline-miss reduction vs torch: no workload to average over (1 left out: torch had nothing to reduce)",
		"note: steady state (without the warm-up; not judged): no workload to average over (1 left out: ",
	}, []string{"undefined"})
}

// TestSummaryWithoutTorchOrOracle checks the summary when --loaders left
// torch and the oracle out: each null key says which was not run, there
// is no steady-state line against torch, and the oracle goal does not
// blame --real in a simulated run.
func TestSummaryWithoutTorchOrOracle(t *testing.T) {
	r := reportOf([]eval.Setup{{Workload: "A", Skew: workload.Skewed, Imbalance: 0.5, Horizon: 16}, {Workload: "U", Skew: workload.Uniform, Horizon: 16}},
		func(x eval.Result) bool { return x.Loader != "torch" && x.Loader != "oracle" })
	checkText(t, r, []string{
		"  miss_reduction_vs_torch_mean         null: torch was not run\n",
		"  throughput_ratio_vs_torch_max        null: torch was not run\n",
		"  oracle_gap_mean                      null: the oracle was not run\n",
		"GPU wait near the oracle's: no workload with the oracle run (goal",
	}, []string{"steady state (without the warm-up), helix vs torch", "undefined", "--real has none", " - of wall"})
}
