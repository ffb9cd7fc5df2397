package realrun

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/datahelix/datahelix/decode"
	"github.com/datahelix/datahelix/gpu"
	"github.com/datahelix/datahelix/internal/bench/eval"
	"github.com/datahelix/datahelix/internal/bench/workload"
	"github.com/datahelix/datahelix/internal/costmodel"
	"github.com/datahelix/datahelix/internal/metrics"
	"github.com/datahelix/datahelix/internal/reader"
	"github.com/datahelix/datahelix/internal/shardindex"
	"github.com/datahelix/datahelix/internal/sim"
	"github.com/datahelix/datahelix/internal/step"
)

// realJob is one mpirun job of datahelix run: a workload's generated
// dataset, the loaders it runs one after the other, the GPU the
// provisioning rule gives it on this machine, and what it measured.
type realJob struct {
	w       *workload.Workload
	data    *realDataset
	ranks   int
	batch   int
	workers int // W per rank on this machine
	horizon int
	steps   int
	frames  int
	size    int
	seed    uint64
	cores   int
	loaders []step.Kind
	// oversub is how many decode threads share a core when all run:
	// ranks x W / cores (at least 1). The provisioning rule counts the
	// cores the ranks really have.
	oversub float64
	cost    *measuredCosts
	// modelMeanUS is the calibrated cost model's mean prediction for the
	// samples of the run (what the simulator's true costs are).
	modelMeanUS float64
	samples     *workload.DatasetSamples
	gpuFlags    []string  // --gpu-* flags as passed to datahelix run
	model       gpu.Model // as datahelix run parses those flags
	setup       eval.Setup

	// repeat is how many times each loader runs (1 when 0); results are
	// the mean over the runs, runs each run's, by loader name.
	repeat  int
	results []eval.Result
	runs    map[string][]eval.Result
	// records are each run's step records, by loader name.
	records map[string][][]metrics.StepRecord
	// stats are how each run's job used the machine, by loader name.
	stats map[string][]JobStats
}

// realWorkers is W per rank in a real run: the scale's, at most the
// workload's.
func realWorkers(w *workload.Workload, sc RealScale) int { return max(min(sc.Workers, w.Workers), 1) }

// prepareRealJob generates the workload's dataset (cached), measures its
// mean preparation cost on this machine and applies the provisioning rule
// to it: the GPU step makes the ranks' mean preparation throughput 1.2x
// what the GPUs consume, counting the cores the ranks share (ranks x W
// threads on Cores cores). Slow nodes are not emulated in real runs.
func prepareRealJob(ctx context.Context, re RealEnv, w *workload.Workload, cal *costmodel.Calibration, ranks, batch, steps int, seed uint64, loaders []step.Kind) (*realJob, error) {
	if batch <= 0 {
		batch = w.Batch
	}
	wk := realWorkers(w, re.Scale)
	j := &realJob{w: w, ranks: ranks, batch: batch, workers: wk, horizon: max(2*wk, 8), steps: steps, frames: w.Frames, size: w.Size,
		seed: seed, cores: re.Cores, loaders: loaders}
	j.oversub = max(1, float64(ranks*wk)/float64(re.Cores))
	rd, err := ensureRealDataset(ctx, re, w, ranks, seed)
	if err != nil {
		return nil, err
	}
	j.data = rd
	ds, err := decode.OpenDataset(rd.Dir, shardindex.Dir(re.CacheDir))
	if err != nil {
		return nil, workload.Wrapf(err, "workload %s", w.Name)
	}
	defer ds.Close()
	if j.cost, err = measureDataset(ctx, ds, j.frames, j.size, re.Scale.MeasureRepeat); err != nil {
		return nil, workload.Wrapf(err, "workload %s", w.Name)
	}
	j.samples, err = workload.NewDatasetSamples(ds, cal, workload.DatasetSimConfig{Ranks: ranks, Batch: batch, Steps: steps, Workers: wk,
		Frames: j.frames, Size: j.size, Seed: seed})
	if err != nil {
		return nil, workload.Wrapf(err, "workload %s", w.Name)
	}
	j.modelMeanUS = j.samples.MeanCostUS
	// The rule with this machine's W and no slow node, on the measured
	// cost scaled by the oversubscription.
	wr := *w
	wr.Workers = wk
	wr.Cluster.SlowNodes = nil
	g := wr.GPUStep(j.cost.MeanUS*j.oversub, batch, ranks)
	m, lock := wr.ProvisionedModel(g, j.samples.Samples, ranks, steps, batch, j.samples.MeanFrames, j.samples.MeanTokens)
	j.gpuFlags, j.model = gpuFlags(m)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	j.setup = eval.Setup{Workload: w.Name, Skew: w.Skew, Ranks: ranks, Batch: batch, Workers: wk, Horizon: j.horizon, Steps: steps,
		MeanCostUS: j.cost.MeanUS, MeanFrames: j.samples.MeanFrames, MeanTokens: j.samples.MeanTokens, GPUStepMS: ms(g),
		GPUBaseMS: ms(j.model.Base), GPUSampleMS: ms(j.model.PerSample), GPUFrameMS: ms(j.model.PerFrame),
		GPUTokenUS:     float64(j.model.PerToken) / float64(time.Microsecond),
		SplitWorkRatio: splitWorkRatio(j.samples.Samples, ranks, steps), LockstepFactor: lock,
		Imbalance: streamImbalance(j.measuredSamples, ranks, steps, j.horizon)}
	return j, nil
}

