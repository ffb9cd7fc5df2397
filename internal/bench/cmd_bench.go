package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/schollz/progressbar/v3"

	"github.com/datahelix/datahelix/internal/bench/cmdinfo"
	"github.com/datahelix/datahelix/internal/bench/eval"
	"github.com/datahelix/datahelix/internal/bench/realrun"
	"github.com/datahelix/datahelix/internal/bench/report"
	"github.com/datahelix/datahelix/internal/bench/workload"
	"github.com/datahelix/datahelix/internal/cli"
	"github.com/datahelix/datahelix/internal/costmodel"
	"github.com/datahelix/datahelix/internal/machine"
	"github.com/datahelix/datahelix/internal/step"
)

// Command is datahelix bench.
var Command = cli.Command{
	Name:    cmdinfo.Bench,
	Summary: cmdinfo.BenchSummary,
	Run:     runBench,
}

func runBench(ctx context.Context, stdout, stderr io.Writer, args []string) error {
	fs := cli.NewFlags("bench", "--workloads all|NAME,... [--sim|--real] --ranks N --json FILE --out DIR")
	workloads := fs.String("workloads", "all", "`workloads`: all, or a comma list of built-in names ("+strings.Join(builtinWorkloads(), ", ")+
		") or workload .json files, each with its own \"name\" (see bench/workloads/README.md)")
	sim := fs.Bool("sim", false, "simulate (the default)")
	real := fs.Bool("real", false, "run for real under mpirun on generated data")
	ranks := fs.Int("ranks", 8, "simulated world `size` N; with --real, mpirun's -np, and the default is 4")
	steps := fs.Int("steps", 200, "training `steps` per run; --real makes the default 40")
	batch := fs.Int("batch", 0, "per-rank batch `B` (0: each workload's own)")
	ratio := fs.Float64("ratio", 0, fmt.Sprintf("provisioning `ratio`: the CPUs prepare this many times what the GPUs consume (0: each workload's own, %g in the built-in files; %g to %g)", workload.ProvisionRatio, workload.MinRatio, workload.MaxRatio))
	loaders := fs.String("loaders", "torch,torch-ddp,torch-pack,local,static,helix,helix-nogate,helix-notrain,oracle", "comma list of `loaders` to compare")
	seed := fs.Uint64("seed", 1, "`seed` of every draw")
	seeds := fs.Int("seeds", 1, fmt.Sprintf("simulate the evaluation under `N` seeds, --seed and the next ones, 1..%d: the report gives their means and the 95 %% confidence half-width of its goals' figures", MaxSeeds))
	jsonOut := fs.String("json", "", "write the report as JSON to `file` (- for standard output)")
	out := fs.String("out", "bench-out", "`dir`ectory for the CSV files and PNG figures")
	cacheDir := fs.String("cache-dir", "", "cache `dir`ectory holding the calibration"+cli.CacheDirDefault)
	calFile := fs.String("calibration", "", "use this calibration `file` instead of the one cached for this machine")
	sections := fs.String("sections", "all", "report `sections` to run: all, none, or a comma list of "+strings.Join(SectionNames(), ", "))
	scaleRanks := fs.Int("scale-ranks", eval.DefaultScale.Ranks, "scale section: world `size`")
	scaleBatch := fs.Int("scale-batch", eval.DefaultScale.Batch, "scale section: per-rank `batch`")
	scaleSteps := fs.Int("scale-steps", eval.DefaultScale.Steps, "scale section: `steps`")
	scaleWorkload := fs.String("scale-workload", eval.DefaultScale.Workload, "scale section: `workload`")
	bridgeRanks := fs.String("bridge-ranks", "2,4", "bridge section: comma list of the rank `counts` it trains at")
	bridgeSteps := fs.Int("bridge-steps", realrun.DefaultBridge.Steps, "bridge section: `steps` of each training run")
	bridgeData := fs.String("bridge-data", "", "bridge section: the `path` of the dataset both trainers read (default: the default dataset, generated once into the cache)")
	bridgePython := fs.String("bridge-python", realrun.DefaultBridge.Python, "bridge section: the `python` that runs examples/train.py (with torch; PyAV, Pillow and NumPy for the stock loader)")
	timeline := fs.String("timeline", "", fmt.Sprintf("`workload` of the torch/helix timeline figure (default: the most skewed); needs torch and helix in --loaders and at most %d ranks", report.MaxTimelineRanks))
	parallel := fs.Int("parallel", 0, "`N` simulations run at once (0: one per CPU)")
	bandwidth := fs.Float64("bandwidth-mbs", eval.DefaultNetwork.BandwidthMBs, "simulated exchange bandwidth per rank, `MB/s`")
	latency := fs.Int64("latency-us", eval.DefaultNetwork.LatencyUS, "simulated exchange latency per message, `µs`")
	noSplit := fs.Bool("no-split", false, "ablation: no loader splits clips into keyframe-aligned tasks (the runtime does)")
	noiseOnTruth := fs.Bool("noise-on-truth", false, "sensitivity: put the cost model's measured error on the true costs instead of on the estimates")
	quiet := fs.Bool("quiet", false, "no progress on standard error (a bar on a terminal, else plain lines)")
	workloadHint := func(rest []string) string {
		if a := rest[0]; slices.Contains(builtinWorkloads(), a) || a == "all" || strings.HasSuffix(a, ".json") {
			return fmt.Sprintf("bench: %s is a workload, not a subcommand: use --workloads %s", a, strings.Join(rest, ","))
		}
		return ""
	}
	if err := cli.ParseFlagsHint(fs, args, stdout, workloadHint); err != nil {
		return err
	}
	if *real {
		// Real runs share this machine's cores: smaller defaults.
		set := cli.SetFlags(fs, []string{"ranks", "steps"})
		if !slices.Contains(set, "ranks") {
			*ranks = 4
		}
		if !slices.Contains(set, "steps") {
			*steps = 40
		}
	}
	if *sim && *real {
		return cli.Usagef("bench: --sim and --real exclude each other")
	}
	ws, err := workload.SelectWorkloads(*workloads)
	if err != nil {
		return cli.Usagef("bench: --workloads: %s", strings.TrimPrefix(err.Error(), "bench: "))
	}
	if *ratio != 0 {
		if !(*ratio >= workload.MinRatio && *ratio <= workload.MaxRatio) {
			return cli.FlagErrorf("bench", "ratio", *ratio, "want 0 (each workload's own) or %g to %g", workload.MinRatio, workload.MaxRatio)
		}
		for i, w := range ws {
			ws[i] = w.WithRatio(*ratio)
		}
	}
	kinds, err := step.ParseKinds(*loaders)
	if err != nil {
		return cli.Usagef("bench: --loaders: %w", err)
	}
	var names []string
	switch strings.TrimSpace(*sections) {
	case "all":
	case "none":
		names = []string{}
	case "":
		return cli.Usagef("bench: --sections: no section given (want all, none or a comma list of %s)", strings.Join(SectionNames(), ", "))
	default:
		if err := noEmptyItems("--sections", *sections); err != nil {
			return err
		}
		for _, s := range strings.Split(*sections, ",") {
			s = strings.TrimSpace(s)
			if s == "all" || s == "none" {
				return cli.FlagErrorf("bench", "sections", *sections, "%s stands alone, not in a list with section names", s)
			}
			names = append(names, s)
		}
	}
	// The flags always name a network: checked here, since the zero one
	// (--bandwidth-mbs 0 --latency-us 0) would mean the default below.
	network := eval.Network{BandwidthMBs: *bandwidth, LatencyUS: *latency}
	if err := network.Check(); err != nil {
		return cli.Usagef("%w", err)
	}
	cfg := RunConfig{
		Eval: eval.EvalConfig{Workloads: ws, Loaders: kinds, Ranks: *ranks, Steps: *steps, Batch: *batch, Seed: *seed,
			Network: network, Parallel: *parallel, KeepTimelines: *ranks <= report.MaxTimelineRanks, NoSplit: *noSplit, NoiseOnTruth: *noiseOnTruth},
		Real: *real, Seeds: *seeds, Sections: names, OutDir: *out, Timeline: *timeline,
		Scale: eval.ScaleConfig{Workload: *scaleWorkload, Loader: step.KindHelix, Ranks: *scaleRanks, Batch: *scaleBatch, Steps: *scaleSteps},
	}
	// Every flag is checked before any work: a bad one costs no
	// calibration load, simulation or mpirun job.
	if err := cfg.Check(); err != nil {
		return cli.Usagef("%w", err)
	}
	bridge := realrun.BridgeConfig{Steps: *bridgeSteps, Data: *bridgeData, Python: *bridgePython}
	if bridge.Ranks, err = realrun.ParseRankList(*bridgeRanks); err != nil {
		return cli.Usagef("%w", err)
	}
	if err := bridge.Check(MaxRealRanks(runtime.NumCPU())); err != nil {
		return cli.Usagef("%w", err)
	}
	// So are the output paths, checked now (--out created, and removed
	// again if the run fails and it is new; a new --json file created
	// only when the report is written) rather than found unwritable
	// after the run.
	var outs cli.OutputFiles
	defer outs.Discard()
	if err := outs.Dir("--out", *out); err != nil {
		return cli.Usagef("bench: %w", err)
	}
	var jsonFile *cli.OutputFile
	if *jsonOut != "-" {
		if jsonFile, err = outs.Open("--json", *jsonOut); err != nil {
			return cli.Usagef("bench: %w", err)
		}
	}

	for _, w := range ws {
		if warn := workload.SlowNodeWarning(w, *ranks, *real); warn != "" {
			fmt.Fprintf(stderr, "datahelix bench: warning: %s\n", warn)
		}
	}
	cfg.Machine = machine.This(ctx)
	cal, err := loadBenchCalibration(cli.CacheRoot(*cacheDir), *calFile, cfg.Machine)
	if err != nil {
		return err
	}
	if cal.Source == "default" {
		fmt.Fprintf(stderr, "datahelix bench: %s\n", cal.Note)
	} else if warn := workload.CoverageWarning(cal, ws); warn != "" {
		fmt.Fprintf(stderr, "datahelix bench: warning: %s\n", warn)
	}
	cfg.Eval.Calibration = cal
	// Progress goes to stderr unless --quiet: a bar on a terminal, plain
	// lines otherwise (an sbatch log, a file), and the sections' headers
	// and steps either way.
	var logw io.Writer
	var bar *progressbar.ProgressBar
	var bl *barLog
	if !*quiet {
		logw = stderr
		if cli.IsTerminal(stderr) {
			what := "simulating"
			if *real {
				what = "running"
			}
			bar = cli.NewBar(stderr, len(ws)*len(kinds), what)
			// Log lines clear the bar first and redraw it after, rather
			// than run on from it.
			bl = &barLog{bar: bar, w: stderr}
			logw = bl
			cfg.Eval.Progress = bl.set
		} else {
			cfg.Eval.Log = logw
		}
	}
	realrun.SetRealEnv(realrun.RealEnv{CacheDir: cli.CacheRoot(*cacheDir), Log: logw, Bridge: bridge})
	cfg.Log = logw
	rep, err := BuildReport(ctx, cfg)
	if bl != nil {
		bl.finish()
	}
	if err != nil {
		return err
	}
	text := stdout
	if *jsonOut == "-" {
		text = stderr
	}
	if err := rep.WriteText(text); err != nil {
		return err
	}
	if err := rep.WriteCSV(*out); err != nil {
		return err
	}
	figs, err := rep.WritePlots(*out, cfg.Timeline)
	if err != nil {
		return err
	}
	fmt.Fprintf(text, "\nwrote %s (CSV) and %d figures: %s\n", *out, len(figs), strings.Join(benchBaseNames(figs), ", "))
	if why := rep.TimelineMissing(cfg.Timeline); why != "" {
		fmt.Fprintln(text, why)
	}
	if *jsonOut == "-" {
		if err := rep.WriteJSON(stdout); err != nil {
			return err
		}
	}
	if jsonFile != nil {
		if err := jsonFile.Replace(rep.WriteJSON); err != nil {
			return fmt.Errorf("bench: --json: %w", err)
		}
	}
	return outs.Close()
}

