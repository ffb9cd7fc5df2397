package report

import (
	"math"
	"slices"
	"strings"

	"github.com/datahelix/datahelix/internal/bench/eval"
	"github.com/datahelix/datahelix/internal/bench/workload"
	"github.com/datahelix/datahelix/internal/costmodel"
	"github.com/datahelix/datahelix/internal/machine"
	"github.com/datahelix/datahelix/internal/step"
)

// Report is the whole benchmark report: how and where it ran, every
// workload x loader result, helix's comparison with the others, the
// summary the issue asks for, the goals, and the microbenchmark and
// validation sections. WriteText, WriteJSON, WriteCSV and WritePlots
// render it.
type Report struct {
	Machine machine.Machine `json:"machine"`
	Commit  string          `json:"commit"`
	// CommitSource is Machine.CommitSource: "binary" when Commit was
	// stamped into the binary at build, "repo" when it is the
	// repository's HEAD at run time.
	CommitSource string `json:"commit_source,omitempty"`
	// Units maps the JSON's fields to their units (Units).
	Units   map[string]string `json:"units"`
	Mode    string            `json:"mode"` // "sim" or "real"
	Ranks   int               `json:"ranks"`
	Steps   int               `json:"steps"`
	Seed    uint64            `json:"seed"`
	Network eval.Network      `json:"network"`
	// NoSplit marks the no-splitting ablation (EvalConfig.NoSplit).
	NoSplit bool `json:"no_split,omitempty"`
	// NoiseOnTruth marks the sensitivity run with the estimate error on
	// the true costs (EvalConfig.NoiseOnTruth).
	NoiseOnTruth bool            `json:"noise_on_truth,omitempty"`
	Calibration  CalibrationInfo `json:"calibration"`
	Workloads    []eval.Setup    `json:"workloads"`
	Results      []eval.Result   `json:"results"`
	Comparisons  []Comparison    `json:"comparisons"`
	Summary      Summary         `json:"summary"`
	Goals        []Goal          `json:"goals"`
	Sections     []Section       `json:"sections"`
	// ElapsedS is the report's own run time (a timing).
	ElapsedS float64 `json:"elapsed_s"`
	// Timelines are kept for the figures, not written to JSON.
	Timelines []eval.Timeline `json:"-"`
}

// CalibrationInfo says where the sample costs came from.
type CalibrationInfo struct {
	Source    string             `json:"source"`
	Note      string             `json:"note,omitempty"`
	Created   string             `json:"created,omitempty"`
	Machine   string             `json:"machine,omitempty"`
	MAPE      float64            `json:"mape"`
	SynthMAPE map[string]float64 `json:"synth_mape,omitempty"`
	// SplitRatio is, per preset, the measured CPU time of clips decoded
	// task by task over decoded whole.
	SplitRatio map[string]float64 `json:"split_ratio,omitempty"`
	// Presets are the generator presets the calibration measured;
	// Uncovered those the report's workloads draw from and it did not
	// (Calibration.UncoveredPresets; the note says so too).
	Presets   []string `json:"presets,omitempty"`
	Uncovered []string `json:"uncovered_presets,omitempty"`
}

// Versus is helix against one other loader on one workload, in steady
// state (after the warm-up). A field is nil when it is undefined: the
// other loader had too little to reduce (ReduceFloor), a run had no
// steady steps, or the loader did not run.
type Versus struct {
	// The job's figures, the headline: 1 - helix/other of the steady
	// step-miss rate and of the steady job stall, each defined only where
	// the other loader's is at least ReduceFloor; helix/other of the
	// steady throughput.
	StepMissReduction *float64 `json:"step_miss_reduction"`
	StallReduction    *float64 `json:"stall_reduction"`
	ThroughputRatio   *float64 `json:"throughput_ratio"`
	// The per-rank steady figures, beside them: 1 - helix/other of the
	// miss rate over rank-steps and of the GPU wait fraction, defined
	// where the other's is above 0.
	MissReduction *float64 `json:"miss_reduction"`
	WaitReduction *float64 `json:"wait_reduction"`
	// EfficiencyRatio is helix/other of the steady GPU efficiency
	// (throughput over the loader's own GPU ceiling, ranks x B / its mean
	// GPU step). Between loaders that train the same batches it equals
	// ThroughputRatio; between loaders that train others (torch-ddp's
	// global shuffle against the WebDataset order) it compares the share
	// of time the GPUs train, where samples/s would compare different
	// work.
	EfficiencyRatio *float64 `json:"efficiency_ratio"`
}

