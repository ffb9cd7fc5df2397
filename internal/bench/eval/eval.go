package eval

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/datahelix/datahelix/gpu"
	"github.com/datahelix/datahelix/internal/bench/workload"
	"github.com/datahelix/datahelix/internal/costmodel"
	"github.com/datahelix/datahelix/internal/metrics"
	"github.com/datahelix/datahelix/internal/planlimits"
	"github.com/datahelix/datahelix/internal/sim"
	"github.com/datahelix/datahelix/internal/step"
	"github.com/datahelix/datahelix/plan"
)

// AllLoaders are the loaders an evaluation compares, baselines first.
var AllLoaders = []step.Kind{step.KindTorch, step.KindTorchDDP, step.KindTorchPack, step.KindLocal, step.KindStatic, step.KindHelix,
	step.KindHelixNoGate, step.KindHelixNoTrain, step.KindOracle}

// Network is the simulated exchange network of every rank.
type Network struct {
	BandwidthMBs float64 `json:"bandwidth_mb_s"` // per rank, MB/s (10^6 bytes)
	LatencyUS    int64   `json:"latency_us"`     // per message
}

// DefaultNetwork is a 200 Gb/s HDR InfiniBand NIC shared by the 4 ranks
// of a node (about 6 GB/s each; 5 GB/s taken), 10 µs per message.
var DefaultNetwork = Network{BandwidthMBs: 5000, LatencyUS: 10}

// The network's range: the simulator takes the bandwidth as fixed-point
// bytes/µs (plan.One = 1 MB/s), 1 to planlimits.Bandwidth, and the planner
// clamps both figures to these limits. A rate below MinBandwidthMBs
// would truncate to 0 and one above MaxBandwidthMBs overflow or be
// clamped: either would simulate another network than the report names.
const (
	MinBandwidthMBs = 1.0 / plan.One
	MaxBandwidthMBs = float64(planlimits.Bandwidth / plan.One) // about 268 TB/s
	MaxLatencyUS    = planlimits.Latency                       // about 72 minutes
)

// Check reports why n cannot be simulated, naming the datahelix bench
// flag that sets the bad field and its range. The zero Network, which
// EvalConfig takes for DefaultNetwork, fails here: a caller that means
// the default says so before calling Check.
func (n Network) Check() error {
	switch {
	case !(n.BandwidthMBs >= MinBandwidthMBs && n.BandwidthMBs <= MaxBandwidthMBs):
		return fmt.Errorf("bench: --bandwidth-mbs %g: want %g (1/%d) to %g MB/s, the simulator's fixed-point range",
			n.BandwidthMBs, MinBandwidthMBs, plan.One, MaxBandwidthMBs)
	case n.LatencyUS < 0 || n.LatencyUS > MaxLatencyUS:
		return fmt.Errorf("bench: --latency-us %d: want 0..%d", n.LatencyUS, int64(MaxLatencyUS))
	}
	return nil
}

// FixedBandwidth is the bandwidth in the simulator's fixed point.
func (n Network) FixedBandwidth() int64 { return int64(n.BandwidthMBs * plan.One) }

// GateMarginUS is the transfer-cost gate's margin, as datahelix run's
// --margin-us default.
const GateMarginUS = 200

