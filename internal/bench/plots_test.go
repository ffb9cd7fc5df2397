package bench

import (
	"testing"

	"github.com/datahelix/datahelix/internal/metrics"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// TestTimelineLeavesAllreduceWhite checks that the timeline draws a real
// run's GPU compute from the simulated GPU's modelled time (gpu_us), not
// from compute_us, which in a real run lasts until the next request and
// holds the rank's idle time in the gradient allreduce: that time is left
// white, as the figure's axis says, not drawn as computing. One rank,
// two steps: waiting 1 s, computing 1 s then idle 3 s; waiting 1 s,
// computing 1 s. Blue and red then cover as much of the image (their
// legend swatches are the same size); drawn from compute_us, blue covered
// 2.5 times red.
func TestTimelineLeavesAllreduceWhite(t *testing.T) {
	const s = 1_000_000
	recs := []metrics.StepRecord{
		{Step: 0, RequestUS: 0, DeliverUS: 1 * s, ComputeUS: 4 * s, GPUUS: 1 * s},
		{Step: 1, RequestUS: 5 * s, DeliverUS: 6 * s, ComputeUS: 1 * s, GPUUS: 1 * s},
	}
	p := timelinePlot(Timeline{Workload: "w", Loader: "helix", Ranks: 1, Records: recs}, "ctx", true)
	img := vgimg.NewWith(vgimg.UseWH(8*vg.Inch, 3*vg.Inch), vgimg.UseDPI(PlotDPI))
	p.Draw(draw.New(img))
	blue, red := countColor(img.Image(), computeColor), countColor(img.Image(), waitColor)
	if red < 100 {
		t.Fatalf("%d red pixels: the waits were not drawn", red)
	}
	if ratio := float64(blue) / float64(red); ratio < 0.8 || ratio > 1.25 {
		t.Errorf("blue (computing) covers %.2fx the red (waiting), want about 1: the allreduce's idle time was drawn as computing", ratio)
	}
	// A simulated run's records (gpu_us equal to compute_us) draw as
	// before; a real run's GPU modelled no compute when gpu_us is 0 (the
	// JSON leaves it out), and its whole step is allreduce idle.
	for _, c := range []struct {
		rec  metrics.StepRecord
		real bool
		want int64
	}{
		{metrics.StepRecord{ComputeUS: 5, GPUUS: 5}, false, 5},
		{metrics.StepRecord{ComputeUS: 7}, false, 7},
		{metrics.StepRecord{ComputeUS: 7}, true, 0},
		{metrics.StepRecord{ComputeUS: 7, GPUUS: 3}, true, 3},
	} {
		if got := gpuBusyUS(c.rec, c.real); got != c.want {
			t.Errorf("gpuBusyUS(%+v, real %v) = %d, want %d", c.rec, c.real, got, c.want)
		}
	}
}