// ReduceFloor is the least steady step-miss rate or job stall fraction
// a baseline must have for a reduction of it to be reported: below it a
// reduction is a ratio of noise. The absolute figures are always in the
// results.
const ReduceFloor = 0.01

// Attribution splits helix's steady throughput gain over torch into the
// three effects the issue separates, each a ratio of steady throughputs
// (nil when a loader did not run): their product is helix/torch.
type Attribution struct {
	// Scheduling is within-rank scheduling: local over torch (the same
	// samples on the same ranks, decoded earliest deadline first by every
	// worker, heavy clips split).
	Scheduling *float64 `json:"scheduling"`
	// DecodeBalancing is cross-rank decode balancing: helix-notrain over
	// local.
	DecodeBalancing *float64 `json:"decode_balancing"`
	// GPUBalancing is GPU-work balancing: helix over helix-notrain.
	GPUBalancing *float64 `json:"gpu_balancing"`
	// PackVsTorch is what a user gets by balancing GPU work without
	// datahelix (torch-pack over torch), HelixVsPack helix over that, and
	// DDPVsTorch the map-style DistributedSampler layout over WebDataset's.
	PackVsTorch *float64 `json:"torch_pack_vs_torch"`
	HelixVsPack *float64 `json:"helix_vs_torch_pack"`
	DDPVsTorch  *float64 `json:"torch_ddp_vs_torch"`
}

// Comparison is helix against every other loader on one workload.
type Comparison struct {
	Workload    string `json:"workload"`
	Skew        string `json:"skew"`
	VsTorch     Versus `json:"vs_torch"`
	VsTorchDDP  Versus `json:"vs_torch_ddp"`
	VsTorchPack Versus `json:"vs_torch_pack"`
	VsLocal     Versus `json:"vs_local"`
	VsStatic    Versus `json:"vs_static"`
	// OracleVsTorch is the oracle in helix's place against torch: what
	// any loader could gain on this workload (simulation only).
	OracleVsTorch Versus `json:"oracle_vs_torch"`
	// HelixVsOracle is helix's steady throughput over the oracle's.
	HelixVsOracle *float64 `json:"helix_vs_oracle"`
	// BestOther is the loader with the highest steady GPU efficiency
	// besides helix, its ablations and the oracle; HelixVsBest helix's
	// steady efficiency over its (Versus.EfficiencyRatio: the throughput
	// ratio where both train the same batches). BestOtherSPS and
	// HelixVsBestSPS are the same by samples/s, beside them: a loader
	// training a lighter mix of samples in the window (torch-ddp, when the
	// WebDataset streams draw the sources by shard and it by sample) may
	// deliver more samples with idler GPUs.
	BestOther      string      `json:"best_other"`
	HelixVsBest    *float64    `json:"helix_vs_best"`
	BestOtherSPS   string      `json:"best_other_samples"`
	HelixVsBestSPS *float64    `json:"helix_vs_best_samples"`
	Attribution    Attribution `json:"attribution"`
}

