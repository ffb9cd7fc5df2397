package realrun

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/datahelix/datahelix/internal/bench/eval"
	"github.com/datahelix/datahelix/internal/bench/report"
	"github.com/datahelix/datahelix/internal/metrics"
)

func TestExtendValidation(t *testing.T) {
	r := func(l string, wait, miss float64, hash string) eval.Result {
		return eval.Result{Workload: "k", Loader: l, Ranks: 4, GPUWaitFrac: wait, MissRate: miss, BatchesHash: hash}
	}
	real := []eval.Result{r("torch", 0.20, 0.30, "a"), r("helix", 0.10, 0.05, "b")}
	sim := []eval.Result{r("torch", 0.10, 0.10, "a"), r("helix", 0.10, 0.05, "x")}
	meas := []eval.Result{r("torch", 0.22, 0.25, "a"), r("helix", 0.30, 0.05, "b")}
	avail := []eval.Result{r("torch", 0.21, 0.31, "a"), r("helix", 0.11, 0.06, "b")}
	s := report.ValidationSection(sim, real)
	extendValidation(s, real, sim, map[[2]string][3]float64{{"k", "torch"}: {0.5, 1.3, 12000}, {"k", "helix"}: {-1, 0, 9000}},
		validationDiagnostic{"measured", "on the costs measured here", meas},
		validationDiagnostic{"unscaled", "on the model's costs unscaled", avail},
		validationDiagnostic{"process", "fitted to the whole process's CPU time", avail[:1]})
	if len(s.Rows) != 2 {
		t.Fatalf("%d rows", len(s.Rows))
	}
	want := [][]any{
		{false, true, 0.5, 1.3, int64(12000), 0.22, 0.25, true, 0.21, 0.31, true, 0.21, 0.31, true},
		{true, false, "-", "-", int64(9000), 0.30, 0.05, false, 0.11, 0.06, true, "-", "-", "-"},
	}
	for i, row := range s.Rows {
		if len(row) != len(s.Columns) {
			t.Fatalf("row %d: %d cells for %d columns", i, len(row), len(s.Columns))
		}
		// Columns 10-13: the job's steady figures, none without steps
		// after the warm-up.
		if !slices.Equal(row[10:14], []any{"-", "-", "-", "-"}) {
			t.Errorf("row %d: steady job figures %v, want - without steady steps", i, row[10:14])
		}
		got := append([]any{row[9]}, row[14:]...)
		for k := range want[i] {
			if got[k] != want[i][k] {
				t.Errorf("row %d (%s): column %d = %v, want %v", i, row[1], k, got[k], want[i][k])
			}
		}
	}
	if !strings.Contains(s.Headline, "1 of 2 simulated runs agree") || !strings.Contains(s.Headline, "measured here 1 of 2") || !strings.Contains(s.Headline, "model's costs unscaled 2 of 2") ||
		!strings.Contains(s.Headline, "whole process's CPU time 1 of 2") {
		t.Errorf("headline %q", s.Headline)
	}
}

func TestAddRealSpread(t *testing.T) {
	s := &report.Section{Columns: []string{"workload", "loader"}, Rows: [][]any{{"k", "torch"}, {"k", "helix"}}}
	addRealSpread(s, map[[2]string][]eval.Result{{"k", "torch"}: {{GPUWaitFrac: 0.1, MissRate: 0.2}, {GPUWaitFrac: 0.3, MissRate: 0.25}}},
		map[[2]string][]eval.Result{{"k", "torch"}: {{GPUWaitFrac: 0.15, MissRate: 0.125}, {GPUWaitFrac: 0.25, MissRate: 0.5}}})
	if want := []any{"k", "torch", "0.1 0.3", "0.2 0.25"}; !slices.Equal(s.Rows[0][:4], want) || math.Abs(s.Rows[0][4].(float64)-1) > 1e-12 ||
		!slices.Equal(s.Rows[0][5:], []any{"0.15 0.25", "0.125 0.5"}) {
		t.Errorf("row 0 = %v, want %v, a spread of 1 and the simulated runs", s.Rows[0], want)
	}
	if want := []any{"k", "helix", "-", "-", "-", "-", "-"}; !slices.Equal(s.Rows[1], want) {
		t.Errorf("row 1 = %v, want %v", s.Rows[1], want)
	}
	if !strings.Contains(s.Headline, "differ by up to 100 %") {
		t.Errorf("headline %q", s.Headline)
	}
}

func TestAddMachines(t *testing.T) {
	s := &report.Section{Columns: []string{"workload", "loader"}, Rows: [][]any{{"k", "torch"}, {"k", "helix"}}}
	addMachines(s, map[[2]string][]simMachine{{"k", "torch"}: {{slowdown: []float64{1.5, 2.25}}, {slowdown: []float64{1, 3}, others: 0.75}}})
	if s.Rows[0][2] != "1.50 2.25 / 1.00 3.00" || s.Rows[0][3] != "0.00 / 0.75" || s.Rows[1][2] != "-" || s.Rows[1][3] != "-" {
		t.Errorf("rows %v", s.Rows)
	}
}

func TestDecodeShare(t *testing.T) {
	a := []metrics.StepRecord{{CPUUS: 1000, DecodeCPUUS: 600}, {CPUUS: 500, DecodeCPUUS: 300}}
	b := []metrics.StepRecord{{CPUUS: 500, DecodeCPUUS: 100}}
	if got := decodeShare(a, b); math.Abs(got-0.5) > 1e-12 {
		t.Errorf("share %v, want 1000/2000", got)
	}
	if got := decodeShare([]metrics.StepRecord{{CPUUS: 1000}}); got != 0 {
		t.Errorf("share without decode records %v, want 0", got)
	}
	s := &report.Section{Columns: []string{"workload", "loader"}, Rows: [][]any{{"k", "torch"}, {"k", "helix"}}}
	addColumn(s, "decode_cpu_share", map[[2]string]any{{"k", "torch"}: 0.5})
	if s.Columns[2] != "decode_cpu_share" || s.Rows[0][2] != 0.5 || s.Rows[1][2] != "-" {
		t.Errorf("section %v %v", s.Columns, s.Rows)
	}
}
