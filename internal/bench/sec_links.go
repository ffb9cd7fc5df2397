package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image/color"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"

	"github.com/datahelix/datahelix/decode"
	"github.com/datahelix/datahelix/gpu"
	"github.com/datahelix/datahelix/internal/bench/eval"
	"github.com/datahelix/datahelix/internal/bench/realrun"
	"github.com/datahelix/datahelix/internal/bench/report"
	"github.com/datahelix/datahelix/internal/bench/workload"
	"github.com/datahelix/datahelix/internal/costmodel"
	"github.com/datahelix/datahelix/internal/gen"
	"github.com/datahelix/datahelix/internal/metrics"
	"github.com/datahelix/datahelix/internal/shardindex"
	"github.com/datahelix/datahelix/internal/sim"
	"github.com/datahelix/datahelix/internal/step"
	"github.com/datahelix/datahelix/plan"
)

// LinkRates are the inter-node link rates the links section sweeps, as
// tc tbf takes them; "" is the bridge unlimited.
var LinkRates = []string{"20mbit", "100mbit", "1gbit", ""}

// linkLoaders are the loaders the links section compares: the baseline,
// helix, and helix without the gate that prices a move on its path.
var linkLoaders = []string{"torch", "helix", "helix-nogate"}

// linkSteps is each loader's steps in one links job.
const linkSteps = 100

// errNoBed says the two-node bed cannot run here.
var errNoBed = errors.New("the two-node bed cannot run here")

// linksSection runs the default dataset on the two-node bed
// (scripts/multinode.sh: two network namespaces of two ranks each on a
// bridge, the link of each limited by tc tbf) at every rate of
// LinkRates, one job per rate running the loaders of linkLoaders in
// turn, and reports each loader's throughput, bytes moved per step and
// allgather latency, with the throughput ratio to torch; it plots
// throughput and the bytes moved across nodes against the rate
// (links.png). Where the bed
// cannot run (not root, no network namespaces, no scripts/multinode.sh
// beside the binary or in the working directory) the section is skipped
// saying why.
func linksSection(ctx context.Context, env *report.SectionEnv) (*report.Section, error) {
	e, err := realrun.CurrentRealEnv()
	if err != nil {
		return nil, err
	}
	script, err := bedScript(e.Binary)
	if err != nil {
		return &report.Section{Status: report.SectionSkipped, Note: err.Error()}, nil
	}
	sec := &report.Section{Columns: []string{"link", "loader", "throughput_sps", "vs_torch", "bytes_moved_per_step", "net_bytes_moved_per_step", "allgather_us_p50",
		"sim_throughput_sps", "sim_vs_torch", "sim_net_bytes_moved_per_step"}}
	results := map[string][]metrics.Summary{}
	for _, rate := range LinkRates {
		e.Logf("links: %s", linkName(rate))
		sums, err := runOnBed(ctx, script, rate, env.Seed)
		if errors.Is(err, errNoBed) {
			return &report.Section{Status: report.SectionSkipped, Note: err.Error()}, nil
		}
		if err != nil {
			return nil, fmt.Errorf("link %s: %w", linkName(rate), err)
		}
		results[rate] = sums
		sims, err := simulateLinks(env, rate)
		if err != nil {
			return nil, fmt.Errorf("link %s: simulate: %w", linkName(rate), err)
		}
		for i, s := range sums {
			m := sims[i]
			sec.Rows = append(sec.Rows, []any{linkName(rate), s.Loader, s.ThroughputSPS, vsTorch(sums, s), s.BytesMovedPerStep, s.NetBytesMovedPerStep, s.AllgatherUSP50,
				m.ThroughputSPS, vsTorch(sims, m), m.NetBytesMovedPerStep})
		}
	}
	sec.Headline = linksHeadline(results)
	if env.OutDir != "" {
		if err := plotLinks(filepath.Join(env.OutDir, "links.png"), results); err != nil {
			return nil, err
		}
		sec.Note = "plotted in links.png"
	}
	return sec, nil
}

// vsTorch is s's throughput over torch's among sums (0 without torch).
func vsTorch(sums []metrics.Summary, s metrics.Summary) float64 {
	for _, t := range sums {
		if t.Loader == "torch" && t.ThroughputSPS > 0 {
			return s.ThroughputSPS / t.ThroughputSPS
		}
	}
	return 0
}