// EvalConfig configures an evaluation of workloads by loaders.
type EvalConfig struct {
	// MemoryLimit is the memory, bytes, a simulation may be estimated to
	// need (SimMemory); 0: three quarters of this machine's.
	MemoryLimit float64
	Workloads   []*workload.Workload
	Loaders     []step.Kind // nil: AllLoaders
	Ranks       int         // world size N
	Steps       int         // training steps per run
	Batch       int         // per-rank batch; 0: each workload's own
	Seed        uint64
	// Calibration gives the sample costs (nil: DefaultCalibration).
	Calibration *costmodel.Calibration
	Network     Network // zero: DefaultNetwork
	// Parallel is how many simulations run at once (0: GOMAXPROCS).
	Parallel int
	// KeepTimelines keeps the per-rank step records of torch and helix
	// for every workload, for the timeline figure.
	KeepTimelines bool
	// KeepPlanTimes measures the planner's wall time per step (the one
	// clock reading of a simulation; it makes results vary run to run).
	KeepPlanTimes bool
	// NoSplit is an ablation: no loader splits clips into keyframe-aligned
	// tasks (Synth.NoSplit). The runtime splits; the default is false.
	NoSplit bool
	// NoiseOnTruth puts the estimate error on the true costs instead
	// (Synth.NoiseOnTruth): a sensitivity check.
	NoiseOnTruth bool
	// Progress, when set, is called after each simulation.
	Progress func(done, total int)
	// Log, when set, receives plain progress lines, for logs where a
	// progress bar cannot be drawn: what is simulated, then one line per
	// finished simulation.
	Log io.Writer
}

// Setup is how a workload was run: the provisioning rule's inputs and
// the GPU it derived.
type Setup struct {
	Workload string `json:"workload"`
	Skew     string `json:"skew"`
	Ranks    int    `json:"ranks"`
	Batch    int    `json:"batch"`
	Workers  int    `json:"workers"`
	Horizon  int    `json:"horizon"`
	Steps    int    `json:"steps"`
	// Ratio is the provisioning rule's ratio the workload ran at.
	Ratio      float64 `json:"ratio"`
	MeanCostUS float64 `json:"mean_cost_us"`
	MeanFrames float64 `json:"mean_frames"`
	MeanTokens float64 `json:"mean_tokens"`
	// GPUStepMS is the GPU's step time on the mean batch, the rule's g.
	// LockstepFactor is the mean slowest rank's step over it when every
	// rank trains its own samples (torch, local): how much more
	// slowly those loaders' GPUs consume (workload.Workload.ProvisionedModel).
	GPUStepMS      float64 `json:"gpu_step_ms"`
	LockstepFactor float64 `json:"lockstep_factor"`
	GPUBaseMS      float64 `json:"gpu_base_ms"`
	GPUSampleMS    float64 `json:"gpu_ms_per_sample"`
	GPUFrameMS     float64 `json:"gpu_ms_per_frame"`
	GPUTokenUS     float64 `json:"gpu_us_per_token"`
	SlowRanks      int     `json:"slow_ranks"`
	// SplitWorkRatio is the CPU work of splitting loaders over torch's
	// (Synth.SplitWorkRatio).
	SplitWorkRatio float64 `json:"split_work_ratio"`
	// Imbalance is Synth.Imbalance over the run's steps and the horizon:
	// what cross-rank balancing can gain (0 when not measured).
	Imbalance float64 `json:"imbalance"`
	// LoadAutocorr is workload.LoadAutocorr over the run (lags
	// workload.SkewLagMin to SkewLagMax, torch's layout, the run's
	// slowdowns): the measurement behind the skew label, at this run's
	// ranks, steps and seed (0 when not measured or the run is shorter
	// than the lags).
	LoadAutocorr float64 `json:"load_autocorr"`
}

