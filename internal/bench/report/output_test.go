package report

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/datahelix/datahelix/internal/bench/eval"
	"github.com/datahelix/datahelix/internal/machine"
)

// TestReportFilesReplaceEarlierOnes checks that writing a report into a
// directory that holds an earlier one removes the earlier report's files
// (so a section that failed this time, or a workload not run, leaves no
// file that looks current) and touches no other file.
func TestReportFilesReplaceEarlierOnes(t *testing.T) {
	dir := t.TempDir()
	earlier := []string{"results.csv", "goals.csv", "summary.csv", "section_planner.csv", "section_scale.csv", "gpu_wait.png", "wait_old.png", "timeline_old.png"}
	others := []string{"notes.txt", "plot.png", "section_x.txt", "my_results.csv", "results.csv.bak", "wait_old.jpg"}
	for _, n := range append(slices.Clone(earlier), others...) {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("earlier"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "wait_dir.png"), 0o755); err != nil {
		t.Fatal(err)
	}
	r := handReport()
	r.AddSection(Section{Name: "planner", Status: SectionFailed, Note: "it failed this time"})
	if err := r.WriteCSV(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := r.WritePlots(dir, ""); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	want := append(slices.Clone(others), "wait_dir.png", "results.csv", "comparisons.csv", "goals.csv", "summary.csv", "gpu_wait.png", "wait_A.png", "wait_B.png", "wait_U.png")
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("directory holds %v, want %v", got, want)
	}
	for _, n := range []string{"results.csv", "goals.csv", "summary.csv", "gpu_wait.png"} {
		if data, _ := os.ReadFile(filepath.Join(dir, n)); string(data) == "earlier" {
			t.Errorf("%s is the earlier report's", n)
		}
	}
	for _, n := range others {
		if data, _ := os.ReadFile(filepath.Join(dir, n)); string(data) != "earlier" {
			t.Errorf("%s was changed: %q", n, data)
		}
	}
}

// TestRunContext checks the line every figure's title carries, so that a
// figure alone says how it was made.
func TestRunContext(t *testing.T) {
	for _, tc := range []struct {
		r    Report
		want string
	}{
		{Report{Mode: "sim", Ranks: 8, Steps: 200, Seed: 1, Machine: machine.Machine{Commit: "0123456789abcdef0123"}},
			"simulated, 8 ranks, 200 steps, seed 1, commit 0123456789ab"},
		{Report{Mode: "real", Ranks: 1, Steps: 20, Seed: 7, Machine: machine.Machine{Commit: "abc", Dirty: true}},
			"real runs, 1 rank, 20 steps, seed 7, commit abc (uncommitted changes)"},
	} {
		if got := tc.r.runContext(); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
}

// TestUnitsAndSummaryCSV checks the JSON's units object and summary.csv:
// one row with how the run was made and every summary field.
func TestUnitsAndSummaryCSV(t *testing.T) {
	r := handReport()
	r.Machine.CommitSource, r.CommitSource = "binary", "binary"
	var buf bytes.Buffer
	if err := r.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Units        map[string]string `json:"units"`
		CommitSource string            `json:"commit_source"`
		Results      []map[string]any  `json:"results"`
	}
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{"gpu_wait_s": "rank-seconds (sum over ranks)", "bytes_moved_per_step": "bytes, mean per step",
		"miss_rate": "fraction of rank-steps"} {
		if !strings.HasPrefix(doc.Units[k], want) {
			t.Errorf("units.%s = %q, want it to start %q", k, doc.Units[k], want)
		}
	}
	if doc.CommitSource != "binary" {
		t.Errorf("commit_source = %q", doc.CommitSource)
	}
	// plan_us_p50 is measured only in the scale section: null, not 0.
	for _, x := range doc.Results {
		if v, ok := x["plan_us_p50"]; !ok || v != nil {
			t.Fatalf("plan_us_p50 = %v (present %v), want null when not measured", v, ok)
		}
	}
	r.Results[0].PlanUSP50 = 12.5
	buf.Reset()
	if err := r.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil || doc.Results[0]["plan_us_p50"] != 12.5 {
		t.Errorf("a measured plan_us_p50: %v (%v), want 12.5", doc.Results[0]["plan_us_p50"], err)
	}

	dir := t.TempDir()
	if err := r.WriteCSV(dir); err != nil {
		t.Fatal(err)
	}
	rows := readCSV(t, filepath.Join(dir, "summary.csv"))
	if len(rows) != 2 || len(rows[0]) != len(rows[1]) {
		t.Fatalf("summary.csv = %v, want a header and one row", rows)
	}
	cell := map[string]string{}
	for i, k := range rows[0] {
		cell[k] = rows[1][i]
	}
	for k, want := range map[string]string{"seed": "1", "commit": "c0ffee", "commit_source": "binary", "mode": "sim",
		"steady_step_miss_reduction_vs_torch_mean": "0.9", "most_skewed": "B", "steady_stall_reduction_workloads": "2",
		"skewed_workloads": "A B", "seeds": "1", "steps": "100"} {
		if cell[k] != want {
			t.Errorf("summary.csv %s = %q, want %q", k, cell[k], want)
		}
	}
	if !strings.HasPrefix(cell["machine"], "h: ") {
		t.Errorf("summary.csv machine = %q", cell["machine"])
	}
	if n := len(slices.DeleteFunc(slices.Clone(rows[0]), func(c string) bool { return c != "steps" })); n != 1 {
		t.Errorf("summary.csv has two steps columns: %v", rows[0])
	}
	// A figure no workload defines is an empty cell: no uniform workload
	// with another loader.
	r = reportOf(func(x eval.Result) bool { return x.Workload != "U" })
	if err := r.WriteCSV(dir); err != nil {
		t.Fatal(err)
	}
	rows = readCSV(t, filepath.Join(dir, "summary.csv"))
	if i := slices.Index(rows[0], "uniform_regression_max"); i < 0 || rows[1][i] != "" {
		t.Errorf("summary.csv uniform_regression_max without a uniform workload: %v", rows)
	}
}
