package bench

import (
	"context"
	"math"
	"testing"

	"github.com/datahelix/datahelix/internal/bench/eval"
	"github.com/datahelix/datahelix/internal/bench/report"
	"github.com/datahelix/datahelix/internal/bench/workload"
	"github.com/datahelix/datahelix/internal/step"
)

func TestMeanCI(t *testing.T) {
	for _, tt := range []struct {
		xs         []float64
		mean, half float64
	}{
		{[]float64{3}, 3, 0},
		{[]float64{1, 1, 1, 1, 1}, 1, 0},
		// sd = sqrt(2.5), n = 5: 2.776 x sqrt(2.5/5).
		{[]float64{1, 2, 3, 4, 5}, 3, 2.776 * math.Sqrt(0.5)},
		// n = 2: 12.706 x sd/sqrt(2), sd = sqrt(2).
		{[]float64{0, 2}, 1, 12.706},
	} {
		m, h := report.MeanCI(tt.xs)
		if math.Abs(m-tt.mean) > 1e-12 || math.Abs(h-tt.half) > 1e-9 {
			t.Errorf("report.MeanCI(%v) = %v ± %v, want %v ± %v", tt.xs, m, h, tt.mean, tt.half)
		}
	}
}

// TestRatioLowersWait checks the property the ratio sweep shows: with the
// same samples (fixed seed), provisioning more CPU per GPU step (a higher
// ratio) never makes torch wait more on a skewed workload, and at 0.8,
// below what the GPUs consume, every loader waits.
func TestRatioLowersWait(t *testing.T) {
	ws, err := workload.SelectWorkloads("video_image_mix")
	if err != nil {
		t.Fatal(err)
	}
	var prev float64 = 2
	for _, r := range SweepRatios {
		ev, err := eval.RunSim(context.Background(), eval.EvalConfig{Workloads: []*workload.Workload{ws[0].WithRatio(r)},
			Loaders: []step.Kind{step.KindTorch, step.KindHelix}, Ranks: 8, Steps: 300, Seed: 3, Parallel: 1})
		if err != nil {
			t.Fatal(err)
		}
		torch, helix := ev.Results[0], ev.Results[1]
		if torch.SteadyGPUWaitFrac > prev+1e-9 {
			t.Errorf("ratio %.1f: torch waits %.4f, more than %.4f at the ratio below", r, torch.SteadyGPUWaitFrac, prev)
		}
		prev = torch.SteadyGPUWaitFrac
		if r < 1 && (torch.SteadyGPUWaitFrac == 0 || helix.SteadyGPUWaitFrac == 0) {
			t.Errorf("ratio %.1f: under-provisioned, yet torch waits %.4f and helix %.4f", r, torch.SteadyGPUWaitFrac, helix.SteadyGPUWaitFrac)
		}
	}
}
