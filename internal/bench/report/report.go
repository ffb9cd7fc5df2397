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

// Versus is helix against one other loader on one workload. A field is
// nil when it is undefined (the other loader had no misses or no wait to
// reduce, or did not run).
type Versus struct {
	MissReduction   *float64 `json:"miss_reduction"`   // 1 - helix/other miss rate
	WaitReduction   *float64 `json:"wait_reduction"`   // 1 - helix/other GPU wait fraction
	ThroughputRatio *float64 `json:"throughput_ratio"` // helix / other samples per second
}

// Comparison is helix against every other loader on one workload.
type Comparison struct {
	Workload string `json:"workload"`
	Skew     string `json:"skew"`
	VsTorch  Versus `json:"vs_torch"`
	VsLocal  Versus `json:"vs_local"`
	VsStatic Versus `json:"vs_static"`
	// OracleVsTorch is the oracle in helix's place against torch: what
	// any loader could gain on this workload (simulation only).
	OracleVsTorch Versus `json:"oracle_vs_torch"`
	// OracleGap is helix's GPU wait fraction minus the oracle's (of
	// wall time); OracleBound is the goal's limit for helix's, 1.5x the
	// oracle's plus 0.01.
	OracleGap   *float64 `json:"oracle_gap"`
	OracleBound *float64 `json:"oracle_bound"`
	// BestOther is the loader (oracle excluded) with the highest
	// throughput besides helix; HelixVsBest helix's throughput over its.
	BestOther   string   `json:"best_other"`
	HelixVsBest *float64 `json:"helix_vs_best"`
	// SteadyMissReductionVsTorch and SteadyWaitReductionVsTorch are
	// VsTorch's reductions on the steady figures (Result.SteadyMissRate,
	// SteadyGPUWaitFrac), without the warm-up: nil when helix or torch
	// has none, or torch had nothing to reduce after its warm-up.
	SteadyMissReductionVsTorch *float64 `json:"steady_miss_reduction_vs_torch"`
	SteadyWaitReductionVsTorch *float64 `json:"steady_wait_reduction_vs_torch"`
	// WarmupMisses is the fewest misses any loader, the oracle included,
	// had in the warm-up (the first WarmupSteps steps, Setup.Horizon):
	// misses no loader avoids, as no step has been measured yet.
	// WarmupMissFloor is them as a fraction of the run's rank-steps, the
	// lowest miss rate any loader reaches at this many steps (nil when no
	// loader ran).
	WarmupMisses    int      `json:"warmup_misses"`
	WarmupSteps     int      `json:"warmup_steps"`
	WarmupMissFloor *float64 `json:"warmup_miss_floor"`
}

// Summary is the top-level figures of the report. Means and extremes are
// over the workloads where the figure is defined; the counts say how
// many those were. A figure that no workload defines is null.
type Summary struct {
	MissReductionVsTorchMean        *float64 `json:"miss_reduction_vs_torch_mean"`
	WaitReductionVsTorchMean        *float64 `json:"wait_reduction_vs_torch_mean"`
	ThroughputRatioVsTorchMax       *float64 `json:"throughput_ratio_vs_torch_max"`
	ThroughputRatioVsLocalMinSkewed *float64 `json:"throughput_ratio_vs_local_min_skewed"`
	OracleGapMean                   *float64 `json:"oracle_gap_mean"`

	MissReductionWorkloads int `json:"miss_reduction_workloads"`
	WaitReductionWorkloads int `json:"wait_reduction_workloads"`
	// MostSkewed is the skewed workload of highest imbalance
	// (Setup.Imbalance: what cross-rank balancing can gain);
	// ThroughputRatioVsTorchMostSkewed is helix's ratio there.
	MostSkewed                       string   `json:"most_skewed"`
	ThroughputRatioVsTorchMostSkewed *float64 `json:"throughput_ratio_vs_torch_most_skewed"`
	ThroughputRatioVsStaticMinSkewed *float64 `json:"throughput_ratio_vs_static_min_skewed"`
	// UniformShortfallMax is the largest 1 - helix/best throughput over
	// the uniform workloads.
	UniformShortfallMax *float64 `json:"uniform_shortfall_max"`
	// The same three headline figures for the oracle (perfect knowledge,
	// free transfers) in helix's place, over the same workloads: how much
	// of a goal the workloads leave for any loader to reach. Null in real
	// runs, which have no oracle.
	OracleMissReductionVsTorchMean  *float64 `json:"oracle_miss_reduction_vs_torch_mean"`
	OracleWaitReductionVsTorchMean  *float64 `json:"oracle_wait_reduction_vs_torch_mean"`
	OracleThroughputRatioVsTorchMax *float64 `json:"oracle_throughput_ratio_vs_torch_max"`
	// SteadyMissReductionVsTorchMean and SteadyWaitReductionVsTorchMean
	// are the first two figures on the steady figures, without the
	// warm-up (Comparison.SteadyMissReductionVsTorch), with the same rule:
	// a workload where torch had nothing to reduce after its warm-up is
	// left out, and the counts say how many were used. The spec's figures
	// above include the warm-up, whose misses no loader avoids, and so
	// depend on the run's length (--steps); these do not.
	SteadyMissReductionVsTorchMean *float64 `json:"steady_miss_reduction_vs_torch_mean"`
	SteadyWaitReductionVsTorchMean *float64 `json:"steady_wait_reduction_vs_torch_mean"`
	SteadyMissReductionWorkloads   int      `json:"steady_miss_reduction_workloads"`
	SteadyWaitReductionWorkloads   int      `json:"steady_wait_reduction_workloads"`
	// WarmupMissFloorMin and WarmupMissFloorMax are the lowest and
	// highest Comparison.WarmupMissFloor over the workloads of
	// miss_reduction_vs_torch_mean: the miss rate no loader goes below at
	// these steps, which bounds that reduction.
	WarmupMissFloorMin *float64 `json:"warmup_miss_floor_min"`
	WarmupMissFloorMax *float64 `json:"warmup_miss_floor_max"`
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
	for _, s := range ev.Setups {
		r.Comparisons = append(r.Comparisons, compare(s.Workload, s.Skew, ev.Results))
	}
	r.Summary = summarize(r.Comparisons, ev.Setups)
	r.Goals = goals(r)
	return r
}