// Result is one loader's run of one workload. The first seven fields are
// the keys the issue asks of the JSON; the report's "units" object
// (Units) says the unit of each.
type Result struct {
	Workload string `json:"workload"`
	Loader   string `json:"loader"`
	Ranks    int    `json:"ranks"`
	// MissRate is the fraction of rank-steps that missed: the rank's
	// batch was not ready when its GPU asked for it (Misses over Ranks x
	// Steps).
	MissRate float64 `json:"miss_rate"`
	// GPUWaitFrac is the GPUs' input wait, GPUWaitS over Ranks x WallS:
	// the time a GPU sat idle for want of its batch. It leaves out the
	// time a GPU idles in the gradient allreduce waiting for a slower
	// rank, so a loader can wait more than another and still train
	// faster.
	GPUWaitFrac float64 `json:"gpu_wait_frac"`
	// ThroughputSPS is samples trained per second, all ranks together.
	ThroughputSPS float64 `json:"throughput_sps"`
	// BytesMovedPerStep is the bytes exchanged between ranks, all ranks
	// together, mean per step.
	BytesMovedPerStep float64 `json:"bytes_moved_per_step"`
	Mode              string  `json:"mode"` // "sim" or "real"
	Skew              string  `json:"skew"`
	Steps             int     `json:"steps"`
	Batch             int     `json:"batch"`
	Workers           int     `json:"workers"`
	// Misses counts the rank-steps that missed.
	Misses int `json:"misses"`
	// GPUWaitS is the input wait in rank-seconds (summed over ranks);
	// WallS the run's wall time in seconds (first request to the slowest
	// rank's last step end).
	GPUWaitS    float64 `json:"gpu_wait_s"`
	WallS       float64 `json:"wall_s"`
	BatchesHash string  `json:"batches_hash"`
	// The steady figures leave out the warm-up, the first Horizon steps
	// (planned before any step was measured, and waiting for the first
	// batches to decode): they cover the remaining SteadySteps steps and
	// their wall time. When SteadySteps is 0 (Steps not longer than the
	// warm-up) they are undefined: 0 here, null in JSON (see
	// MarshalJSON), empty in CSV.
	//
	// The job's figures, the headline (a step lasts as long as its
	// slowest rank): SteadyStepMissRate is the fraction of steps in which
	// any rank missed; SteadyJobStallFrac the sum over steps of the
	// largest rank wait, over the wall time; SteadyEfficiency the
	// throughput over the GPUs' ceiling, ranks x batch / mean GPU step.
	SteadySteps         int     `json:"steady_steps"`
	SteadyStepMissRate  float64 `json:"steady_step_miss_rate"`
	SteadyJobStallFrac  float64 `json:"steady_job_stall_frac"`
	SteadyEfficiency    float64 `json:"steady_efficiency"`
	SteadyThroughputSPS float64 `json:"steady_throughput_sps"`
	// The per-rank steady figures, beside them: MissRate and GPUWaitFrac
	// without the warm-up.
	SteadyMissRate    float64 `json:"steady_miss_rate"`
	SteadyGPUWaitFrac float64 `json:"steady_gpu_wait_frac"`
	// The warm-up on its own: the job's start to the last rank's first
	// batch, and the sum over the warm-up steps of the largest rank wait.
	TimeToFirstBatchS float64 `json:"time_to_first_batch_s"`
	WarmupStallS      float64 `json:"warmup_stall_s"`
	// PlanUSP50 is the median planner time per step, µs (0 when not
	// measured, as only the scale section does: null in JSON);
	// ElapsedS the simulation's own run time, s. Both are timings: they
	// vary from run to run.
	PlanUSP50 float64 `json:"plan_us_p50"`
	ElapsedS  float64 `json:"elapsed_s"`
}

// HasSteady reports whether the steady figures are defined: the run
// had steps after its warm-up.
func (r Result) HasSteady() bool { return r.SteadySteps > 0 }

// MeanGPUStepS is the mean GPU step of the run's steady steps, in
// seconds: ranks x B over the GPU ceiling its efficiency was measured
// against (0 without steady steps or a GPU step). Loaders that train the
// same batches have the same; a lighter mix of samples gives a shorter one.
func (r Result) MeanGPUStepS() float64 {
	if !r.HasSteady() || !(r.SteadyEfficiency > 0) || !(r.SteadyThroughputSPS > 0) {
		return 0
	}
	return r.SteadyEfficiency * float64(r.Ranks*r.Batch) / r.SteadyThroughputSPS
}