// Summary is the top-level figures of the report, in steady state. The
// goals' figures are over the workloads labelled skewed (SkewedWorkloads)
// or uniform, means and extremes over those where the figure is defined;
// the counts say how many those were. A figure that no workload defines
// is null.
type Summary struct {
	SkewedWorkloads []string `json:"skewed_workloads"`
	// SteadyStepMissReductionVsTorchMean and
	// SteadyStallReductionVsTorchMean are the means of VsTorch's job-level
	// reductions over the skewed workloads where torch had something to
	// reduce (ReduceFloor).
	SteadyStepMissReductionVsTorchMean *float64 `json:"steady_step_miss_reduction_vs_torch_mean"`
	SteadyStallReductionVsTorchMean    *float64 `json:"steady_stall_reduction_vs_torch_mean"`
	// ThroughputRatioVsTorchMax is the largest steady throughput ratio
	// over the skewed workloads.
	ThroughputRatioVsTorchMax *float64 `json:"throughput_ratio_vs_torch_max"`
	// ThroughputRatioVsOracleMin is the smallest HelixVsOracle over every
	// workload.
	ThroughputRatioVsOracleMin *float64 `json:"throughput_ratio_vs_oracle_min"`
	// UniformRegressionMax is the largest 1 - HelixVsBest over the
	// uniform workloads (negative: helix ahead on every one), by steady
	// GPU efficiency; UniformRegressionMaxSPS the same by samples/s
	// (HelixVsBestSPS), beside it.
	UniformRegressionMax    *float64 `json:"uniform_regression_max"`
	UniformRegressionMaxSPS *float64 `json:"uniform_regression_max_samples"`
	// Seeds is how many seeds each figure is over; Steps the steps of
	// each run. With several seeds the results are the seeds' means and
	// the figures above are computed on them; CI95 gives, under the same
	// keys, the 95 % confidence half-width (Student's t) of each figure
	// over the seeds' own summaries, where every seed defines it.
	Seeds int                `json:"seeds"`
	Steps int                `json:"steps"`
	CI95  map[string]float64 `json:"ci95,omitempty"`

	StepMissReductionWorkloads int `json:"steady_step_miss_reduction_workloads"`
	StallReductionWorkloads    int `json:"steady_stall_reduction_workloads"`
	// The workloads of the three extremes.
	ThroughputRatioVsTorchMaxWorkload  string `json:"throughput_ratio_vs_torch_max_workload,omitempty"`
	ThroughputRatioVsOracleMinWorkload string `json:"throughput_ratio_vs_oracle_min_workload,omitempty"`
	UniformRegressionMaxWorkload       string `json:"uniform_regression_max_workload,omitempty"`
	UniformRegressionMaxSPSWorkload    string `json:"uniform_regression_max_samples_workload,omitempty"`
	// The per-rank steady reductions (miss rate over rank-steps, GPU wait
	// fraction), beside the job's, over the skewed workloads where
	// torch's was above 0.
	SteadyMissReductionVsTorchMean *float64 `json:"steady_miss_reduction_vs_torch_mean"`
	SteadyWaitReductionVsTorchMean *float64 `json:"steady_wait_reduction_vs_torch_mean"`
	// The same three headline figures for the oracle (perfect knowledge,
	// free transfers) in helix's place, over the same workloads: how
	// much of a goal the workloads leave for any loader to reach. Null in
	// real runs, which have no oracle.
	OracleStepMissReductionVsTorchMean *float64 `json:"oracle_steady_step_miss_reduction_vs_torch_mean"`
	OracleStallReductionVsTorchMean    *float64 `json:"oracle_steady_stall_reduction_vs_torch_mean"`
	OracleThroughputRatioVsTorchMax    *float64 `json:"oracle_throughput_ratio_vs_torch_max"`
	// The attribution's geometric means over the skewed workloads
	// (Attribution), and torch-pack's largest ratio over torch there: the
	// most a user gets by packing without datahelix.
	SchedulingMean      *float64 `json:"scheduling_gain_mean"`
	DecodeBalancingMean *float64 `json:"decode_balancing_gain_mean"`
	GPUBalancingMean    *float64 `json:"gpu_balancing_gain_mean"`
	PackVsTorchMax      *float64 `json:"torch_pack_vs_torch_max"`
	// MostSkewed is the skewed workload of highest imbalance
	// (Setup.Imbalance: what cross-rank balancing can gain), the timeline
	// figure's default.
	MostSkewed string `json:"most_skewed"`
}

// NewReport assembles the report of an evaluation: comparisons, summary
// and goals. Sections are added with AddSection.
func NewReport(m machine.Machine, cfg eval.EvalConfig, ev *eval.Evaluation, cal *costmodel.Calibration) *Report {
	r := &Report{Machine: m, Commit: m.Commit, CommitSource: m.CommitSource, Units: Units, Mode: ev.Mode, Ranks: cfg.Ranks, Steps: cfg.Steps, Seed: cfg.Seed,
		Network: cfg.Network, NoSplit: cfg.NoSplit, NoiseOnTruth: cfg.NoiseOnTruth, Workloads: ev.Setups, Results: ev.Results, Timelines: ev.Timelines}
	if cal != nil {
		r.Calibration = CalibrationInfo{Source: cal.Source, Note: cal.Note, Created: cal.Created, MAPE: cal.MAPE["all"], SynthMAPE: cal.SynthMAPE,
			SplitRatio: cal.SplitRatio}
		if cal.Source != "default" {
			r.Calibration.Machine = cal.MeasuredOn.String()
			r.Calibration.Presets = workload.CoveredPresets(cal)
		}
		r.Calibration.Uncovered = workload.UncoveredPresets(cal, cfg.Workloads)
		if w := workload.CoverageWarning(cal, cfg.Workloads); w != "" {
			r.Calibration.Note = strings.TrimPrefix(r.Calibration.Note+"; "+w, "; ")
		}
	}
	r.Comparisons = compareAll(ev)
	r.Summary = summarize(r.Comparisons, ev.Setups, 1, cfg.Steps)
	r.Goals = goals(r)
	return r
}

