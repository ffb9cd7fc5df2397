package report

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/datahelix/datahelix/internal/bench/eval"
	"github.com/datahelix/datahelix/internal/metrics"
	"github.com/datahelix/datahelix/internal/step"
)

// PlotDPI is the resolution of the figures: a figure of w x h inches is
// w*PlotDPI x h*PlotDPI pixels.
const PlotDPI = 100

// The figures' sizes in inches.
const (
	waitAllW, waitAllH   = 14, 6 // gpu_wait.png
	waitOneW, waitOneH   = 6, 4  // wait_<workload>.png
	timelineW, timelineH = 14, 6 // timeline_<workload>.png
	// timelineSteps is how many steps a timeline shows.
	timelineSteps = 40
)

// MaxTimelineRanks is the largest world whose per-rank step records are
// worth keeping for the timeline figure: it draws one row per rank, and
// the records of a larger world cost memory for rows too thin to read.
const MaxTimelineRanks = 64

// loaderColors are the loaders' colors in every figure.
var loaderColors = map[string]color.RGBA{
	"torch":        {R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	"local":        {R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
	"static":       {R: 0x94, G: 0x67, B: 0xbd, A: 0xff},
	"helix":        {R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	"helix-nogate": {R: 0x8c, G: 0x56, B: 0x4b, A: 0xff}, // brown: told apart from helix's blue
	"oracle":       {R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
}

func loaderColor(name string) color.Color {
	if c, ok := loaderColors[name]; ok {
		return c
	}
	return color.Gray{Y: 0x80}
}

// WritePlots writes the figures into dir and returns their paths:
// gpu_wait.png (the job stall after the warm-up by loader for every
// workload), one
// wait_<workload>.png per workload, and timeline_<workload>.png, the
// per-rank timeline of torch and helix side by side for the timeline
// workload (the default one when empty, see TimelineWorkload) when it can
// be drawn (TimelineMissing says why not). It first removes those
// figures of an earlier report from dir (gpu_wait.png, wait_*.png,
// timeline_*.png).
func (r *Report) WritePlots(dir, timeline string) ([]string, error) {
	if err := createDirRemovingOld(dir, plotPatterns); err != nil {
		return nil, err
	}
	var out []string
	loaders := r.loaderNames()
	p, err := r.waitBars(r.workloadNames(), loaders, "Job stall by loader\n"+r.runContext(), waitAllW)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "gpu_wait.png")
	if err := SavePNG(path, waitAllW, waitAllH, [][]*plot.Plot{{p}}); err != nil {
		return nil, err
	}
	out = append(out, path)
	for _, w := range r.workloadNames() {
		p, err := r.waitBars([]string{w}, loaders, "Job stall: "+w+"\n"+r.runContext(), waitOneW)
		if err != nil {
			return nil, err
		}
		path := filepath.Join(dir, "wait_"+w+".png")
		if err := SavePNG(path, waitOneW, waitOneH, [][]*plot.Plot{{p}}); err != nil {
			return nil, err
		}
		out = append(out, path)
	}
	if r.TimelineMissing(timeline) != "" {
		return out, nil
	}
	timeline = r.TimelineWorkload(timeline)
	var row []*plot.Plot
	for _, t := range r.timelines(timeline) {
		row = append(row, timelinePlot(t, r.runContext(), r.Mode == "real"))
	}
	sameAxes(row)
	path = filepath.Join(dir, "timeline_"+timeline+".png")
	if err := SavePNG(path, timelineW, timelineH, [][]*plot.Plot{row}); err != nil {
		return nil, err
	}
	return append(out, path), nil
}

// runContext is the second line of every figure's title, so that a
// figure pasted alone still says how it was made: mode, world, steps,
// seed and commit.
func (r *Report) runContext() string {
	commit := r.Machine.Commit
	if len(commit) > 12 {
		commit = commit[:12]
	}
	if r.Machine.Dirty {
		commit += " (uncommitted changes)"
	}
	mode := "simulated"
	if r.Mode == "real" {
		mode = "real runs"
	}
	return fmt.Sprintf("%s, %s, %d steps, seed %d, commit %s", mode, plural(r.Ranks, "rank"), r.Steps, r.Seed, commit)
}

// timelineLoaders are the loaders the timeline figure sets side by side.
var timelineLoaders = []step.Kind{step.KindTorch, step.KindHelix}

// TimelineWorkload is the workload of the timeline figure: name, or when
// it is empty the most skewed workload (Summary.MostSkewed), else the one
// of highest imbalance.
func (r *Report) TimelineWorkload(name string) string {
	if name != "" {
		return name
	}
	if r.Summary.MostSkewed != "" {
		return r.Summary.MostSkewed
	}
	var most eval.Setup
	for _, s := range r.Workloads {
		if most.Workload == "" || s.Imbalance > most.Imbalance {
			most = s
		}
	}
	return most.Workload
}

// setup is the setup of workload w (zero when there is none).
func (r *Report) setup(w string) eval.Setup {
	if i := slices.IndexFunc(r.Workloads, func(s eval.Setup) bool { return s.Workload == w }); i >= 0 {
		return r.Workloads[i]
	}
	return eval.Setup{}
}

// timelines returns the kept timelines of workload w, in the order of
// timelineLoaders.
func (r *Report) timelines(w string) []eval.Timeline {
	var out []eval.Timeline
	for _, k := range timelineLoaders {
		for _, t := range r.Timelines {
			if t.Workload == w && t.Loader == k.String() {
				out = append(out, t)
			}
		}
	}
	return out
}

// TimelineMissing returns "" when WritePlots draws the timeline figure
// of workload name (TimelineWorkload), else one line saying why it does
// not: the workload is not in the report, torch or helix did not run, or
// the step records were not kept (more than MaxTimelineRanks ranks).
func (r *Report) TimelineMissing(name string) string {
	name = r.TimelineWorkload(name)
	if r.setup(name).Workload == "" {
		return fmt.Sprintf("no timeline figure: no workload %q in the report", name)
	}
	for _, k := range timelineLoaders {
		if !slices.ContainsFunc(r.Results, func(x eval.Result) bool { return x.Workload == name && x.Loader == k.String() }) {
			return fmt.Sprintf("no timeline figure of %s: it sets torch and helix side by side, and %s did not run (--loaders)", name, k)
		}
	}
	if len(r.timelines(name)) < len(timelineLoaders) {
		if r.Ranks > MaxTimelineRanks {
			return fmt.Sprintf("no timeline figure of %s: per-rank step records are kept at up to %d ranks, and this run has %d", name, MaxTimelineRanks, r.Ranks)
		}
		return fmt.Sprintf("no timeline figure of %s: the runs' step records were not kept", name)
	}
	return ""
}

func (r *Report) workloadNames() []string {
	out := make([]string, len(r.Workloads))
	for i, s := range r.Workloads {
		out[i] = s.Workload
	}
	return out
}

// loaderNames lists the loaders in the order of the results.
func (r *Report) loaderNames() []string {
	var out []string
	seen := map[string]bool{}
	for _, x := range r.Results {
		if !seen[x.Loader] {
			seen[x.Loader] = true
			out = append(out, x.Loader)
		}
	}
	return out
}

// barFill is the share of a bar chart's figure width its bars may take
// together; the rest is the axes, the labels and the gaps. gonum/plot
// draws nothing at all when the bars and the Y axis do not fit.
const barFill = 0.6

// waitNote is the figures' definition of the wait they plot: the job
// stall after the warm-up, the headline of the second bench issue.
const waitNote = "job stall after the warm-up: each step's longest GPU input wait of any rank (the step lasts as long as its\n" +
	"slowest rank), summed over the steps, over the wall time; it leaves out the idle time in the gradient allreduce\n" +
	"(a run not longer than its warm-up shows its whole-run mean rank wait)"

// waitBars is a grouped bar chart of the job stall % (waitNote) per
// workload by loader,
// for a figure widthIn inches wide. With one workload, the bars are
// labelled with the loaders' names on the X axis (no legend, which tells
// loaders apart by colour alone); with more, a legend names them.
func (r *Report) waitBars(workloads, loaders []string, title string, widthIn float64) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = "job stall, % of wall time"
	p.X.Label.Text = waitNote
	p.X.Label.TextStyle.Font.Size = vg.Points(9)
	p.Y.Min = 0
	one := len(workloads) == 1
	width := vg.Points(math.Min(60, barFill*widthIn*72/float64(len(workloads)*len(loaders))))
	hi := 0.0 // the tallest bar
	for j, l := range loaders {
		vals := make(plotter.Values, len(workloads))
		for i, w := range workloads {
			for _, x := range r.Results {
				if x.Workload == w && x.Loader == l {
					vals[i] = 100 * x.GPUWaitFrac
					if x.HasSteady() {
						vals[i] = 100 * x.SteadyJobStallFrac
					}
					hi = math.Max(hi, vals[i])
				}
			}
		}
		b, err := plotter.NewBarChart(vals, width)
		if err != nil {
			return nil, fmt.Errorf("bench: plot %s: %w", title, err)
		}
		b.Color = loaderColor(l)
		b.LineStyle.Width = 0
		if one {
			b.XMin = float64(j) // one category per loader, named on the X axis
		} else {
			b.Offset = width * vg.Length(float64(j)-float64(len(loaders)-1)/2)
			p.Legend.Add(l, b)
		}
		p.Add(b)
	}
	if one {
		p.NominalX(loaders...)
		p.X.Min, p.X.Max = -0.5, float64(len(loaders))-0.5
		if hi > 0 {
			p.Y.Max = 1.1 * hi
		}
		return p, nil
	}
	p.Legend.Top = true
	p.NominalX(workloads...)
	// Half a category of margin each side, so an outer group's bars do
	// not touch the frame.
	p.X.Min, p.X.Max = -0.5, float64(len(workloads))-0.5
	if hi > 0 { // head room above the tallest bar for the legend
		p.Y.Max = 1.35 * hi
	}
	return p, nil
}

// timelineBars draws, per rank and step, the GPU waiting for its batch
// (red) and computing (blue).
type timelineBars struct {
	recs       []metrics.StepRecord
	ranks      int
	real       bool // records of a real run (gpuBusyUS)
	xmin, xmax float64
}

var (
	waitColor    = color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}
	computeColor = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
)

func (t *timelineBars) Plot(c draw.Canvas, p *plot.Plot) {
	tx, ty := p.Transforms(&c)
	box := func(clr color.Color, rank int, from, to float64) {
		if to <= from {
			return
		}
		y0, y1 := ty(float64(rank)-0.4), ty(float64(rank)+0.4)
		x0, x1 := tx(from), tx(to)
		c.FillPolygon(clr, c.ClipPolygonXY([]vg.Point{{X: x0, Y: y0}, {X: x1, Y: y0}, {X: x1, Y: y1}, {X: x0, Y: y1}}))
	}
	for _, r := range t.recs {
		req, del := float64(r.RequestUS)/1e6, float64(r.DeliverUS)/1e6
		box(waitColor, r.Rank, req, del)
		box(computeColor, r.Rank, del, del+float64(gpuBusyUS(r, t.real))/1e6)
	}
}

// gpuBusyUS is the time r's GPU computed its batch, drawn blue: in a real
// run, the simulated GPU's modelled compute (GPUUS, 0 when the --gpu-*
// flags model none), not ComputeUS, which lasts until the next request
// and so also holds the time the rank idled in the gradient allreduce,
// left white; in a simulation ComputeUS, which is the modelled compute.
func gpuBusyUS(r metrics.StepRecord, real bool) int64 {
	if real {
		return min(r.GPUUS, r.ComputeUS)
	}
	return r.ComputeUS
}

func (t *timelineBars) DataRange() (xmin, xmax, ymin, ymax float64) {
	return t.xmin, t.xmax, -0.5, float64(t.ranks) - 0.5
}

// swatch is a legend entry filled with one color.
type swatch struct{ c color.Color }

func (s swatch) Thumbnail(c *draw.Canvas) {
	r := c.Rectangle
	c.FillPolygon(s.c, []vg.Point{r.Min, {X: r.Max.X, Y: r.Min.Y}, r.Max, {X: r.Min.X, Y: r.Max.Y}})
}

// timelinePlot plots the first timelineSteps steps of a run, real or
// simulated.
func timelinePlot(t eval.Timeline, context string, real bool) *plot.Plot {
	tb := &timelineBars{ranks: t.Ranks, real: real}
	for _, r := range t.Records {
		if r.Step >= timelineSteps {
			continue
		}
		tb.recs = append(tb.recs, r)
		tb.xmax = math.Max(tb.xmax, float64(r.DeliverUS+r.ComputeUS)/1e6)
	}
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s: %s, first %d steps\n%s", t.Workload, t.Loader, timelineSteps, context)
	p.Title.Padding = vg.Points(14)
	p.X.Label.Text = "time (s); white: idle in the gradient allreduce, waiting for a slower rank"
	p.Y.Label.Text = "rank"
	p.Add(tb)
	p.Legend.Add("GPU waiting for its batch", swatch{waitColor})
	p.Legend.Add("GPU computing", swatch{computeColor})
	p.Legend.Top = true
	p.Legend.Left = false
	// Head room above the top rank's row for the legend, which sits in
	// the plot's top right corner: about a tenth of the axis, at least
	// one row (timelineBars.DataRange ends half a row above the top rank).
	p.Y.Max = float64(t.Ranks) - 0.5 + math.Max(1, 0.15*float64(t.Ranks))
	ticks := make([]plot.Tick, t.Ranks)
	for r := range ticks {
		if t.Ranks <= 16 || r%(t.Ranks/16) == 0 {
			ticks[r] = plot.Tick{Value: float64(r), Label: fmt.Sprint(r)}
		} else {
			ticks[r] = plot.Tick{Value: float64(r)}
		}
	}
	p.Y.Tick.Marker = plot.ConstantTicks(ticks)
	return p
}

// sameAxes gives side-by-side timelines one time axis.
func sameAxes(ps []*plot.Plot) {
	hi := 0.0
	for _, p := range ps {
		hi = math.Max(hi, p.X.Max)
	}
	for _, p := range ps {
		p.X.Min, p.X.Max = 0, hi
	}
}

// SavePNG draws a grid of plots on a w x h inch canvas at PlotDPI.
func SavePNG(path string, w, h float64, grid [][]*plot.Plot) error {
	img := vgimg.NewWith(vgimg.UseWH(vg.Length(w)*vg.Inch, vg.Length(h)*vg.Inch), vgimg.UseDPI(PlotDPI))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: len(grid), Cols: len(grid[0]), PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 4,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	canvases := plot.Align(grid, tiles, dc)
	for i, row := range grid {
		for j, p := range row {
			p.Draw(canvases[i][j])
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("bench: %s: %w", path, err)
	}
	return f.Close()
}