// MarshalJSON writes the result with its steady figures null when they
// cover no step, as datahelix run's summary does: 0 would read as a
// perfect steady state; and plan_us_p50 null when it was not measured,
// not a planner taking no time.
func (r Result) MarshalJSON() ([]byte, error) {
	type plain Result // without this method
	out := struct {
		plain
		SteadyStepMissRate  *float64 `json:"steady_step_miss_rate"`
		SteadyJobStallFrac  *float64 `json:"steady_job_stall_frac"`
		SteadyEfficiency    *float64 `json:"steady_efficiency"`
		SteadyThroughputSPS *float64 `json:"steady_throughput_sps"`
		SteadyMissRate      *float64 `json:"steady_miss_rate"`
		SteadyGPUWaitFrac   *float64 `json:"steady_gpu_wait_frac"`
		PlanUSP50           *float64 `json:"plan_us_p50"`
	}{plain: plain(r)}
	if r.HasSteady() {
		out.SteadyStepMissRate, out.SteadyJobStallFrac, out.SteadyThroughputSPS = &r.SteadyStepMissRate, &r.SteadyJobStallFrac, &r.SteadyThroughputSPS
		out.SteadyMissRate, out.SteadyGPUWaitFrac = &r.SteadyMissRate, &r.SteadyGPUWaitFrac
		if r.SteadyEfficiency > 0 { // 0: no GPU step was measured
			out.SteadyEfficiency = &r.SteadyEfficiency
		}
	}
	if r.PlanUSP50 > 0 {
		out.PlanUSP50 = &r.PlanUSP50
	}
	return json.Marshal(out)
}

// SetSteady fills the steady and warm-up figures from metrics.SteadyState's.
func (r *Result) SetSteady(st metrics.Steady) {
	r.SteadySteps = st.Steps
	r.SteadyStepMissRate, r.SteadyJobStallFrac, r.SteadyEfficiency, r.SteadyThroughputSPS = st.StepMissRate, st.JobStallFrac, st.Efficiency, st.ThroughputSPS
	r.SteadyMissRate, r.SteadyGPUWaitFrac = st.MissRate, st.GPUWaitFrac
	r.TimeToFirstBatchS, r.WarmupStallS = float64(st.FirstBatchUS)/1e6, float64(st.WarmupStallUS)/1e6
}

// Timeline is the per-rank step records of one run, for the figure.
type Timeline struct {
	Workload string
	Loader   string
	Ranks    int
	Records  []metrics.StepRecord
}

// Evaluation is what RunSim (or a real runner) measured.
type Evaluation struct {
	Mode      string // "sim" or "real"
	Setups    []Setup
	Results   []Result // by workload, then loader, in the configured order
	Timelines []Timeline
}

// Check reports the first setting of c that cannot run, naming the
// datahelix bench flag that sets it, without running anything. Zero
// values that mean a default (Loaders, Network, Parallel, Batch) pass.
func (c *EvalConfig) Check() error {
	if len(c.Workloads) == 0 {
		return fmt.Errorf("bench: no workloads")
	}
	seen := map[string]bool{}
	for _, w := range c.Workloads {
		if seen[w.Name] {
			return fmt.Errorf("bench: two workloads named %s: the report tells workloads apart by name", w.Name)
		}
		seen[w.Name] = true
	}
	if c.Network != (Network{}) {
		if err := c.Network.Check(); err != nil {
			return err
		}
	}
	switch {
	case c.Ranks < 1 || c.Ranks > planlimits.Ranks:
		return fmt.Errorf("bench: --ranks %d: want 1..%d", c.Ranks, planlimits.Ranks)
	case c.Steps < 1:
		return fmt.Errorf("bench: --steps %d: want at least 1", c.Steps)
	case c.Batch < 0 || c.Batch > planlimits.Batch:
		return fmt.Errorf("bench: --batch %d: want 0 (the workload's) or 1..%d", c.Batch, planlimits.Batch)
	case c.Parallel < 0:
		return fmt.Errorf("bench: --parallel %d: want 0 (one per CPU) or more", c.Parallel)
	}
	for _, w := range c.Workloads {
		b := c.Batch
		if b == 0 {
			b = w.Batch
		}
		if err := checkSimMemory(w, c.Ranks, c.Steps, b, c.MemoryLimit, "--ranks", "--steps", "--batch"); err != nil {
			return err
		}
	}
	return nil
}

