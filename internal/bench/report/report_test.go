package report

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/datahelix/datahelix/internal/bench/eval"
	"github.com/datahelix/datahelix/internal/bench/workload"
	"github.com/datahelix/datahelix/internal/costmodel"
	"github.com/datahelix/datahelix/internal/machine"
	"github.com/datahelix/datahelix/internal/step"
)

// handReport builds a report from hand-made results: two skewed
// workloads (A, B) and a uniform one (U).
func handReport() *Report {
	res := func(w, l, skew string, miss, wait, tput float64) eval.Result {
		return eval.Result{Workload: w, Loader: l, Ranks: 8, MissRate: miss, GPUWaitFrac: wait, ThroughputSPS: tput, Mode: "sim", Skew: skew, Steps: 100, Batch: 4}
	}
	ev := &eval.Evaluation{Mode: "sim",
		Setups: []eval.Setup{{Workload: "A", Skew: workload.Skewed, Imbalance: 0.5}, {Workload: "B", Skew: workload.Skewed, Imbalance: 0.9}, {Workload: "U", Skew: workload.Uniform}},
		Results: []eval.Result{
			res("A", "torch", workload.Skewed, 0.50, 0.40, 100), res("A", "local", workload.Skewed, 0.20, 0.10, 150),
			res("A", "static", workload.Skewed, 0.10, 0.05, 160), res("A", "helix", workload.Skewed, 0.05, 0.02, 180),
			res("A", "oracle", workload.Skewed, 0.02, 0.01, 190),
			res("B", "torch", workload.Skewed, 0.40, 0.20, 100), res("B", "local", workload.Skewed, 0.10, 0.05, 120),
			res("B", "static", workload.Skewed, 0.04, 0.02, 130), res("B", "helix", workload.Skewed, 0.10, 0.06, 125),
			res("B", "oracle", workload.Skewed, 0.01, 0.01, 140),
			res("U", "torch", workload.Uniform, 0, 0.01, 100), res("U", "local", workload.Uniform, 0, 0.005, 101),
			res("U", "static", workload.Uniform, 0, 0.005, 101), res("U", "helix", workload.Uniform, 0, 0.005, 100.5),
			res("U", "oracle", workload.Uniform, 0, 0.005, 101),
		}}
	cfg := eval.EvalConfig{Ranks: 8, Steps: 100, Seed: 1, Network: eval.DefaultNetwork}
	return NewReport(machine.Machine{Host: "h", Commit: "c0ffee"}, cfg, ev, workload.DefaultCalibration())
}

func near(p *float64, want float64) bool { return p != nil && math.Abs(*p-want) < 1e-9 }

func TestReportComparisonsAndSummary(t *testing.T) {
	r := handReport()
	a := r.Comparisons[0]
	checks := []struct {
		name string
		got  *float64
		want float64
	}{
		{"A miss vs torch", a.VsTorch.MissReduction, 0.9},
		{"A wait vs torch", a.VsTorch.WaitReduction, 0.95},
		{"A tput vs torch", a.VsTorch.ThroughputRatio, 1.8},
		{"A tput vs local", a.VsLocal.ThroughputRatio, 1.2},
		{"A tput vs static", a.VsStatic.ThroughputRatio, 180.0 / 160},
		{"A oracle gap", a.OracleGap, 0.01},
		{"A oracle bound", a.OracleBound, 0.025},
		{"A helix vs best", a.HelixVsBest, 180.0 / 160},
		// U: torch had no misses: undefined, left out of the mean.
		{"miss mean", r.Summary.MissReductionVsTorchMean, (0.9 + 0.75) / 2},
		{"wait mean", r.Summary.WaitReductionVsTorchMean, (0.95 + 0.7 + 0.5) / 3},
		{"tput vs torch max", r.Summary.ThroughputRatioVsTorchMax, 1.8},
		{"tput vs local min skewed", r.Summary.ThroughputRatioVsLocalMinSkewed, 125.0 / 120},
		{"tput vs static min skewed", r.Summary.ThroughputRatioVsStaticMinSkewed, 125.0 / 130},
		{"oracle gap mean", r.Summary.OracleGapMean, (0.01 + 0.05 + 0) / 3},
		{"most skewed ratio", r.Summary.ThroughputRatioVsTorchMostSkewed, 1.25},
		{"uniform shortfall", r.Summary.UniformShortfallMax, 1 - 100.5/101},
		// The oracle in helix's place: A 0.02 vs 0.5, B 0.01 vs 0.4 misses
		// (U left out as for helix); waits 0.01/0.4, 0.01/0.2, 0.005/0.01.
		{"oracle miss mean", r.Summary.OracleMissReductionVsTorchMean, (0.96 + 0.975) / 2},
		{"oracle wait mean", r.Summary.OracleWaitReductionVsTorchMean, (0.975 + 0.95 + 0.5) / 3},
		{"oracle tput max", r.Summary.OracleThroughputRatioVsTorchMax, 1.9},
	}
	for _, c := range checks {
		if !near(c.got, c.want) {
			got := "nil"
			if c.got != nil {
				got = strconv.FormatFloat(*c.got, 'g', -1, 64)
			}
			t.Errorf("%s = %s, want %v", c.name, got, c.want)
		}
	}
	if r.Comparisons[2].VsTorch.MissReduction != nil {
		t.Error("U: miss reduction vs a torch without misses must be undefined")
	}
	if r.Summary.MostSkewed != "B" || r.Summary.MissReductionWorkloads != 2 || r.Summary.WaitReductionWorkloads != 3 {
		t.Errorf("summary %+v: want most skewed B (highest imbalance), 2 miss and 3 wait workloads", r.Summary)
	}
}