// barLog writes log lines above a progress bar: it clears the bar's line,
// writes the line, and draws the bar again below it, so that a line does
// not run on from the bar ("running 50% |####| (2/4)bench: real: ...").
// Its set moves the bar; both are safe for concurrent use.
type barLog struct {
	mu  sync.Mutex
	bar *progressbar.ProgressBar
	w   io.Writer
	// done is set once the bar finished: lines are then written as they
	// are (the sections after the evaluation).
	done bool
}

func (b *barLog) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done {
		return b.w.Write(p)
	}
	b.bar.Clear()
	n, err := b.w.Write(p)
	b.bar.RenderBlank()
	return n, err
}

// set shows done of total steps (EvalConfig.Progress): the total is the
// evaluation's, which for a real run leaves out the oracle.
func (b *barLog) set(done, total int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done {
		return
	}
	if b.bar.GetMax() != total {
		b.bar.ChangeMax(total)
	}
	b.bar.Set(done)
}

// finish clears the bar for good.
func (b *barLog) finish() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.done {
		b.bar.Finish()
		b.bar.Clear()
		b.done = true
	}
}

// builtinWorkloads lists the built-in workloads' names for the help.
func builtinWorkloads() []string {
	ws, err := workload.Workloads()
	if err != nil { // the embedded files are checked by bench's tests
		return []string{err.Error()}
	}
	return workload.WorkloadNames(ws)
}

// noEmptyItems refuses a comma list with an empty item ("a,,b", "a,"),
// as --workloads does.
func noEmptyItems(flag, list string) error {
	for _, f := range strings.Split(list, ",") {
		if strings.TrimSpace(f) == "" {
			return cli.Usagef("bench: %s: empty item in %q", flag, list)
		}
	}
	return nil
}

// loadBenchCalibration picks the calibration: the --calibration file, else the
// one cached for this machine and decoder, else the built-in default.
func loadBenchCalibration(root, file string, m machine.Machine) (*costmodel.Calibration, error) {
	if file != "" {
		cal, err := workload.LoadCalibration(file)
		if err != nil {
			// A bad flag (exit 2): a file that does not open ("open
			// FILE: ..."), or FILE: invalid calibration: ...
			if pe := (*os.PathError)(nil); errors.As(err, &pe) {
				err = pe
			}
			return nil, cli.Usagef("bench: --calibration: %w", err)
		}
		cal.Source = file
		return cal, nil
	}
	return workload.CachedCalibration(root, m)
}

func benchBaseNames(paths []string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = filepath.Base(p)
	}
	return out
}