// AddSection appends a section and re-evaluates the goals (the scale
// goal reads its section).
func (r *Report) AddSection(s Section) {
	r.Sections = append(r.Sections, s)
	r.Goals = goals(r)
}

// find returns the result of loader on workload, or nil.
func find(results []eval.Result, workload string, loader step.Kind) *eval.Result {
	i := slices.IndexFunc(results, func(x eval.Result) bool { return x.Workload == workload && x.Loader == loader.String() })
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
	if h == nil || o == nil {
		return Versus{}
	}
	return Versus{MissReduction: reduction(o.MissRate, h.MissRate), WaitReduction: reduction(o.GPUWaitFrac, h.GPUWaitFrac),
		ThroughputRatio: ratio(h.ThroughputSPS, o.ThroughputSPS)}
}

// compare computes helix's comparison on one workload.
func compare(workload, skew string, results []eval.Result) Comparison {
	c := Comparison{Workload: workload, Skew: skew}
	h := find(results, workload, step.KindHelix)
	c.VsTorch = versus(h, find(results, workload, step.KindTorch))
	c.VsLocal = versus(h, find(results, workload, step.KindLocal))
	c.VsStatic = versus(h, find(results, workload, step.KindStatic))
	c.OracleVsTorch = versus(find(results, workload, step.KindOracle), find(results, workload, step.KindTorch))
	if t := find(results, workload, step.KindTorch); h != nil && t != nil && h.HasSteady() && t.HasSteady() {
		c.SteadyMissReductionVsTorch = reduction(t.SteadyMissRate, h.SteadyMissRate)
		c.SteadyWaitReductionVsTorch = reduction(t.SteadyGPUWaitFrac, h.SteadyGPUWaitFrac)
	}
	c.WarmupMisses, c.WarmupSteps, c.WarmupMissFloor = warmupFloor(workload, results)
	if h == nil {
		return c
	}
	if o := find(results, workload, step.KindOracle); o != nil {
		gap := h.GPUWaitFrac - o.GPUWaitFrac
		bound := 1.5*o.GPUWaitFrac + 0.01
		c.OracleGap, c.OracleBound = &gap, &bound
	}
	var best *eval.Result
	for i := range results {
		x := &results[i]
		if x.Workload != workload || x.Loader == step.KindHelix.String() || x.Loader == step.KindOracle.String() {
			continue
		}
		if best == nil || x.ThroughputSPS > best.ThroughputSPS {
			best = x
		}
	}
	if best != nil {
		c.BestOther = best.Loader
		c.HelixVsBest = ratio(h.ThroughputSPS, best.ThroughputSPS)
	}
	return c
}