func TestReportGoals(t *testing.T) {
	r := handReport()
	want := map[string]string{
		"deadline-miss reduction vs torch":                                GoalPass,  // 82.5 %
		"GPU-wait reduction vs torch":                                     GoalShort, // 71.7 %
		"throughput vs torch on the most skewed workload":                 GoalShort, // 1.25x on B
		"ahead of local and static on every skewed workload (throughput)": GoalShort, // B behind static
		"within 2 % of the best loader on uniform workloads":              GoalPass,
		"GPU wait near the oracle's":                                      GoalShort, // B: 6 % > 2.5 %
		"simulator agrees with real runs (validation)":                    GoalNA,
		"scale: 8192 ranks, B=16, 100 steps simulated":                    GoalNA,
	}
	for _, g := range r.Goals {
		if w, ok := want[g.Name]; !ok || g.Status != w {
			t.Errorf("goal %q: %s (%s), want %s", g.Name, g.Status, g.Figure, w)
		}
		delete(want, g.Name)
	}
	if len(want) > 0 {
		t.Errorf("goals missing: %v", want)
	}
	r.AddSection(Section{Name: "scale", Status: SectionMeasured, Scale: &eval.ScaleResult{Ranks: 8192, Batch: 16, Steps: 100, ElapsedS: 42, PlanUSP50: 19000}})
	if g := r.Goals[len(r.Goals)-1]; g.Status != GoalPass || !strings.Contains(g.Figure, "42.0 s") {
		t.Errorf("scale goal after a 42 s run: %s %q", g.Status, g.Figure)
	}
	// The plan's p50 is part of the goal (issue 27 §5).
	r.Sections = r.Sections[:len(r.Sections)-1]
	r.AddSection(Section{Name: "scale", Status: SectionMeasured, Scale: &eval.ScaleResult{Ranks: 8192, Batch: 16, Steps: 100, ElapsedS: 42, PlanUSP50: 25000}})
	if g := r.Goals[len(r.Goals)-1]; g.Status == GoalPass {
		t.Errorf("scale goal with a 25 ms plan p50: %s %q, want it short of 20 ms", g.Status, g.Figure)
	}
}