// ciFigures are the summary's figures that get a confidence half-width
// over seeds (Summary.CI95), by JSON name, in summary.csv's order.
var ciFigures = []struct {
	key string
	get func(s Summary) *float64
}{
	{"steady_step_miss_reduction_vs_torch_mean", func(s Summary) *float64 { return s.SteadyStepMissReductionVsTorchMean }},
	{"steady_stall_reduction_vs_torch_mean", func(s Summary) *float64 { return s.SteadyStallReductionVsTorchMean }},
	{"throughput_ratio_vs_torch_max", func(s Summary) *float64 { return s.ThroughputRatioVsTorchMax }},
	{"throughput_ratio_vs_oracle_min", func(s Summary) *float64 { return s.ThroughputRatioVsOracleMin }},
	{"uniform_regression_max", func(s Summary) *float64 { return s.UniformRegressionMax }},
	{"uniform_regression_max_samples", func(s Summary) *float64 { return s.UniformRegressionMaxSPS }},
}

// NewReportOver is NewReport over the evaluations of several seeds of
// the same configuration: the results are their means (eval.Mean), the
// comparisons and summary are those of the means, and Summary.CI95 holds
// the spread of the goals' figures over the seeds.
func NewReportOver(m machine.Machine, cfg eval.EvalConfig, evs []*eval.Evaluation, cal *costmodel.Calibration) (*Report, error) {
	ev, err := eval.Mean(evs)
	if err != nil {
		return nil, err
	}
	r := NewReport(m, cfg, ev, cal)
	if len(evs) < 2 {
		return r, nil
	}
	r.Summary.Seeds = len(evs)
	per := make([]Summary, len(evs))
	for i, e := range evs {
		per[i] = summarize(compareAll(e), e.Setups, 1, cfg.Steps)
	}
	r.Summary.CI95 = map[string]float64{}
	for _, f := range ciFigures {
		var xs []float64
		for _, s := range per {
			if x := f.get(s); x != nil {
				xs = append(xs, *x)
			}
		}
		if len(xs) == len(per) {
			_, r.Summary.CI95[f.key] = MeanCI(xs)
		}
	}
	r.Goals = goals(r)
	return r, nil
}

// AddSection appends a section and re-evaluates the goals (the scale
// goal reads its section).
func (r *Report) AddSection(s Section) {
	r.Sections = append(r.Sections, s)
	r.Goals = goals(r)
}

// find returns the result of loader on workload, or nil.
func find(results []eval.Result, workload string, loader step.Kind) *eval.Result {
	return findLoader(results, workload, loader.String())
}

// findLoader is find by the loader's name.
func findLoader(results []eval.Result, workload, loader string) *eval.Result {
	i := slices.IndexFunc(results, func(x eval.Result) bool { return x.Workload == workload && x.Loader == loader })
	if i < 0 {
		return nil
	}
	return &results[i]
}

// reduction is 1 - x/base, undefined when base is not positive.
func reduction(base, x float64) *float64 {
	if !(base > 0) {
		return nil
	}
	v := 1 - x/base
	return &v
}

// ratio is x/base, undefined when base is not positive.
func ratio(x, base float64) *float64 {
	if !(base > 0) {
		return nil
	}
	v := x / base
	return &v
}