// costText prints a preparation cost of us microseconds readably: in ms
// from 1 ms up, else in µs (a text sample's 40 µs is not "0.0 ms").
func costText(us float64) string {
	if us >= 999.5 {
		return fmt.Sprintf("%.1f ms", us/1000)
	}
	return fmt.Sprintf("%.0f µs", us)
}

// gpuFlags returns datahelix run's --gpu-* flags for model m (rounded to
// whole microseconds, printed exactly) and the model datahelix run parses
// from them, which the simulator of the same run must use.
func gpuFlags(m gpu.Model) ([]string, gpu.Model) {
	us := func(d time.Duration) int64 { return d.Round(time.Microsecond).Microseconds() }
	msText := func(d time.Duration) string { return strconv.FormatFloat(float64(us(d))/1000, 'f', -1, 64) }
	flags := []string{"--gpu-step-ms", msText(m.Base), "--gpu-ms-per-sample", msText(m.PerSample),
		"--gpu-ms-per-frame", msText(m.PerFrame), "--gpu-us-per-token", strconv.FormatInt(us(m.PerToken), 10)}
	return flags, modelFromFlags(flags)
}

// modelFromFlags parses --gpu-* flag pairs as datahelix run does
// (milliseconds and microseconds as float64, truncated to nanoseconds).
func modelFromFlags(flags []string) gpu.Model {
	var m gpu.Model
	for i := 0; i+1 < len(flags); i += 2 {
		v, _ := strconv.ParseFloat(flags[i+1], 64)
		ms := time.Duration(v * float64(time.Millisecond))
		switch flags[i] {
		case "--gpu-step-ms":
			m.Base = ms
		case "--gpu-ms-per-sample":
			m.PerSample = ms
		case "--gpu-ms-per-frame":
			m.PerFrame = ms
		case "--gpu-us-per-token":
			m.PerToken = time.Duration(v * float64(time.Microsecond))
		}
	}
	return m
}

// sampleSource is a simulator sample source (sim.Config.Samples).
type sampleSource func(step int64, rank int) []sim.Sample

// splitWorkRatio is the CPU work of the source's samples with clips split
// as the splitting loaders do over their unsplit work.
func splitWorkRatio(src sampleSource, ranks, steps int) float64 {
	var split, whole float64
	for t := range steps {
		for r := range ranks {
			for _, x := range src(int64(t), r) {
				whole += float64(x.Cost)
				if len(x.Parts) > 1 {
					for _, p := range x.Parts {
						split += float64(p)
					}
				} else {
					split += float64(x.Cost)
				}
			}
		}
	}
	if whole == 0 {
		return 1
	}
	return split / whole
}

// streamImbalance is Synth.Imbalance for any sample source at reference
// speed: per window of horizon steps the busiest rank's cost over the mean
// rank's, minus 1, averaged over windows.
func streamImbalance(src sampleSource, ranks, steps, horizon int) float64 {
	return workload.Imbalance(src, ranks, steps, horizon, slices.Repeat([]float64{1}, ranks))
}

// refOfID unpacks reader.SampleRef.ID: shard and position of a sample id.
func refOfID(id uint64) reader.SampleRef {
	return reader.SampleRef{Shard: int(id >> 24 & 0xffffff), Index: int(id & 0xffffff)}
}

// measuredSamples is the run's sample source with the true costs measured
// on this machine instead of the cost model's predictions (the estimates
// the planner sees are unchanged; split parts keep their proportions).
func (j *realJob) measuredSamples(step int64, rank int) []sim.Sample {
	xs := slices.Clone(j.samples.Samples(step, rank))
	for i := range xs {
		x := &xs[i]
		ref := refOfID(x.ID)
		c := j.cost.US[ref.Shard][ref.Index]
		if len(x.Parts) > 0 {
			parts := make([]int64, len(x.Parts))
			for k, p := range x.Parts {
				parts[k] = max(p*c/max(x.Cost, 1), 1)
			}
			x.Parts = parts
		}
		x.Cost = c
	}
	return xs
}