// TestUniformGoalFigure checks the uniform goal's figure when helix is
// behind the best other loader and when it is ahead (no negative
// shortfall).
func TestUniformGoalFigure(t *testing.T) {
	const name = "within 2 % of the best loader on uniform workloads"
	tests := []struct {
		helixTput float64
		status    string
		want      string
	}{
		{100.5, GoalPass, "worst shortfall 0.5 % over 1 uniform workload"},
		{90, GoalShort, "worst shortfall 10.9 % over 1 uniform workload; short on: U (0.891x local)"},
		{250, GoalPass, "no shortfall: helix at least as fast as the best other loader on all 1 uniform workload (its lowest ratio 2.475x)"},
	}
	for _, tt := range tests {
		r := handReport()
		for i := range r.Results {
			if x := &r.Results[i]; x.Workload == "U" && x.Loader == "helix" {
				x.ThroughputSPS = tt.helixTput
			}
		}
		r = NewReport(r.Machine, eval.EvalConfig{Ranks: 8, Steps: 100}, &eval.Evaluation{Mode: "sim", Setups: r.Workloads, Results: r.Results}, workload.DefaultCalibration())
		i := slices.IndexFunc(r.Goals, func(g Goal) bool { return g.Name == name })
		if g := r.Goals[i]; g.Status != tt.status || g.Figure != tt.want {
			t.Errorf("helix at %v samples/s: %s %q, want %s %q", tt.helixTput, g.Status, g.Figure, tt.status, tt.want)
		}
	}
}

// TestValidationGoal checks the goal that says whether the simulator
// agreed with the real runs: not run, failed, some or all agreeing.
func TestValidationGoal(t *testing.T) {
	tests := []struct {
		name   string
		sec    *Section
		status string
		figure string
	}{
		{"not run", nil, GoalNA, "not run (datahelix bench --sections validation)"},
		{"failed", &Section{Name: "validation", Status: SectionFailed, Note: "mpirun not found"}, GoalNA, "not measured: the validation section failed"},
		{"nothing compared", &Section{Name: "validation", Status: SectionSkipped}, GoalNA, "not measured: no setup ran both simulated and real"},
		{"3 of 6", &Section{Name: "validation", Status: SectionMeasured, Agreement: &Agreement{Agree: 3, Runs: 6}}, GoalShort, "3 of 6 simulated runs agree with the real ones"},
		{"all", &Section{Name: "validation", Status: SectionMeasured, Agreement: &Agreement{Agree: 6, Runs: 6}}, GoalPass, "6 of 6 simulated runs agree with the real ones"},
	}
	for _, tt := range tests {
		r := handReport()
		if tt.sec != nil {
			r.AddSection(*tt.sec)
		}
		i := slices.IndexFunc(r.Goals, func(g Goal) bool { return g.Name == "simulator agrees with real runs (validation)" })
		if i < 0 {
			t.Fatalf("%s: no validation goal in %v", tt.name, r.Goals)
		}
		if g := r.Goals[i]; g.Status != tt.status || g.Figure != tt.figure {
			t.Errorf("%s: %s %q, want %s %q", tt.name, g.Status, g.Figure, tt.status, tt.figure)
		}
	}
}

// TestReportJSONKeys checks the keys the issue asks of the JSON.
func TestReportJSONKeys(t *testing.T) {
	var buf bytes.Buffer
	if err := handReport().WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatalf("report JSON does not parse: %v", err)
	}
	for _, k := range []string{"machine", "commit", "results", "summary", "goals", "sections", "workloads", "comparisons"} {
		if _, ok := doc[k]; !ok {
			t.Errorf("top-level key %q missing", k)
		}
	}
	if doc["commit"] != "c0ffee" {
		t.Errorf("commit = %v", doc["commit"])
	}
	sum := doc["summary"].(map[string]any)
	for _, k := range []string{"miss_reduction_vs_torch_mean", "wait_reduction_vs_torch_mean", "throughput_ratio_vs_torch_max", "throughput_ratio_vs_local_min_skewed", "oracle_gap_mean"} {
		if v, ok := sum[k].(float64); !ok || math.IsNaN(v) {
			t.Errorf("summary.%s = %v, want a number", k, sum[k])
		}
	}
	results := doc["results"].([]any)
	if len(results) != 15 {
		t.Fatalf("%d results, want 15", len(results))
	}
	for _, x := range results {
		m := x.(map[string]any)
		for _, k := range []string{"workload", "loader", "ranks", "miss_rate", "gpu_wait_frac", "throughput_sps", "bytes_moved_per_step"} {
			if _, ok := m[k]; !ok {
				t.Fatalf("result %v lacks %q", m, k)
			}
		}
	}
}

func readCSV(t *testing.T, path string) [][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return rows
}

