package bench

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestReportFilesReplaceEarlierOnes checks that writing a report into a
// directory that holds an earlier one removes the earlier report's files
// (so a section that failed this time, or a workload not run, leaves no
// file that looks current) and touches no other file.
func TestReportFilesReplaceEarlierOnes(t *testing.T) {
	dir := t.TempDir()
	earlier := []string{"results.csv", "goals.csv", "section_planner.csv", "section_scale.csv", "gpu_wait.png", "wait_old.png", "timeline_old.png"}
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
	want := append(slices.Clone(others), "wait_dir.png", "results.csv", "comparisons.csv", "goals.csv", "gpu_wait.png", "wait_A.png", "wait_B.png", "wait_U.png")
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("directory holds %v, want %v", got, want)
	}
	for _, n := range []string{"results.csv", "goals.csv", "gpu_wait.png"} {
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
		{Report{Mode: "sim", Ranks: 8, Steps: 200, Seed: 1, Machine: Machine{Commit: "0123456789abcdef0123"}},
			"simulated, 8 ranks, 200 steps, seed 1, commit 0123456789ab"},
		{Report{Mode: "real", Ranks: 1, Steps: 20, Seed: 7, Machine: Machine{Commit: "abc", Dirty: true}},
			"real runs, 1 rank, 20 steps, seed 7, commit abc (uncommitted changes)"},
	} {
		if got := tc.r.runContext(); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
}
