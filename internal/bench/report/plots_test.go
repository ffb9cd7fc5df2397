package report

import (
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/datahelix/datahelix/internal/bench/eval"
	"github.com/datahelix/datahelix/internal/metrics"
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
	p := timelinePlot(eval.Timeline{Workload: "w", Loader: "helix", Ranks: 1, Records: recs}, "ctx", true)
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

func TestPlots(t *testing.T) {
	r := smallRun(t)
	dir := t.TempDir()
	files, err := r.WritePlots(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][2]int{
		"gpu_wait.png":                 {waitAllW * PlotDPI, waitAllH * PlotDPI},
		"wait_kinetics.png":            {waitOneW * PlotDPI, waitOneH * PlotDPI},
		"wait_video_image_mix.png":     {waitOneW * PlotDPI, waitOneH * PlotDPI},
		"timeline_video_image_mix.png": {timelineW * PlotDPI, timelineH * PlotDPI},
	}
	if len(files) != len(want) {
		t.Errorf("wrote %v, want %d figures", files, len(want))
	}
	for name, size := range want {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		img, err := png.Decode(f)
		f.Close()
		if err != nil {
			t.Errorf("%s does not decode as PNG: %v", name, err)
			continue
		}
		if b := img.Bounds(); b.Dx() != size[0] || b.Dy() != size[1] {
			t.Errorf("%s is %dx%d, want %dx%d", name, b.Dx(), b.Dy(), size[0], size[1])
		}
		// Something was drawn: gonum/plot leaves the canvas white when
		// the bars or the axes do not fit (it did for the long workload
		// names at 6 inches).
		colors := []color.Color{waitColor, computeColor}
		if !strings.HasPrefix(name, "timeline_") {
			// The bars of the loaders whose stall is at least a tenth of
			// the tallest: a loader that never stalled has none.
			workload := strings.TrimSuffix(strings.TrimPrefix(name, "wait_"), ".png")
			vals := map[string]float64{}
			hi := 0.0
			for _, x := range r.Results {
				if name == "gpu_wait.png" || x.Workload == workload {
					v := x.GPUWaitFrac
					if x.HasSteady() {
						v = x.SteadyJobStallFrac
					}
					vals[x.Loader] = max(vals[x.Loader], v)
					hi = max(hi, v)
				}
			}
			if hi == 0 && name == "gpu_wait.png" {
				t.Errorf("%s: no loader stalled on any workload of the test run: the figure shows nothing", name)
			}
			colors = colors[:0]
			for _, l := range r.loaderNames() {
				if hi > 0 && vals[l] >= hi/10 { // a workload no loader stalled on has no bar
					colors = append(colors, loaderColor(l))
				}
			}
		}
		for _, c := range colors {
			if n := countColor(img, c); n < 100 {
				t.Errorf("%s: %d pixels of %v, want a bar's worth", name, n, c)
			}
		}
	}
}

// TestPlotLayout checks the figures' layout: the timeline leaves room
// above the top rank's row for its legend (which covered that row), and a
// one-workload wait figure names each bar's loader on its X axis (loaders
// were told apart by colour alone) and says what the wait leaves out.
func TestPlotLayout(t *testing.T) {
	for _, ranks := range []int{8, 64} {
		p := timelinePlot(eval.Timeline{Workload: "w", Loader: "helix", Ranks: ranks}, "ctx", false)
		if top := float64(ranks) - 0.5; p.Y.Max < top+1 {
			t.Errorf("%d ranks: Y axis ends at %v, want a row or more of head room above %v", ranks, p.Y.Max, top)
		}
	}
	r := handReport()
	loaders := r.loaderNames()
	p, err := r.waitBars([]string{"A"}, loaders, "t", waitOneW)
	if err != nil {
		t.Fatal(err)
	}
	var labels []string
	for _, tk := range p.X.Tick.Marker.Ticks(p.X.Min, p.X.Max) {
		if tk.Label != "" {
			labels = append(labels, tk.Label)
		}
	}
	if !slices.Equal(labels, loaders) {
		t.Errorf("wait_A.png X labels %v, want the loaders %v", labels, loaders)
	}
	if !strings.Contains(p.X.Label.Text, "gradient allreduce") {
		t.Errorf("wait figure's note %q does not say the allreduce's idle time is left out", p.X.Label.Text)
	}
	if c := loaderColors["helix-nogate"]; c.B > c.R {
		t.Errorf("helix-nogate's colour %v is a blue like helix's", c)
	}
}

// countColor counts img's pixels of exactly color c.
func countColor(img image.Image, c color.Color) int {
	r0, g0, b0, _ := c.RGBA()
	n := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bb, _ := img.At(x, y).RGBA()
			if r == r0 && g == g0 && bb == b0 {
				n++
			}
		}
	}
	return n
}

// TestTimelineMissing checks that the timeline figure is drawn exactly
// when TimelineMissing says nothing, and that it says why otherwise (it
// was dropped silently).
func TestTimelineMissing(t *testing.T) {
	r := smallRun(t)
	noTorch := smallRun(t)
	noTorch.Results = slices.DeleteFunc(noTorch.Results, func(x eval.Result) bool { return x.Loader == "torch" })
	notKept := handReport()
	wide := handReport()
	wide.Ranks = MaxTimelineRanks + 1
	for _, tt := range []struct {
		name     string
		r        *Report
		timeline string
		want     string // "" when drawn
	}{
		{"default", r, "", ""},
		{"named", r, "kinetics", ""},
		{"unknown", r, "nope", `no workload "nope"`},
		{"no torch", noTorch, "kinetics", "torch did not run"},
		{"records not kept", notKept, "A", "records were not kept"},
		{"too many ranks", wide, "", fmt.Sprintf("kept at up to %d ranks, and this run has %d", MaxTimelineRanks, MaxTimelineRanks+1)},
	} {
		got := tt.r.TimelineMissing(tt.timeline)
		if (got == "") != (tt.want == "") || !strings.Contains(got, tt.want) {
			t.Errorf("%s: TimelineMissing = %q, want %q", tt.name, got, tt.want)
		}
		dir := t.TempDir()
		files, err := tt.r.WritePlots(dir, tt.timeline)
		if err != nil {
			t.Fatal(err)
		}
		drawn := slices.ContainsFunc(files, func(f string) bool { return strings.HasPrefix(filepath.Base(f), "timeline_") })
		if drawn != (tt.want == "") {
			t.Errorf("%s: timeline drawn %v, TimelineMissing %q", tt.name, drawn, got)
		}
	}
	// Without a skewed workload the default is the most imbalanced one.
	u := handReport()
	u.Summary.MostSkewed = ""
	u.Workloads = []eval.Setup{{Workload: "A", Imbalance: 0.1}, {Workload: "B", Imbalance: 0.3}, {Workload: "U", Imbalance: 0.2}}
	if got := u.TimelineWorkload(""); got != "B" {
		t.Errorf("default timeline without a skewed workload: %s, want B", got)
	}
}