func TestReportCSV(t *testing.T) {
	r := handReport()
	r.AddSection(Section{Name: "planner", Status: SectionMeasured, Columns: []string{"ranks", "plan_us"}, Rows: [][]any{{8, 12.5}, {16, 20.0}}})
	dir := t.TempDir()
	if err := r.WriteCSV(dir); err != nil {
		t.Fatal(err)
	}
	rows := readCSV(t, filepath.Join(dir, "results.csv"))
	if !slices.Equal(rows[0], ResultColumns) || len(rows) != 16 {
		t.Fatalf("results.csv: header %v and %d rows, want %v and 16", rows[0], len(rows), ResultColumns)
	}
	for _, row := range rows[1:] {
		for i, col := range ResultColumns {
			if col == "miss_rate" || col == "gpu_wait_frac" || col == "throughput_sps" {
				if _, err := strconv.ParseFloat(row[i], 64); err != nil {
					t.Errorf("results.csv %s = %q: %v", col, row[i], err)
				}
			}
		}
	}
	if rows[4][0] != "A" || rows[4][1] != "helix" || rows[4][11] != "0" {
		t.Errorf("results.csv row 4 = %v", rows[4])
	}
	rows = readCSV(t, filepath.Join(dir, "comparisons.csv"))
	if !slices.Equal(rows[0], ComparisonColumns) || len(rows) != 4 {
		t.Fatalf("comparisons.csv: header %v, %d rows", rows[0], len(rows))
	}
	if rows[3][2] != "" {
		t.Errorf("U's undefined miss reduction is %q, want an empty cell", rows[3][2])
	}
	rows = readCSV(t, filepath.Join(dir, "section_planner.csv"))
	if len(rows) != 3 || rows[2][1] != "20" {
		t.Errorf("section_planner.csv = %v", rows)
	}
	if rows := readCSV(t, filepath.Join(dir, "goals.csv")); len(rows) != 9 || rows[7][0] != "simulator agrees with real runs (validation)" {
		t.Errorf("goals.csv has %d rows (%v), want a header and 8 goals, the validation's 7th", len(rows), rows)
	}
}

// TestReportCalibrationCoverage checks that a report whose calibration
// did not measure a workload's presets says so in its note and JSON.
func TestReportCalibrationCoverage(t *testing.T) {
	ws, err := workload.SelectWorkloads("kinetics,text")
	if err != nil {
		t.Fatal(err)
	}
	cal := measuredCalibration()
	cal.Presets = []string{"text"}
	ev := &eval.Evaluation{Mode: "sim", Setups: []eval.Setup{{Workload: "kinetics", Skew: workload.Uniform}, {Workload: "text", Skew: workload.Uniform}}}
	r := NewReport(machine.Machine{Host: "h"}, eval.EvalConfig{Workloads: ws, Ranks: 8, Steps: 10}, ev, cal)
	if !slices.Equal(r.Calibration.Uncovered, []string{"kinetics"}) || !slices.Equal(r.Calibration.Presets, []string{"text"}) {
		t.Errorf("calibration info %+v: want presets [text], uncovered [kinetics]", r.Calibration)
	}
	if !strings.Contains(r.Calibration.Note, "not kinetics") {
		t.Errorf("note %q does not say kinetics was not calibrated", r.Calibration.Note)
	}
	r = NewReport(machine.Machine{Host: "h"}, eval.EvalConfig{Workloads: ws[1:], Ranks: 8, Steps: 10}, ev, cal)
	if r.Calibration.Uncovered != nil || r.Calibration.Note != "" {
		t.Errorf("text alone on a text calibration: %+v, want nothing uncovered and no note", r.Calibration)
	}
}