// args are the command line of datahelix run for loader k.
func (j *realJob) args(k step.Kind, cacheDir, jsonFile, traceFile string) []string {
	a := []string{"run", "--data", j.data.Dir, "--cache-dir", cacheDir, "--loader", k.String(),
		"--batch", strconv.Itoa(j.batch), "--workers", strconv.Itoa(j.workers), "--horizon", strconv.Itoa(j.horizon),
		"--steps", strconv.Itoa(j.steps), "--frames", strconv.Itoa(j.frames), "--size", strconv.Itoa(j.size),
		"--seed", strconv.FormatUint(j.seed, 10)}
	a = append(a, j.gpuFlags...)
	return append(a, "--json", jsonFile, "--trace", traceFile, "--quiet")
}

// run runs each loader in its own mpirun job of datahelix run (so that
// what the rest of the shared machine used is known per loader), all
// loaders in turn, repeat times, and converts the JSON summaries and
// traces into results: per run, and their mean. done, when not nil, is
// called after each mpirun job.
func (j *realJob) run(ctx context.Context, re RealEnv, done func()) error {
	tmp, err := os.MkdirTemp("", "datahelix-real-")
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	defer os.RemoveAll(tmp)
	re.Logf("real: %s: %d ranks x W=%d on %d cores (x%.1f oversubscribed), B=%d, %d steps, GPU step %.1f ms (lockstep factor %.2f) from a measured mean cost of %s",
		j.w.Name, j.ranks, j.workers, j.cores, j.oversub, j.batch, j.steps, j.setup.GPUStepMS, j.setup.LockstepFactor, costText(j.cost.MeanUS))
	j.records, j.stats, j.runs = map[string][][]metrics.StepRecord{}, map[string][]JobStats{}, map[string][]eval.Result{}
	for range max(j.repeat, 1) {
		for _, k := range j.loaders {
			sum, recs, st, err := j.runOne(ctx, re, k, tmp)
			if err != nil {
				return err
			}
			name := k.String()
			j.records[name] = append(j.records[name], recs)
			j.stats[name] = append(j.stats[name], st)
			rs, err := realResults(j.w, []metrics.Summary{sum}, map[string][]metrics.StepRecord{name: recs}, j.horizon, j.ranks, map[string]JobStats{name: st})
			if err != nil {
				return err
			}
			j.runs[name] = append(j.runs[name], rs[0])
			if done != nil {
				done()
			}
		}
	}
	j.results = j.results[:0]
	for _, k := range j.loaders {
		r, err := meanResult(j.runs[k.String()])
		if err != nil {
			return err
		}
		j.results = append(j.results, r)
	}
	return nil
}

// runOne runs loader k once and reads its summary and records.
func (j *realJob) runOne(ctx context.Context, re RealEnv, k step.Kind, tmp string) (metrics.Summary, []metrics.StepRecord, JobStats, error) {
	jsonFile, traceFile := filepath.Join(tmp, k.String()+".json"), filepath.Join(tmp, k.String()+".jsonl")
	os.Remove(jsonFile)
	os.Remove(traceFile)
	expect := time.Duration(float64(j.steps) * j.setup.GPUStepMS * float64(time.Millisecond))
	_, st, err := re.mpiRunStats(ctx, 2*time.Minute+10*expect, j.ranks, nil, re.Binary, j.args(k, re.CacheDir, jsonFile, traceFile)...)
	if err != nil {
		return metrics.Summary{}, nil, st, err
	}
	re.Logf("real: %s %s: %.1fs, the job used %.2f cores, other processes %.2f (load %.1f -> %.1f)",
		j.w.Name, k, st.Wall.Seconds(), st.CPU.Seconds()/st.Wall.Seconds(), st.OthersCores, st.Load[0], st.Load[1])
	data, err := os.ReadFile(jsonFile)
	if err != nil {
		return metrics.Summary{}, nil, st, fmt.Errorf("bench: datahelix run wrote no summary: %w", err)
	}
	ss, err := ParseRunSummaries(data)
	if err != nil {
		return metrics.Summary{}, nil, st, err
	}
	if len(ss) != 1 || ss[0].Loader != k.String() {
		return metrics.Summary{}, nil, st, fmt.Errorf("%w: datahelix run --loader %s summarized %d loaders", ErrReal, k, len(ss))
	}
	f, err := os.Open(traceFile)
	if err != nil {
		return metrics.Summary{}, nil, st, fmt.Errorf("bench: datahelix run wrote no trace: %w", err)
	}
	defer f.Close()
	recs, err := ParseRunTrace(f)
	if err != nil {
		return metrics.Summary{}, nil, st, err
	}
	return ss[0], recs[k.String()], st, nil
}