func versus(h, o *eval.Result) Versus {
	if h == nil || o == nil || !h.HasSteady() || !o.HasSteady() {
		return Versus{}
	}
	v := Versus{ThroughputRatio: ratio(h.SteadyThroughputSPS, o.SteadyThroughputSPS),
		MissReduction: reduction(o.SteadyMissRate, h.SteadyMissRate), WaitReduction: reduction(o.SteadyGPUWaitFrac, h.SteadyGPUWaitFrac)}
	if o.SteadyStepMissRate >= ReduceFloor {
		v.StepMissReduction = reduction(o.SteadyStepMissRate, h.SteadyStepMissRate)
	}
	if o.SteadyJobStallFrac >= ReduceFloor {
		v.StallReduction = reduction(o.SteadyJobStallFrac, h.SteadyJobStallFrac)
	}
	if h.SteadyEfficiency > 0 {
		v.EfficiencyRatio = ratio(h.SteadyEfficiency, o.SteadyEfficiency)
	}
	return v
}

// steadyRatio is a's steady throughput over b's, nil when either did not
// run or has no steady steps.
func steadyRatio(a, b *eval.Result) *float64 {
	if a == nil || b == nil || !a.HasSteady() || !b.HasSteady() {
		return nil
	}
	return ratio(a.SteadyThroughputSPS, b.SteadyThroughputSPS)
}

// helixFamily reports whether loader is helix, one of its ablations or
// the oracle, which the uniform goal does not count as another loader.
func helixFamily(loader string) bool {
	return loader == step.KindHelix.String() || loader == step.KindHelixNoGate.String() || loader == step.KindHelixNoTrain.String() ||
		loader == step.KindOracle.String()
}

// compareAll computes helix's comparison on every workload of ev.
func compareAll(ev *eval.Evaluation) []Comparison {
	var cs []Comparison
	for _, s := range ev.Setups {
		cs = append(cs, compare(s.Workload, s.Skew, ev.Results))
	}
	return cs
}

// compare computes helix's comparison on one workload.
func compare(workload, skew string, results []eval.Result) Comparison {
	c := Comparison{Workload: workload, Skew: skew}
	get := func(k step.Kind) *eval.Result { return find(results, workload, k) }
	h, torch, oracle := get(step.KindHelix), get(step.KindTorch), get(step.KindOracle)
	c.VsTorch = versus(h, torch)
	c.VsTorchDDP = versus(h, get(step.KindTorchDDP))
	c.VsTorchPack = versus(h, get(step.KindTorchPack))
	c.VsLocal = versus(h, get(step.KindLocal))
	c.VsStatic = versus(h, get(step.KindStatic))
	c.OracleVsTorch = versus(oracle, torch)
	c.HelixVsOracle = steadyRatio(h, oracle)
	local, notrain, pack := get(step.KindLocal), get(step.KindHelixNoTrain), get(step.KindTorchPack)
	c.Attribution = Attribution{Scheduling: steadyRatio(local, torch), DecodeBalancing: steadyRatio(notrain, local),
		GPUBalancing: steadyRatio(h, notrain), PackVsTorch: steadyRatio(pack, torch), HelixVsPack: steadyRatio(h, pack),
		DDPVsTorch: steadyRatio(get(step.KindTorchDDP), torch)}
	if h == nil || !h.HasSteady() {
		return c
	}
	var best, bestSPS *eval.Result
	for i := range results {
		x := &results[i]
		if x.Workload != workload || helixFamily(x.Loader) || !x.HasSteady() {
			continue
		}
		if bestSPS == nil || x.SteadyThroughputSPS > bestSPS.SteadyThroughputSPS {
			bestSPS = x
		}
		if x.SteadyEfficiency > 0 && (best == nil || x.SteadyEfficiency > best.SteadyEfficiency) {
			best = x
		}
	}
	if bestSPS != nil {
		c.BestOtherSPS = bestSPS.Loader
		c.HelixVsBestSPS = ratio(h.SteadyThroughputSPS, bestSPS.SteadyThroughputSPS)
	}
	if best != nil && h.SteadyEfficiency > 0 {
		c.BestOther = best.Loader
		c.HelixVsBest = ratio(h.SteadyEfficiency, best.SteadyEfficiency)
	}
	return c
}

// stat accumulates a mean and extremes of defined values.
type stat struct {
	sum, hi float64
	n       int
}

func (s *stat) add(v *float64) {
	if v == nil {
		return
	}
	if s.n == 0 || *v > s.hi {
		s.hi = *v
	}
	s.sum += *v
	s.n++
}

func (s *stat) mean() *float64 {
	if s.n == 0 {
		return nil
	}
	v := s.sum / float64(s.n)
	return &v
}