func TestReportText(t *testing.T) {
	r := handReport()
	r.AddSection(Section{Name: "allgather", Title: "Allgather", Status: SectionFailed, Note: "mpirun not found"})
	var buf bytes.Buffer
	if err := r.WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"FALL SHORT", "PASS", "miss_reduction_vs_torch_mean", "82.5 %", "== Allgather [failed] ==", "-90.0%",
		// Helix's reductions versus static too, as the spec asks (B: 0.10
		// misses against static's 0.04).
		"miss vs static  wait vs static  tput vs static", "+150.0%",
		// What the wait is, and is not.
		"it leaves out the time a GPU idles in the gradient allreduce\n waiting for a slower rank",
		// The oracle's figures are no upper bound: helix can beat them.
		"the oracle (perfect knowledge, free transfers) in helix's place: "} {
		if !strings.Contains(out, want) {
			t.Errorf("text report lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "the most any loader gets") {
		t.Errorf("text report calls the oracle's figures an upper bound:\n%s", out)
	}
}

// TestReportTextRealHasNoSimulatorSettings checks that a report of real
// runs does not print the simulator's network and true-cost lines.
func TestReportTextRealHasNoSimulatorSettings(t *testing.T) {
	for _, mode := range []string{"sim", "real"} {
		r := handReport()
		r.Mode = mode
		var buf bytes.Buffer
		if err := r.WriteText(&buf); err != nil {
			t.Fatal(err)
		}
		out := buf.String()
		for _, line := range []string{"network: ", "true cost = "} {
			if got := strings.Contains(out, line); got != (mode == "sim") {
				t.Errorf("mode %s: report has %q: %v, want %v", mode, line, got, mode == "sim")
			}
		}
	}
}

// simReport is the report of a simulation of cfg without sections, as
// datahelix bench builds it (bench.BuildReport).
func simReport(t *testing.T, cfg eval.EvalConfig, m machine.Machine) *Report {
	t.Helper()
	cfg.Calibration = workload.DefaultCalibration()
	ev, err := eval.RunSim(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Network = eval.DefaultNetwork
	return NewReport(m, cfg, ev, cfg.Calibration)
}

// smallRun is the tests' evaluation: 2 workloads, 8 ranks, 30 steps,
// every loader.
func smallRun(t *testing.T) *Report {
	t.Helper()
	ws, err := workload.SelectWorkloads("kinetics,video_image_mix")
	if err != nil {
		t.Fatal(err)
	}
	return simReport(t, eval.EvalConfig{Workloads: ws, Ranks: 8, Steps: 30, Seed: 3, KeepTimelines: true}, machine.Machine{Host: "test", Commit: "c"})
}

// stripTimings zeroes the fields that measure this machine's speed.
func stripTimings(r *Report) {
	r.ElapsedS = 0
	for i := range r.Results {
		r.Results[i].ElapsedS = 0
		r.Results[i].PlanUSP50 = 0
	}
}

func TestSmallEvaluationDeterministic(t *testing.T) {
	t0 := time.Now()
	a := smallRun(t)
	elapsed := time.Since(t0)
	b := smallRun(t)
	stripTimings(a)
	stripTimings(b)
	var ja, jb bytes.Buffer
	if err := a.WriteJSON(&ja); err != nil {
		t.Fatal(err)
	}
	b.WriteJSON(&jb)
	if ja.String() != jb.String() {
		t.Error("two runs of the same evaluation wrote different JSON")
	}
	t.Logf("one evaluation (2 workloads x 6 loaders, 8 ranks, 30 steps): %v", elapsed)
	if len(a.Results) != 12 {
		t.Fatalf("%d results, want 12", len(a.Results))
	}
	// Every loader trains the same global batches.
	for _, w := range []string{"kinetics", "video_image_mix"} {
		torch := find(a.Results, w, step.KindTorch)
		for _, x := range a.Results {
			if x.Workload == w && x.BatchesHash != torch.BatchesHash {
				t.Errorf("%s: %s trained other batches than torch (%s vs %s)", w, x.Loader, x.BatchesHash, torch.BatchesHash)
			}
			if x.Workload == w && (x.ThroughputSPS <= 0 || x.GPUWaitFrac < 0 || x.GPUWaitFrac > 1 || x.MissRate < 0 || x.MissRate > 1) {
				t.Errorf("%s/%s: implausible %+v", w, x.Loader, x)
			}
		}
	}
	// Only planned loaders move bytes.
	for _, x := range a.Results {
		planned := x.Loader != "torch" && x.Loader != "local"
		if !planned && x.BytesMovedPerStep != 0 {
			t.Errorf("%s/%s moved %v bytes per step", x.Workload, x.Loader, x.BytesMovedPerStep)
		}
	}
	if len(a.Timelines) != 4 {
		t.Errorf("%d timelines kept, want torch and helix of 2 workloads", len(a.Timelines))
	}
	// The provisioning rule holds for what ran: the GPU model the
	// simulations used takes the rule's g on the mean batch, and the
	// lockstep factor is measured (1 for the video-only kinetics, above 1
	// for video_image_mix, whose ranks read video or image shards).
	for _, s := range a.Workloads {
		w, _ := workload.SelectWorkloads(s.Workload)
		g := float64(w[0].GPUStep(s.MeanCostUS, s.Batch, s.Ranks)) / 1e6
		mean := s.GPUBaseMS + float64(s.Batch)*(s.GPUSampleMS+s.MeanFrames*s.GPUFrameMS+s.MeanTokens*s.GPUTokenUS/1000)
		if d := g - mean; d > 1e-3 || d < -1e-3 {
			t.Errorf("%s: the GPU model takes %v ms on the mean batch, the rule gives %v", s.Workload, mean, g)
		}
		if (s.Workload == "kinetics") != (s.LockstepFactor == 1) || s.LockstepFactor < 1 {
			t.Errorf("%s: lockstep factor %v", s.Workload, s.LockstepFactor)
		}
	}
}

// TestSteadyUndefinedWithoutSteadySteps checks that a run not longer
// than its warm-up has undefined steady figures (null in JSON, empty in
// CSV, as datahelix run's summary), not 0, which read as a perfect
// steady state; and that a longer run has them.
func TestSteadyUndefinedWithoutSteadySteps(t *testing.T) {
	ws, err := workload.SelectWorkloads("kinetics")
	if err != nil {
		t.Fatal(err)
	}
	h := eval.Horizon(ws[0])
	for _, tt := range []struct {
		steps       int
		steadySteps int
	}{{h / 2, 0}, {h, 0}, {h + 4, 4}} {
		r := simReport(t, eval.EvalConfig{Workloads: ws, Loaders: []step.Kind{step.KindTorch, step.KindHelix}, Ranks: 4, Steps: tt.steps, Seed: 1}, machine.Machine{})
		var js bytes.Buffer
		if err := r.WriteJSON(&js); err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Results []map[string]any `json:"results"`
		}
		if err := json.Unmarshal(js.Bytes(), &doc); err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		if err := r.WriteCSV(dir); err != nil {
			t.Fatal(err)
		}
		rows := readCSV(t, filepath.Join(dir, "results.csv"))
		col := func(name string) int { return slices.Index(ResultColumns, name) }
		for i, x := range r.Results {
			if x.SteadySteps != tt.steadySteps || x.HasSteady() != (tt.steadySteps > 0) {
				t.Errorf("%d steps, %s: %d steady steps, want %d", tt.steps, x.Loader, x.SteadySteps, tt.steadySteps)
			}
			for _, k := range []string{"steady_miss_rate", "steady_gpu_wait_frac"} {
				v, ok := doc.Results[i][k]
				if !ok || (v == nil) != (tt.steadySteps == 0) {
					t.Errorf("%d steps, %s: JSON %s = %v (present %v), want null exactly when there are no steady steps", tt.steps, x.Loader, k, v, ok)
				}
				if cell := rows[i+1][col(k)]; (cell == "") != (tt.steadySteps == 0) {
					t.Errorf("%d steps, %s: CSV %s = %q, want empty exactly when there are no steady steps", tt.steps, x.Loader, k, cell)
				}
			}
			if got := doc.Results[i]["steady_steps"]; got != float64(tt.steadySteps) {
				t.Errorf("%d steps, %s: JSON steady_steps = %v, want %d", tt.steps, x.Loader, got, tt.steadySteps)
			}
		}
	}
}

// measuredCalibration is a calibration measured on a made-up machine
// (the workload package's tests build the same).
func measuredCalibration() *costmodel.Calibration {
	c := workload.DefaultCalibration()
	c.Source, c.Note = "measured", ""
	c.MeasuredOn = machine.Machine{Host: "h", CPU: "c", Cores: 2, OS: "linux", Arch: "amd64", Commit: "abc", DecodeCommit: "0123456789abcdef"}
	c.MAPE["video/h264"] = 0.12
	c.BitsPerPixel["jpeg/life/q3"] = 3.5
	c.Presets = slices.Clone(workload.CalibratePresets)
	return c
}