// Defaults checks c (Check) and fills the settings left zero that mean a
// default: every loader, the default calibration and network, and
// GOMAXPROCS simulations at once.
func (c *EvalConfig) Defaults() error {
	if err := c.Check(); err != nil {
		return err
	}
	if c.Loaders == nil {
		c.Loaders = AllLoaders
	}
	if c.Calibration == nil {
		c.Calibration = workload.DefaultCalibration()
	}
	if c.Network == (Network{}) {
		c.Network = DefaultNetwork
	}
	if c.Parallel == 0 {
		c.Parallel = runtime.GOMAXPROCS(0)
	}
	return nil
}

// plural is "1 rank", "2 ranks": n and the noun, with an s unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// prepared is a workload ready to simulate.
type prepared struct {
	w     *workload.Workload
	synth *workload.Synth
	setup Setup
	gpu   gpu.Model
	speed []int64
	// speedAt is the ranks' speed over time when the workload has noisy
	// neighbours (nil otherwise).
	speedAt func(step int64, rank int) int64
}

// prepare draws a workload's samples and applies the provisioning rule
// at ranks ranks and batch b (0: the workload's); measure says whether
// to measure Setup.Imbalance (it visits every sample of the run once,
// as the provisioning rule's LockstepFactor does); cfg, when not nil,
// gives the ablations. Once ctx is done, those visits draw no more
// samples and prepare returns ctx's error.
func prepare(ctx context.Context, w *workload.Workload, cal *costmodel.Calibration, ranks, b, steps int, seed uint64, measure bool, cfg *EvalConfig) (*prepared, error) {
	s, err := workload.NewSynth(w, cal, ranks, b, seed)
	if err != nil {
		return nil, err
	}
	draw := func(step int64, rank int) []sim.Sample {
		if ctx.Err() != nil {
			return nil
		}
		return s.Samples(step, rank)
	}
	if cfg != nil {
		s.NoSplit, s.NoiseOnTruth = cfg.NoSplit, cfg.NoiseOnTruth
	}
	b = s.Batch()
	cost, frames, tokens := s.Means()
	g := w.GPUStep(cost, b, ranks)
	m, lock := w.ProvisionedModel(g, draw, ranks, steps, b, frames, tokens)
	p := &prepared{w: w, synth: s, gpu: m}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	p.setup = Setup{Workload: w.Name, Skew: w.Skew, Ranks: ranks, Batch: b, Workers: w.Workers, Horizon: Horizon(w),
		Steps: steps, Ratio: w.Provision.Ratio, MeanCostUS: cost, MeanFrames: frames, MeanTokens: tokens, GPUStepMS: ms(g),
		GPUBaseMS: ms(m.Base), GPUSampleMS: ms(m.PerSample), GPUFrameMS: ms(m.PerFrame), GPUTokenUS: float64(m.PerToken) / float64(time.Microsecond),
		SplitWorkRatio: s.SplitWorkRatio(), LockstepFactor: lock}
	slow := w.Slowdowns(ranks)
	for _, sd := range slow {
		p.speed = append(p.speed, int64(sd*plan.One+0.5))
		if sd != 1 {
			p.setup.SlowRanks++
		}
	}
	if w.Cluster.Noisy != nil {
		p.speedAt = func(step int64, rank int) int64 {
			return int64(w.SlowdownAt(seed, step, rank, ranks)*plan.One + 0.5)
		}
	}
	if measure {
		p.setup.Imbalance = workload.Imbalance(draw, ranks, steps, p.setup.Horizon, slow)
		p.setup.LoadAutocorr = workload.LoadAutocorr(draw, ranks, steps, workload.SkewLagMin, workload.SkewLagMax,
			func(t int64, r int) float64 { return w.SlowdownAt(seed, t, r, ranks) })
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return p, nil
}

// Horizon is the runtime's default planning horizon for the workload's
// workers (spmd.Config: max(2W, 8)).
func Horizon(w *workload.Workload) int { return max(2*w.Workers, 8) }

// simConfig is the simulator's configuration for loader k.
func (p *prepared) simConfig(k step.Kind, cfg *EvalConfig) sim.Config {
	w, b, h := p.w, p.setup.Batch, p.setup.Horizon
	// The runtime's default decoded-memory budget: horizon batches of
	// F-frame clips.
	budget := int64(h) * int64(b) * int64(w.Frames) * int64(w.Size) * int64(w.Size) * 3
	// Every loader reads the WebDataset layout but torch-ddp, a map-style
	// dataset under DistributedSampler.
	samples := p.synth.Samples
	if k == step.KindTorchDDP {
		samples = p.synth.SamplesDDP
	}
	return sim.Config{
		Loader: k, Ranks: p.setup.Ranks, Batch: b, Steps: cfg.Steps, Workers: w.Workers, Horizon: h,
		Budget: budget, GPU: p.gpu, Bandwidth: cfg.Network.FixedBandwidth(),
		LatencyUS: cfg.Network.LatencyUS, Margin: GateMarginUS, Speed: p.speed, SpeedAt: p.speedAt,
		Samples: samples, Seed: cfg.Seed, KeepPlanTimes: cfg.KeepPlanTimes, Overheads: &DefaultOverheads,
	}
}

// ResultOf turns a simulation's summary into a Result.
func ResultOf(w *workload.Workload, s metrics.Summary, elapsed time.Duration) Result {
	return Result{Workload: w.Name, Loader: s.Loader, Ranks: s.Ranks, MissRate: s.MissRate, GPUWaitFrac: s.GPUWaitFrac,
		ThroughputSPS: s.ThroughputSPS, BytesMovedPerStep: s.BytesMovedPerStep, Mode: "sim", Skew: w.Skew,
		Steps: s.Steps, Batch: s.Batch, Workers: s.Workers, Misses: s.Misses, GPUWaitS: s.GPUWaitS, WallS: s.WallS,
		BatchesHash: s.BatchesHash, PlanUSP50: s.PlanUSP50, ElapsedS: elapsed.Seconds(),
		SteadySteps: s.SteadySteps, SteadyStepMissRate: s.SteadyStepMissRate, SteadyJobStallFrac: s.SteadyJobStallFrac,
		SteadyEfficiency: s.SteadyEfficiency, SteadyThroughputSPS: s.SteadyThroughputSPS,
		SteadyMissRate: s.SteadyMissRate, SteadyGPUWaitFrac: s.SteadyGPUWaitFrac,
		TimeToFirstBatchS: s.TimeToFirstBatchS, WarmupStallS: s.WarmupStallS}
}

// RunSim simulates every workload with every loader. Simulations run in
// parallel but each is deterministic, so the results (timings aside) are
// the same for the same configuration.
func RunSim(ctx context.Context, cfg EvalConfig) (*Evaluation, error) {
	if err := cfg.Defaults(); err != nil {
		return nil, err
	}
	ev := &Evaluation{Mode: "sim"}
	logf := func(format string, args ...any) {
		if cfg.Log != nil {
			fmt.Fprintf(cfg.Log, format, args...)
		}
	}
	nw, nl := len(cfg.Workloads), len(cfg.Loaders)
	logf("bench: simulating %s x %s at %s, %s\n", plural(nw, "workload"), plural(nl, "loader"), plural(cfg.Ranks, "rank"), plural(cfg.Steps, "step"))
	preps := make([]*prepared, len(cfg.Workloads))
	{
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(cfg.Parallel)
		for i, w := range cfg.Workloads {
			g.Go(func() error {
				p, err := prepare(gctx, w, cfg.Calibration, cfg.Ranks, cfg.Batch, cfg.Steps, cfg.Seed, true, &cfg)
				preps[i] = p
				return err
			})
		}
		if err := g.Wait(); err != nil {
			return nil, err
		}
	}
	ev.Results = make([]Result, len(preps)*nl)
	records := make([][]metrics.StepRecord, len(preps)*nl)
	var mu sync.Mutex
	done := 0
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(cfg.Parallel)
	for i, p := range preps {
		ev.Setups = append(ev.Setups, p.setup)
		for j, k := range cfg.Loaders {
			g.Go(func() error {
				if err := gctx.Err(); err != nil {
					return err
				}
				t0 := time.Now()
				res, err := sim.RunContext(gctx, p.simConfig(k, &cfg))
				if err != nil {
					return workload.Wrapf(err, "workload %s, loader %s", p.w.Name, k)
				}
				r := ResultOf(p.w, res.Summary, time.Since(t0))
				ev.Results[i*nl+j] = r
				if cfg.KeepTimelines && (k == step.KindTorch || k == step.KindHelix) {
					records[i*nl+j] = res.Records
				}
				mu.Lock()
				done++
				if cfg.Progress != nil {
					cfg.Progress(done, len(ev.Results))
				}
				logf("bench: simulated %s with %s (%d of %d, %.1f s)\n", p.w.Name, k, done, len(ev.Results), r.ElapsedS)
				mu.Unlock()
				return nil
			})
		}
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	for i, recs := range records {
		if recs != nil {
			r := ev.Results[i]
			ev.Timelines = append(ev.Timelines, Timeline{Workload: r.Workload, Loader: r.Loader, Ranks: r.Ranks, Records: recs})
		}
	}
	return ev, nil
}

// Mean averages evaluations of the same workloads and loaders under
// different seeds: each result's figures are the mean of the seeds'
// (counts rounded; ElapsedS their sum, the simulations' time in all), its
// batches hash and timelines the first seed's, and
// the setups the first seed's (their shapes depend on the workload, not
// the seed; the imbalance measured under the first). The evaluations must
// hold the same results in the same order.
func Mean(evs []*Evaluation) (*Evaluation, error) {
	if len(evs) == 0 {
		return nil, fmt.Errorf("bench: no evaluation to average")
	}
	first := evs[0]
	out := &Evaluation{Mode: first.Mode, Setups: first.Setups, Timelines: first.Timelines, Results: slices.Clone(first.Results)}
	if len(evs) == 1 {
		return out, nil
	}
	n := float64(len(evs))
	for i := range out.Results {
		m := &out.Results[i]
		var misses, steady float64
		*m = Result{Workload: m.Workload, Loader: m.Loader, Ranks: m.Ranks, Mode: m.Mode, Skew: m.Skew, Steps: m.Steps, Batch: m.Batch,
			Workers: m.Workers, BatchesHash: m.BatchesHash}
		for _, ev := range evs {
			if len(ev.Results) != len(first.Results) || ev.Results[i].Workload != m.Workload || ev.Results[i].Loader != m.Loader {
				return nil, fmt.Errorf("bench: evaluations of different runs cannot be averaged")
			}
			x := ev.Results[i]
			m.MissRate += x.MissRate / n
			m.GPUWaitFrac += x.GPUWaitFrac / n
			m.ThroughputSPS += x.ThroughputSPS / n
			m.BytesMovedPerStep += x.BytesMovedPerStep / n
			misses += float64(x.Misses) / n
			m.GPUWaitS += x.GPUWaitS / n
			m.WallS += x.WallS / n
			steady += float64(x.SteadySteps) / n
			m.SteadyStepMissRate += x.SteadyStepMissRate / n
			m.SteadyJobStallFrac += x.SteadyJobStallFrac / n
			m.SteadyEfficiency += x.SteadyEfficiency / n
			m.SteadyThroughputSPS += x.SteadyThroughputSPS / n
			m.SteadyMissRate += x.SteadyMissRate / n
			m.SteadyGPUWaitFrac += x.SteadyGPUWaitFrac / n
			m.TimeToFirstBatchS += x.TimeToFirstBatchS / n
			m.WarmupStallS += x.WarmupStallS / n
			m.PlanUSP50 += x.PlanUSP50 / n
			m.ElapsedS += x.ElapsedS
		}
		m.Misses, m.SteadySteps = int(math.Round(misses)), int(math.Round(steady))
	}
	return out, nil
}