func (s *stat) max() *float64 {
	if s.n == 0 {
		return nil
	}
	return &s.hi
}

// geomean returns the geometric mean of the defined values, nil when
// none is.
func geomean(vs []*float64) *float64 {
	sum, n := 0.0, 0
	for _, v := range vs {
		if v != nil && *v > 0 {
			sum += math.Log(*v)
			n++
		}
	}
	if n == 0 {
		return nil
	}
	g := math.Exp(sum / float64(n))
	return &g
}

// summarize computes the summary over the comparisons; seeds and steps
// are the run's. The goals' figures are over the skewed workloads,
// except the oracle ratio (every workload) and the regression (the
// uniform ones).
func summarize(cs []Comparison, setups []eval.Setup, seeds, steps int) Summary {
	var stepMiss, stall, miss, wait, oStepMiss, oStall, oTput, pack stat
	var sched, decode, gpuBal []*float64
	s := Summary{Seeds: seeds, Steps: steps, SkewedWorkloads: []string{}}
	worst := -1.0
	for _, c := range cs {
		if v := c.HelixVsOracle; v != nil && (s.ThroughputRatioVsOracleMin == nil || *v < *s.ThroughputRatioVsOracleMin) {
			s.ThroughputRatioVsOracleMin, s.ThroughputRatioVsOracleMinWorkload = v, c.Workload
		}
		if c.Skew != workload.Skewed {
			if c.HelixVsBest != nil {
				if r := 1 - *c.HelixVsBest; s.UniformRegressionMax == nil || r > *s.UniformRegressionMax {
					s.UniformRegressionMax, s.UniformRegressionMaxWorkload = &r, c.Workload
				}
			}
			if c.HelixVsBestSPS != nil {
				if r := 1 - *c.HelixVsBestSPS; s.UniformRegressionMaxSPS == nil || r > *s.UniformRegressionMaxSPS {
					s.UniformRegressionMaxSPS, s.UniformRegressionMaxSPSWorkload = &r, c.Workload
				}
			}
			continue
		}
		s.SkewedWorkloads = append(s.SkewedWorkloads, c.Workload)
		stepMiss.add(c.VsTorch.StepMissReduction)
		stall.add(c.VsTorch.StallReduction)
		miss.add(c.VsTorch.MissReduction)
		wait.add(c.VsTorch.WaitReduction)
		if v := c.VsTorch.ThroughputRatio; v != nil && (s.ThroughputRatioVsTorchMax == nil || *v > *s.ThroughputRatioVsTorchMax) {
			s.ThroughputRatioVsTorchMax, s.ThroughputRatioVsTorchMaxWorkload = v, c.Workload
		}
		// The oracle over the workloads the helix figure is defined on.
		if c.VsTorch.StepMissReduction != nil {
			oStepMiss.add(c.OracleVsTorch.StepMissReduction)
		}
		if c.VsTorch.StallReduction != nil {
			oStall.add(c.OracleVsTorch.StallReduction)
		}
		oTput.add(c.OracleVsTorch.ThroughputRatio)
		pack.add(c.Attribution.PackVsTorch)
		sched = append(sched, c.Attribution.Scheduling)
		decode = append(decode, c.Attribution.DecodeBalancing)
		gpuBal = append(gpuBal, c.Attribution.GPUBalancing)
		i := slices.IndexFunc(setups, func(x eval.Setup) bool { return x.Workload == c.Workload })
		if i >= 0 && setups[i].Imbalance > worst {
			worst = setups[i].Imbalance
			s.MostSkewed = c.Workload
		}
	}
	s.SteadyStepMissReductionVsTorchMean, s.StepMissReductionWorkloads = stepMiss.mean(), stepMiss.n
	s.SteadyStallReductionVsTorchMean, s.StallReductionWorkloads = stall.mean(), stall.n
	s.SteadyMissReductionVsTorchMean, s.SteadyWaitReductionVsTorchMean = miss.mean(), wait.mean()
	s.OracleStepMissReductionVsTorchMean, s.OracleStallReductionVsTorchMean = oStepMiss.mean(), oStall.mean()
	s.OracleThroughputRatioVsTorchMax = oTput.max()
	s.SchedulingMean, s.DecodeBalancingMean, s.GPUBalancingMean = geomean(sched), geomean(decode), geomean(gpuBal)
	s.PackVsTorchMax = pack.max()
	return s
}