// warmupMisses is how many of r's misses fell in its warm-up, the steps
// its steady figures leave out: all of them when it has none.
func warmupMisses(r *eval.Result) int {
	if !r.HasSteady() {
		return r.Misses
	}
	steady := int(math.Round(r.SteadyMissRate * float64(r.Ranks*r.SteadySteps)))
	return max(r.Misses-steady, 0)
}

// warmupFloor returns the fewest warm-up misses of any loader on
// workload, the warm-up's length in steps and those misses as a
// fraction of the run's rank-steps (nil when no loader ran it).
func warmupFloor(workload string, results []eval.Result) (misses, steps int, floor *float64) {
	first := true
	for i := range results {
		r := &results[i]
		if r.Workload != workload {
			continue
		}
		m := warmupMisses(r)
		if first || m < misses {
			misses = m
			steps = r.Steps - r.SteadySteps
			if r.Ranks*r.Steps > 0 {
				v := float64(m) / float64(r.Ranks*r.Steps)
				floor = &v
			}
		}
		first = false
	}
	return misses, steps, floor
}

// stat accumulates a mean and extremes of defined values.
type stat struct {
	sum, lo, hi float64
	n           int
}

func (s *stat) add(v *float64) {
	if v == nil {
		return
	}
	if s.n == 0 || *v < s.lo {
		s.lo = *v
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

func (s *stat) min() *float64 {
	if s.n == 0 {
		return nil
	}
	return &s.lo
}

func (s *stat) max() *float64 {
	if s.n == 0 {
		return nil
	}
	return &s.hi
}

// summarize computes the summary over the comparisons; the most skewed
// workload is the skewed one of highest Setup.Imbalance.
func summarize(cs []Comparison, setups []eval.Setup) Summary {
	var miss, wait, tputMax, localMin, staticMin, gap, shortfall stat
	var oMiss, oWait, oTput stat
	var sMiss, sWait, floor stat
	var s Summary
	worst := -1.0
	for _, c := range cs {
		// Over the workloads the helix figure is defined on.
		if c.VsTorch.MissReduction != nil {
			oMiss.add(c.OracleVsTorch.MissReduction)
			floor.add(c.WarmupMissFloor)
		}
		sMiss.add(c.SteadyMissReductionVsTorch)
		sWait.add(c.SteadyWaitReductionVsTorch)
		if c.VsTorch.WaitReduction != nil {
			oWait.add(c.OracleVsTorch.WaitReduction)
		}
		if c.VsTorch.ThroughputRatio != nil {
			oTput.add(c.OracleVsTorch.ThroughputRatio)
		}
		miss.add(c.VsTorch.MissReduction)
		wait.add(c.VsTorch.WaitReduction)
		tputMax.add(c.VsTorch.ThroughputRatio)
		gap.add(c.OracleGap)
		if c.Skew == workload.Skewed {
			localMin.add(c.VsLocal.ThroughputRatio)
			staticMin.add(c.VsStatic.ThroughputRatio)
			i := slices.IndexFunc(setups, func(x eval.Setup) bool { return x.Workload == c.Workload })
			if i >= 0 && setups[i].Imbalance > worst {
				worst = setups[i].Imbalance
				s.MostSkewed = c.Workload
				s.ThroughputRatioVsTorchMostSkewed = c.VsTorch.ThroughputRatio
			}
		} else if c.HelixVsBest != nil {
			v := 1 - *c.HelixVsBest
			shortfall.add(&v)
		}
	}
	s.MissReductionVsTorchMean, s.MissReductionWorkloads = miss.mean(), miss.n
	s.WaitReductionVsTorchMean, s.WaitReductionWorkloads = wait.mean(), wait.n
	s.ThroughputRatioVsTorchMax = tputMax.max()
	s.ThroughputRatioVsLocalMinSkewed = localMin.min()
	s.ThroughputRatioVsStaticMinSkewed = staticMin.min()
	s.OracleGapMean = gap.mean()
	s.UniformShortfallMax = shortfall.max()
	s.OracleMissReductionVsTorchMean, s.OracleWaitReductionVsTorchMean = oMiss.mean(), oWait.mean()
	s.OracleThroughputRatioVsTorchMax = oTput.max()
	s.SteadyMissReductionVsTorchMean, s.SteadyMissReductionWorkloads = sMiss.mean(), sMiss.n
	s.SteadyWaitReductionVsTorchMean, s.SteadyWaitReductionWorkloads = sWait.mean(), sWait.n
	s.WarmupMissFloorMin, s.WarmupMissFloorMax = floor.min(), floor.max()
	return s
}
