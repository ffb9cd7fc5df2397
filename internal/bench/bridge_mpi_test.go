package bench

import (
	"context"
	"math"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/datahelix/datahelix/internal/bench/realrun"
	"github.com/datahelix/datahelix/internal/bench/report"
	"github.com/datahelix/datahelix/internal/bench/workload"
	"github.com/datahelix/datahelix/internal/gen"
)

// bridgePython is the interpreter the bridge test trains with, as
// scripts/bench-train.sh does.
const bridgePython = "/usr/bin/python3"

// TestBridgeSectionSmall runs the bridge section end to end at 2 ranks
// for 10 steps on a small generated dataset: examples/train.py under
// datahelix train (mpirun) and under stock torch (torch.distributed.run),
// each simulated; both runs must succeed, and the errors must be those of
// the figures beside them.
func TestBridgeSectionSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("builds datahelix, generates a dataset and trains with mpirun and torch.distributed.run")
	}
	for _, tool := range []string{"mpirun", "ffmpeg"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s", tool)
		}
	}
	if out, err := exec.Command(bridgePython, "-c", "import torch, av, PIL, numpy").CombinedOutput(); err != nil {
		t.Skipf("%s cannot train: %v: %s", bridgePython, err, out)
	}
	data := filepath.Join(t.TempDir(), "data")
	if _, err := gen.Ensure(context.Background(), gen.Config{Preset: "mixed", Samples: 16, Shards: 4, Seed: 1, DurationScale: 0.3, SizeScale: 0.5}, data); err != nil {
		t.Fatal(err)
	}
	examples, err := filepath.Abs("../../examples")
	if err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	realrun.SetRealEnv(realrun.RealEnv{Binary: buildDatahelix(t), CacheDir: t.TempDir(), Log: &log,
		Bridge: realrun.BridgeConfig{Ranks: []int{2}, Steps: 10, Batch: 2, Workers: 1, Frames: 2, Size: 32, Data: data,
			Python: bridgePython, Examples: examples, Timeout: 3 * time.Minute}})
	t.Cleanup(func() { realrun.SetRealEnv(realrun.RealEnv{}) })
	env := &report.SectionEnv{Mode: "sim", Ranks: 8, Seed: 1, Calibration: workload.DefaultCalibration()}
	secs := RunSections(context.Background(), env, []string{"bridge"})
	if len(secs) != 1 {
		t.Fatalf("%d sections", len(secs))
	}
	s := secs[0]
	if s.Name != "bridge" || s.Status != report.SectionMeasured || len(s.Rows) != 2 || !strings.Contains(s.Title, "2 ranks") {
		t.Fatalf("section %s %q [%s], %d rows: %s\n%v\nlog:\n%s", s.Name, s.Title, s.Status, len(s.Rows), s.Headline, s.Rows, log.String())
	}
	col := func(row []any, name string) any { return row[slices.Index(s.Columns, name)] }
	num := func(row []any, name string) float64 {
		x, ok := col(row, name).(float64)
		if !ok {
			t.Fatalf("%s %s: %v, want a number", col(row, "loader"), name, col(row, name))
		}
		return x
	}
	for i, loader := range []string{"datahelix", "torch"} {
		row := s.Rows[i]
		if col(row, "loader") != loader || col(row, "status") != "ok" || col(row, "ranks") != 2 || col(row, "steps") != 10 {
			t.Fatalf("row %d: %v, want %s ok at 2 ranks, 10 steps\nlog:\n%s", i, row, loader, log.String())
		}
		real, sim := num(row, "real_steady_throughput_sps"), num(row, "sim_steady_throughput_sps")
		if !(real > 0) || !(sim > 0) || !(num(row, "steady_step_ms_p50") > 0) {
			t.Errorf("%s: real %v, sim %v samples/s, step %v ms", loader, real, sim, col(row, "steady_step_ms_p50"))
		}
		if got := num(row, "throughput_rel_err"); math.Abs(got-(sim/real-1)) > 1e-9 {
			t.Errorf("%s: throughput error %v, want %v", loader, got, sim/real-1)
		}
		if got, want := num(row, "wait_abs_err"), num(row, "sim_steady_wait_frac")-num(row, "real_steady_wait_frac"); math.Abs(got-want) > 1e-9 {
			t.Errorf("%s: wait error %v, want %v", loader, got, want)
		}
		if got, want := num(row, "stall_abs_err"), num(row, "sim_steady_job_stall_frac")-num(row, "real_steady_job_stall_frac"); math.Abs(got-want) > 1e-9 {
			t.Errorf("%s: stall error %v, want %v", loader, got, want)
		}
	}
	// datahelix train's own summary is beside its trainer's.
	if _, ok := col(s.Rows[0], "server_steady_step_miss_rate").(float64); !ok {
		t.Errorf("datahelix: no server step miss rate: %v", s.Rows[0])
	}
	if !strings.Contains(s.Headline, "datahelix: throughput") || !strings.Contains(s.Headline, "torch: throughput") {
		t.Errorf("headline %q", s.Headline)
	}
}