// linkBytesPerUS is a tc rate as the simulator's fixed-point bytes/µs;
// "" (unlimited) is the bridge's, taken as memory's 1 GB/s.
func linkBytesPerUS(rate string) int64 {
	bits := map[string]int64{"20mbit": 20e6, "100mbit": 100e6, "1gbit": 1e9}[rate]
	if bits == 0 {
		return 1000 * plan.One
	}
	return bits / 8 * plan.One / 1e6
}

// simulateLinks simulates the links job at one rate: the default
// dataset's samples in the runtime's order (NewDatasetSamples), datahelix
// run's defaults (B=4, W=1, F=8, S=224, a GPU of 120 ms plus 1 ms a frame,
// horizon 8, the gate's margin), 4 ranks on 2 nodes sharing this
// machine's cores, each node's link at the rate, and returns each loader
// of linkLoaders's summary, in that order.
func simulateLinks(env *report.SectionEnv, rate string) ([]metrics.Summary, error) {
	dir := gen.DefaultDir(shardindex.DefaultCacheDir(), env.Seed)
	ds, err := decode.OpenDataset(dir, "")
	if err != nil {
		return nil, err
	}
	defer ds.Close()
	const ranks, batch, workers, horizon = 4, 4, 1, 8
	var cal *costmodel.Calibration
	if env.Calibration != nil {
		cal = env.Calibration
	}
	src, err := workload.NewDatasetSamples(ds, cal, workload.DatasetSimConfig{Ranks: ranks, Batch: batch, Steps: linkSteps, Workers: workers, Seed: env.Seed})
	if err != nil {
		return nil, err
	}
	cores := runtime.NumCPU()
	out := make([]metrics.Summary, len(linkLoaders))
	for i, name := range linkLoaders {
		k, err := step.ParseKind(name)
		if err != nil {
			return nil, err
		}
		res, err := sim.Run(sim.Config{Loader: k, Ranks: ranks, Batch: batch, Steps: linkSteps, Workers: workers, Horizon: horizon,
			Budget:    horizon * batch * decode.DefaultFrames * decode.DefaultSize * decode.DefaultSize * 3,
			GPU:       gpu.Model{Base: 120 * time.Millisecond, PerFrame: time.Millisecond},
			Bandwidth: 1000 * plan.One, LatencyUS: 50, Margin: eval.GateMarginUS,
			Nodes: []int{0, 0, 2, 2}, NodeBandwidth: linkBytesPerUS(rate), NodeLatencyUS: 100,
			CPUs:    &sim.CPUShare{Group: []int{0, 0, 0, 0}, Cores: []int{cores}},
			Samples: src.Samples, Seed: env.Seed})
		if err != nil {
			return nil, err
		}
		out[i] = res.Summary
	}
	return out, nil
}

// linkName is how the report names a rate.
func linkName(rate string) string {
	if rate == "" {
		return "unlimited"
	}
	return rate
}

// bedScript finds scripts/multinode.sh: in the repository the binary was
// built in (.bin/datahelix, as mpirun.sh builds it), else under the
// working directory.
func bedScript(binary string) (string, error) {
	if os.Geteuid() != 0 {
		return "", fmt.Errorf("%w: the bed needs root (network namespaces)", errNoBed)
	}
	for _, dir := range []string{filepath.Dir(filepath.Dir(binary)), "."} {
		p := filepath.Join(dir, "scripts", "multinode.sh")
		if _, err := os.Stat(p); err == nil {
			return filepath.Abs(p)
		}
	}
	return "", fmt.Errorf("%w: no scripts/multinode.sh beside the binary or in the working directory (run from the repository)", errNoBed)
}

