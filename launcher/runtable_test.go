package launcher

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/datahelix/datahelix/internal/cli"
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

// TestPrintDefaultJob checks the default job's output on made-up runs:
// each case's heading, the table of its median run (run 3 on the skewed
// layout, whose helix/torch ratio 1.5 lies between 1.2 and 2.0), the
// spread over the runs (medians of three, with their ranges), and the
// closing line with both layouts' ratios, as
// testdata/print_default_job.golden shows.
func TestPrintDefaultJob(t *testing.T) {
	sum := func(loader string, sps, stall float64) metrics.Summary {
		return metrics.Summary{Loader: loader, Ranks: 4, Steps: 24, WarmupSteps: 8, ThroughputSPS: sps, SteadyThroughputSPS: sps,
			SteadyJobStallFrac: stall, SteadyStepMissRate: 2 * stall, BatchesHash: "00000000000000aa"}
	}
	run := func(torch, helix float64) []metrics.Summary {
		return []metrics.Summary{sum("torch", torch, 0.3), sum("helix", helix, 0.01)}
	}
	cases := []caseResults{
		{runCase: skewedCase, runs: [][]metrics.Summary{run(30, 36), run(20, 40), run(30, 45)}},
		{runCase: uniformCase, runs: [][]metrics.Summary{run(40, 40), run(40, 41), run(40, 39)}},
	}
	f := &runFlags{}
	f.cfg.Batch, f.cfg.Steps, f.cfg.Workers = 2, 24, 1
	var b strings.Builder
	for _, cr := range cases {
		printCase(&b, cr, 4, f)
	}
	printDefaultJob(&b, cases)
	got := b.String()
	for _, want := range []string{"run 3 of 3, the median by throughput", "helix vs torch throughput: 1.50x (1.20x–2.00x)",
		"skewed 1.50x (1.20x–2.00x); uniform 1.00x (0.97x–1.02x)", "torch 30.0 (20.0–30.0)"} {
		if !strings.Contains(got, want) {
			t.Errorf("no %q in\n%s", want, got)
		}
	}
	clitest.Golden(t, "print_default_job.golden", got)
}

// TestResolveDefaultJob: with no --data the job trains both layouts three
// times at batch 2 for 24 steps, unless --batch, --steps or --repeat say
// otherwise; with --data or --checkpoint-dir, one dataset once; a repeat
// with checkpoints, or out of range, is a flag error.
func TestResolveDefaultJob(t *testing.T) {
	for _, tt := range []struct {
		name                         string
		data, ckpt                   string
		repeat                       int
		set                          []string
		cases, repeats, batch, steps int
		err                          bool
	}{
		{name: "default job", cases: 2, repeats: 3, batch: 2, steps: 24},
		{name: "default job, batch and steps given", set: []string{"batch", "steps"}, cases: 2, repeats: 3, batch: 4, steps: 60},
		{name: "default job once", repeat: 1, cases: 2, repeats: 1, batch: 2, steps: 24},
		{name: "data", data: "/d", cases: 1, repeats: 1, batch: 4, steps: 60},
		{name: "data, five times", data: "/d", repeat: 5, cases: 1, repeats: 5, batch: 4, steps: 60},
		{name: "checkpoints", ckpt: "/c", cases: 1, repeats: 1, batch: 4, steps: 60},
		{name: "checkpoints repeated", ckpt: "/c", repeat: 2, err: true},
		{name: "repeat too large", repeat: maxRepeat + 1, err: true},
		{name: "repeat negative", repeat: -1, err: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := &runFlags{data: tt.data, repeat: tt.repeat}
			f.cfg.Batch, f.cfg.Steps, f.cfg.CheckpointDir = 4, 60, tt.ckpt
			err := f.resolveDefaultJob(tt.set)
			if tt.err {
				if !errors.Is(err, cli.ErrUsage) {
					t.Fatalf("err %v, want a usage error", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(f.cases) != tt.cases || f.repeat != tt.repeats || f.cfg.Batch != tt.batch || f.cfg.Steps != tt.steps {
				t.Errorf("%d cases, repeat %d, batch %d, steps %d; want %d, %d, %d, %d",
					len(f.cases), f.repeat, f.cfg.Batch, f.cfg.Steps, tt.cases, tt.repeats, tt.batch, tt.steps)
			}
		})
	}
}