// Loaders drops the simulation-only loaders (the oracle, torch-ddp,
// torch-pack: step.Kind.SimOnly) from a loader list.
func Loaders(ks []step.Kind) []step.Kind {
	var out []step.Kind
	for _, k := range ks {
		if !k.SimOnly() {
			out = append(out, k)
		}
	}
	return out
}

// usage sums the loaders' jobs: wall time, the cores the jobs used and
// the cores other processes used on average (-1 when unknown), and the
// highest load average seen.
func (j *realJob) usage() (wall time.Duration, cores, others, load float64) {
	var cpu time.Duration
	var ow float64
	var known time.Duration
	for _, sts := range j.stats {
		for _, st := range sts {
			wall += st.Wall
			cpu += st.CPU
			if st.OthersCores >= 0 {
				ow += st.OthersCores * st.Wall.Seconds()
				known += st.Wall
			}
			load = max(load, st.Load[0], st.Load[1])
		}
	}
	others = -1
	if known > 0 {
		others = ow / known.Seconds()
	}
	if wall > 0 {
		cores = cpu.Seconds() / wall.Seconds()
	}
	return wall, cores, others, load
}

// cpuOverWork is the jobs' CPU time over the measured (unsplit) decode
// time of the samples their steps trained.
func (j *realJob) cpuOverWork() float64 { return j.cpuOverWorkOf() }

// cpuOverWorkOf is cpuOverWork over the runs of the given loaders only
// (all when none is given); 0 when nothing ran.
func (j *realJob) cpuOverWorkOf(ks ...step.Kind) float64 {
	var cpu time.Duration
	runs := 0
	for name, sts := range j.stats {
		if len(ks) > 0 && !slices.ContainsFunc(ks, func(k step.Kind) bool { return k.String() == name }) {
			continue
		}
		for _, st := range sts {
			cpu += st.CPU
			runs++
		}
	}
	work := float64(runs*j.steps*j.ranks*j.batch) * j.cost.MeanUS * float64(time.Microsecond)
	if work <= 0 {
		return 0
	}
	return float64(cpu) / work
}

var (
	evalJobsMu sync.Mutex
	// evalJobs are the mpirun jobs behind each real evaluation, for the
	// sections that compare them with the simulator.
	evalJobs = map[*eval.Evaluation][]*realJob{}
)

// jobsOf returns the jobs that produced ev (nil for a simulation).
func jobsOf(ev *eval.Evaluation) []*realJob {
	if ev == nil {
		return nil
	}
	evalJobsMu.Lock()
	defer evalJobsMu.Unlock()
	return evalJobs[ev]
}

// Evaluate is bench.RunReal after the configuration's defaults.
func Evaluate(ctx context.Context, cfg eval.EvalConfig) (*eval.Evaluation, error) {
	re, err := CurrentRealEnv()
	if err != nil {
		return nil, err
	}
	loaders := Loaders(cfg.Loaders)
	if len(loaders) == 0 {
		return nil, fmt.Errorf("bench: --real needs a loader other than oracle (simulation only)")
	}
	ev := &eval.Evaluation{Mode: "real"}
	var jobs []*realJob
	// Progress moves per mpirun job, not per workload: one workload is
	// several jobs of minutes each.
	done, total := 0, len(cfg.Workloads)*len(loaders)
	progress := func() {
		done++
		if cfg.Progress != nil {
			cfg.Progress(done, total)
		}
	}
	for _, w := range cfg.Workloads {
		j, err := prepareRealJob(ctx, re, w, cfg.Calibration, cfg.Ranks, cfg.Batch, cfg.Steps, cfg.Seed, loaders)
		if err != nil {
			return nil, err
		}
		if err := j.run(ctx, re, progress); err != nil {
			return nil, workload.Wrapf(err, "workload %s", w.Name)
		}
		jobs = append(jobs, j)
		ev.Setups = append(ev.Setups, j.setup)
		ev.Results = append(ev.Results, j.results...)
		if cfg.KeepTimelines {
			for _, k := range []step.Kind{step.KindTorch, step.KindHelix} {
				if rs := j.records[k.String()]; len(rs) > 0 && len(rs[0]) > 0 {
					ev.Timelines = append(ev.Timelines, eval.Timeline{Workload: w.Name, Loader: k.String(), Ranks: j.ranks, Records: rs[0]})
				}
			}
		}
	}
	evalJobsMu.Lock()
	evalJobs[ev] = jobs
	evalJobsMu.Unlock()
	return ev, nil
}