// runOnBed runs the links job at one rate and returns each loader's
// summary, in the order run.
func runOnBed(ctx context.Context, script, rate string, seed uint64) ([]metrics.Summary, error) {
	out, err := os.CreateTemp("", "datahelix-links-*.json")
	if err != nil {
		return nil, err
	}
	out.Close()
	defer os.Remove(out.Name())
	args := []string{"--nodes", "2", "--slots", "2"}
	if rate != "" {
		args = append(args, "--rate", rate)
	}
	// The default dataset alone, once, at run's batch and GPU for
	// datasets of one's own (with no --data, run trains its default job:
	// two layouts, three times).
	dir, _, err := gen.EnsureDefault(ctx, shardindex.DefaultCacheDir(), seed, 0, nil)
	if err != nil {
		return nil, err
	}
	args = append(args, "--", "-np", "4", "datahelix", "run", "--quiet", "--loader", "torch,helix,helix-nogate", "--data", dir,
		"--batch", "4", "--gpu-step-ms", "120", "--steps", strconv.Itoa(linkSteps), "--seed", strconv.FormatUint(seed, 10), "--json", out.Name())
	ctx, cancel := context.WithTimeout(ctx, 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, script, args...)
	cmd.Dir = filepath.Dir(filepath.Dir(script))
	if _, err := realrun.RunCommand(ctx, cmd); err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) && exit.ExitCode() == 3 {
			return nil, fmt.Errorf("%w: network namespaces are not permitted", errNoBed)
		}
		return nil, err
	}
	data, err := os.ReadFile(out.Name())
	if err != nil {
		return nil, err
	}
	var sums []metrics.Summary
	if err := json.Unmarshal(data, &sums); err != nil {
		return nil, fmt.Errorf("%s: %w", out.Name(), err)
	}
	if len(sums) != len(linkLoaders) {
		return nil, fmt.Errorf("%d loaders in the job's results, want %d", len(sums), len(linkLoaders))
	}
	return sums, nil
}

// linksHeadline is helix's throughput against torch's at the slowest and
// the fastest link.
func linksHeadline(results map[string][]metrics.Summary) string {
	ratio := func(rate string) float64 {
		var torch, helix float64
		for _, s := range results[rate] {
			switch s.Loader {
			case "torch":
				torch = s.ThroughputSPS
			case "helix":
				helix = s.ThroughputSPS
			}
		}
		if torch == 0 {
			return 0
		}
		return helix / torch
	}
	first, last := LinkRates[0], LinkRates[len(LinkRates)-1]
	return fmt.Sprintf("helix %.2fx torch's throughput at %s, %.2fx at %s", ratio(first), linkName(first), ratio(last), linkName(last))
}

// plotLinks draws throughput and bytes moved per step against the link
// rate, one line per loader.
func plotLinks(path string, results map[string][]metrics.Summary) error {
	tp, moved := plot.New(), plot.New()
	tp.Title.Text, tp.Y.Label.Text = "Throughput on 2 nodes x 2 ranks", "samples/s"
	moved.Title.Text, moved.Y.Label.Text = "Bytes moved across nodes per step", "KiB"
	names := make([]string, len(LinkRates))
	for i, r := range LinkRates {
		names[i] = linkName(r)
	}
	colors := []color.RGBA{{R: 0x99, G: 0x99, B: 0x99, A: 0xff}, {R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, {R: 0xd6, G: 0x27, B: 0x28, A: 0xff}}
	for li, loader := range linkLoaders {
		var tpts, mpts plotter.XYs
		for i, r := range LinkRates {
			for _, s := range results[r] {
				if s.Loader == loader {
					tpts = append(tpts, plotter.XY{X: float64(i), Y: s.ThroughputSPS})
					mpts = append(mpts, plotter.XY{X: float64(i), Y: s.NetBytesMovedPerStep / 1024})
				}
			}
		}
		for _, c := range []struct {
			p   *plot.Plot
			pts plotter.XYs
		}{{tp, tpts}, {moved, mpts}} {
			l, pts, err := plotter.NewLinePoints(c.pts)
			if err != nil {
				return fmt.Errorf("bench: links plot: %w", err)
			}
			l.Color, pts.Color = colors[li], colors[li]
			c.p.Add(l, pts)
			if c.p == tp {
				tp.Legend.Add(loader, l, pts)
			}
		}
	}
	for _, p := range []*plot.Plot{tp, moved} {
		p.X.Label.Text = "inter-node link"
		p.NominalX(names...)
		p.Y.Min = 0
	}
	tp.Legend.Top = false
	return report.SavePNG(path, 10, 4, [][]*plot.Plot{{tp, moved}})
}
