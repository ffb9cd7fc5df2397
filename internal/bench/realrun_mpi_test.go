package bench

import (
	"context"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/datahelix/datahelix/internal/bench/eval"
	"github.com/datahelix/datahelix/internal/bench/realrun"
	"github.com/datahelix/datahelix/internal/bench/report"
	"github.com/datahelix/datahelix/internal/bench/workload"
	"github.com/datahelix/datahelix/internal/step"
)

// buildDatahelix builds the datahelix command into a temporary directory.
func buildDatahelix(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "datahelix")
	// go test puts its own Go's bin directory first in PATH.
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/datahelix/datahelix/cmd/datahelix").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// TestRealRunSmall runs the real evaluation end to end on a tiny
// ImageNet-like dataset (2 ranks, 6 steps, torch and helix under mpirun),
// then the validation and real sections on it: the simulation of the same
// setup must train the very batches the real run trained.
func TestRealRunSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("builds datahelix, generates a dataset and runs mpirun")
	}
	for _, tool := range []string{"mpirun", "ffmpeg"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s", tool)
		}
	}
	var log strings.Builder
	realrun.SetRealEnv(realrun.RealEnv{Binary: buildDatahelix(t), CacheDir: t.TempDir(), Log: &log,
		Scale: realrun.RealScale{ShardsPerRank: 1, SamplesPerShard: 4, SizeScale: 0.25, Workers: 1, MeasureRepeat: 1}})
	t.Cleanup(func() { realrun.SetRealEnv(realrun.RealEnv{}) })
	ws, err := workload.SelectWorkloads("imagenet")
	if err != nil {
		t.Fatal(err)
	}
	cfg := eval.EvalConfig{Workloads: ws, Loaders: []step.Kind{step.KindTorch, step.KindHelix, step.KindOracle}, Ranks: 2, Steps: 6, Batch: 4,
		Seed: 3, KeepTimelines: true}
	var progress [][2]int
	cfg.Progress = func(done, total int) { progress = append(progress, [2]int{done, total}) }
	ev, err := RunReal(context.Background(), cfg)
	if err != nil {
		t.Fatalf("%v\nlog:\n%s", err, log.String())
	}
	// Progress moves per mpirun job (torch, then helix; no oracle), not
	// once per workload: one workload would show no progress until done.
	if want := [][2]int{{1, 2}, {2, 2}}; !slices.Equal(progress, want) {
		t.Errorf("progress %v, want %v", progress, want)
	}
	if ev.Mode != "real" || len(ev.Results) != 2 || len(ev.Setups) != 1 || len(ev.Timelines) != 2 {
		t.Fatalf("evaluation: mode %s, %d results, %d setups, %d timelines; want real, 2 (no oracle), 1, 2", ev.Mode, len(ev.Results), len(ev.Setups), len(ev.Timelines))
	}
	for _, r := range ev.Results {
		if r.Mode != "real" || r.Ranks != 2 || r.Steps != 6 || r.Batch != 4 || r.Workers != 1 || !(r.ThroughputSPS > 0) || r.BatchesHash == "" {
			t.Errorf("result %+v", r)
		}
	}
	if ev.Results[0].BatchesHash != ev.Results[1].BatchesHash {
		t.Errorf("torch and helix trained different batches: %s, %s", ev.Results[0].BatchesHash, ev.Results[1].BatchesHash)
	}
	if s := ev.Setups[0]; !(s.MeanCostUS > 0) || !(s.GPUStepMS > 0) || s.Workers != 1 || s.Horizon != 8 {
		t.Errorf("setup %+v", s)
	}
	env := &report.SectionEnv{Mode: "real", Ranks: 2, Seed: 3, Workloads: ws, Calibration: workload.DefaultCalibration(), Eval: ev}
	secs := RunSections(context.Background(), env, []string{"validation", "real"})
	if len(secs) != 2 {
		t.Fatalf("%d sections", len(secs))
	}
	v := secs[0]
	if v.Status != report.SectionMeasured || len(v.Rows) != 2 {
		t.Fatalf("validation: %s, %d rows: %s %s", v.Status, len(v.Rows), v.Headline, v.Note)
	}
	same := -1
	for i, c := range v.Columns {
		if c == "same_batches" {
			same = i
		}
	}
	for _, row := range v.Rows {
		if len(row) != len(v.Columns) || row[same] != true {
			t.Errorf("validation row %v: the simulation did not train the real run's batches", row)
		}
	}
	if r := secs[1]; r.Status != report.SectionMeasured || len(r.Rows) != 1 || r.Rows[0][0] != "imagenet" {
		t.Errorf("real section: %s %v", r.Status, r.Rows)
	}
}
