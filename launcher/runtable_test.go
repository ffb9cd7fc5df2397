package launcher

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/datahelix/datahelix/internal/cli/clitest"
	"github.com/datahelix/datahelix/internal/metrics"
)

// TestChange checks the comparison of two fractions as printed: both
// values, and the change between them as rounded for print.
func TestChange(t *testing.T) {
	for _, tt := range []struct {
		a, b float64
		want string
	}{
		{0.007, 0.014, "GPU wait 0.7% → 1.4% (+100.0%)"},
		{0.0006, 0.0012, "GPU wait 0.1% → 0.1% (+0.0%)"}, // not "+100.0%"
		{0.5, 0.05, "GPU wait 50.0% → 5.0% (-90.0%)"},
		{0.00001, 0.00004, "GPU wait 0.0% → 0.0% (same)"},
		{0.2625, 0.0625, "GPU wait 26.2% → 6.2% (-76.3%)"}, // as the table prints 63/240 and 5/80
	} {
		if got := change("GPU wait", tt.a, tt.b); got != tt.want {
			t.Errorf("change(%v, %v) = %q, want %q", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestReduction(t *testing.T) {
	tests := []struct {
		a, b float64
		want string
	}{
		{0.5, 0.25, "-50.0%"},
		{0.1, 0.15, "+50.0%"},
		{0, 0, "same"},
		{0.00001, 0.00006, "same"}, // both print as 0.0%: not "+500.0%"
		{0.0001, 0.2, "more"},
		{0.2, 0.0001, "-100.0%"},
	}
	for _, tt := range tests {
		if got := reduction(tt.a, tt.b); got != tt.want {
			t.Errorf("reduction(%v, %v) = %q, want %q", tt.a, tt.b, got, tt.want)
		}
	}
}

// TestPrintTableSteadyWindow checks the comparison after the warm-up: no
// ratio over a window of one or two steps (10 steps), nor of waits below
// the table's precision (0.00006 is "same", not "+500%"), as
// testdata/print_table_steady_window.golden shows.
func TestPrintTableSteadyWindow(t *testing.T) {
	sum := func(loader string, steps int, wait float64) metrics.Summary {
		return metrics.Summary{Loader: loader, Ranks: 2, Steps: steps, WarmupSteps: 8, MissRate: 0.1, GPUWaitFrac: 0.2,
			ThroughputSPS: 10, SteadyMissRate: 0, SteadyGPUWaitFrac: wait, SteadyThroughputSPS: 10}
	}
	f := &runFlags{}
	var b strings.Builder
	for _, tt := range []struct {
		steps int
		waitB float64
	}{
		{10, 0.00006},
		{60, 0.00006},
		{60, 0.01},
	} {
		fmt.Fprintf(&b, "# %d steps, helix's steady GPU wait %s (torch's 0.00001)\n", tt.steps, strconv.FormatFloat(tt.waitB, 'f', -1, 64))
		printTable(&b, []metrics.Summary{sum("torch", tt.steps, 0.00001), sum("helix", tt.steps, tt.waitB)}, 2, f)
	}
	clitest.Golden(t, "print_table_steady_window.golden", b.String())
}
