package bench

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/datahelix/datahelix/plan"
	"github.com/datahelix/datahelix/spmd"
)

// The validation section's setting when the report is simulated: these
// workloads run for real at ValidationRanks ranks (a source-skewed mix
// and i.i.d. clips), ValidationSteps steps, with ValidationLoaders.
var (
	ValidationWorkloads = []string{"video_image_mix", "kinetics"}
	ValidationLoaders   = []spmd.Kind{spmd.KindTorch, spmd.KindLocal, spmd.KindHelix}
)

// ValidationRanks and ValidationSteps size the validation's real runs.
const (
	ValidationRanks = 4
	ValidationSteps = 40
	// ValidationRepeat is how many times each loader runs for real; the
	// real figure is their mean, and their spread is shown: on a shared
	// machine a real run does not repeat itself within the rule's 20 %.
	ValidationRepeat = 2
)

// validationNetwork is the exchange network the simulator assumes for a
// real run on one node: shared memory as the exchange section measures
// it through the Go path here (about 1 GB/s, 100 µs per message).
var validationNetwork = Network{BandwidthMBs: 1000, LatencyUS: 100}

var (
	envJobsMu sync.Mutex
	// envJobs are the real jobs a report's sections ran themselves (the
	// validation's when the report is simulated), for section "real".
	envJobs = map[*SectionEnv][]*realJob{}
)

// simulate runs the job's setup through the simulator with loader k on
// src: the same samples in the same steps (DatasetSamples, the runtime's
// reader order), the same GPU model as the real run's flags, a gradient
// allreduce of allreduce µs beyond the slowest GPU, W workers per rank on
// the cores the real ranks had (nodeShare), rank r's running at
// 1/slowdown[r] of a core's speed (nil: all at full speed) after start[r]
// µs of start-up work (nil: none), the same horizon, budget, gate margin
// and seed.
func (j *realJob) simulate(k spmd.Kind, src sampleSource, slowdown []float64, start []int64, allreduce int64) (Result, *spmd.SimResult, error) {
	var speed []int64
	if slowdown != nil {
		speed = make([]int64, j.ranks)
		for r := range speed {
			speed[r] = max(int64(slowdown[r]*plan.One+0.5), 1)
		}
	}
	budget := int64(j.horizon) * int64(j.batch) * int64(j.frames) * int64(j.size) * int64(j.size) * 3
	cfg := spmd.SimConfig{Loader: k, Ranks: j.ranks, Batch: j.batch, Steps: j.steps, Workers: j.workers, Horizon: j.horizon,
		Budget: budget, GPU: j.model, Bandwidth: int64(validationNetwork.BandwidthMBs * plan.One), LatencyUS: validationNetwork.LatencyUS,
		Margin: GateMarginUS, Speed: speed, CPUs: nodeShare(j.ranks, j.cores), AllreduceUS: allreduce, StartUS: start, Samples: src, Seed: j.seed}
	t0 := time.Now()
	res, err := spmd.Simulate(cfg)
	if err != nil {
		return Result{}, nil, fmt.Errorf("bench: simulate %s with %s: %w", j.w.Name, k, err)
	}
	return resultOf(j.w, res.Summary, time.Since(t0)), res, nil
}

// simulateAsRun simulates loader k on src as its real run rep ran: with
// the gradient allreduce that run took (allreduceOf its records), and so
// that each rank spends the CPU time the real rank spent (rankCPU), times
// cores/(cores - others_cores) where the machine's other processes took
// part of the cores (standing for the cores they left, exact while the
// ranks keep the cores busy): before its first delivery, with start-up
// work (what the real rank spent then beyond the decodes the simulated
// rank finished: first reads, decoder set-up, cold caches), and over the
// run, with its workers slowed. A planned loader moves work away from the
// ranks it sees slowed, so both are refined a few times against what
// each rank then does. Where the run did not record its CPU time per
// rank, every rank takes the jobs' factor, uniform (what the machine's
// CPU time says over the measured costs; model scales the model's costs
// to those), and no start-up work.
func (j *realJob) simulateAsRun(k spmd.Kind, src sampleSource, model bool, rep int) (res Result, sd []float64, start []int64, err error) {
	var recs []spmd.StepRecord
	if runs := j.records[k.String()]; rep < len(runs) {
		recs = runs[rep]
	}
	allreduce := allreduceOf(recs)
	sd = make([]float64, j.ranks)
	cpu, first := rankCPU(recs, j.ranks)
	if cpu == nil {
		uniform := j.runSlowdown(k)
		if model {
			uniform = j.modelSlowdown(k)
		}
		for r := range sd {
			sd[r] = uniform
		}
		res, _, err = j.simulate(k, src, sd, nil, allreduce)
		return res, sd, nil, err
	}
	start = make([]int64, j.ranks)
	others := -1.0
	if sts := j.stats[k.String()]; rep < len(sts) {
		others = sts[rep].OthersCores
	}
	factor := j.othersFactor(others)
	for r := range sd {
		sd[r] = 1
	}
	for range simulateAsRunRounds {
		_, sim, err := j.simulate(k, src, sd, start, allreduce)
		if err != nil {
			return Result{}, nil, nil, err
		}
		sim0 := make([]int64, j.ranks)
		for _, rec := range sim.Records {
			if rec.Step == 0 && rec.Rank < j.ranks {
				sim0[rec.Rank] = rec.CPUUS
			}
		}
		for r := range sd {
			// The decode work ran at sd[r]: scale it to the real CPU time
			// less the start-up work.
			before := start[r]
			start[r] = max(0, start[r]+int64(factor*float64(first[r]))-sim0[r])
			if w := sim.WorkUS[r] - before; w > 0 {
				if want := factor*float64(cpu[r]) - float64(start[r]); want > 0 {
					sd[r] *= want / float64(w)
				}
			}
		}
	}
	res, _, err = j.simulate(k, src, sd, start, allreduce)
	return res, sd, start, err
}

// simulateAsRuns simulates loader k on src as each of its real runs ran
// (simulateAsRun), and returns the mean result, each run's, and each
// run's slowdowns.
func (j *realJob) simulateAsRuns(k spmd.Kind, src sampleSource, model bool) (Result, []Result, [][]float64, error) {
	var rs []Result
	var sds [][]float64
	for rep := range max(len(j.records[k.String()]), 1) {
		r, sd, _, err := j.simulateAsRun(k, src, model, rep)
		if err != nil {
			return Result{}, nil, nil, err
		}
		rs, sds = append(rs, r), append(sds, sd)
	}
	m, err := meanResult(rs)
	return m, rs, sds, err
}

// simulateAsRunRounds is how many times simulateAsRun refines the
// slowdowns: unplanned loaders need one; helix's moves settle within
// 5 % of the real CPU time in a few (TestSimulateAsRunPlanned).
const simulateAsRunRounds = 5

// rankCPU is, per rank of a run's records, the CPU time (µs) it recorded
// over the run and up to its first delivery (step 0), nil when a rank
// recorded none.
func rankCPU(recs []spmd.StepRecord, ranks int) (total, first []int64) {
	total, first = make([]int64, ranks), make([]int64, ranks)
	for _, r := range recs {
		if r.Rank >= 0 && r.Rank < ranks {
			total[r.Rank] += r.CPUUS
			if r.Step == 0 {
				first[r.Rank] = r.CPUUS
			}
		}
	}
	for _, c := range total {
		if c <= 0 {
			return nil, nil
		}
	}
	return total, first
}

// allreduceUS is how long the real runs' gradient allreduce took beyond
// the slowest rank's compute over every run of the job (allreduceOf).
func (j *realJob) allreduceUS() int64 {
	var all [][]spmd.StepRecord
	for _, runs := range j.records {
		all = append(all, runs...)
	}
	return allreduceOf(all...)
}

// allreduceOf is how long the gradient allreduce of the runs took beyond
// the slowest rank's compute: per step, the least over the ranks of the
// time from a rank's delivery to its next request less its GPU's compute
// (each rank's own clock; the slowest rank waited for nobody), the median
// over the steps of all the runs. 0 without records.
func allreduceOf(runs ...[]spmd.StepRecord) int64 {
	var gaps []int64
	for _, recs := range runs {
		gaps = append(gaps, allreduceGaps(recs)...)
	}
	if len(gaps) == 0 {
		return 0
	}
	return median(gaps)
}

// allreduceGaps returns, per step but the last (in step order), the least
// over the ranks of next request - delivery - GPU compute. A step with a
// record lacking its modelled GPU time is left out.
func allreduceGaps(recs []spmd.StepRecord) []int64 {
	type key struct {
		step int64
		rank int
	}
	at := make(map[key]spmd.StepRecord, len(recs))
	for _, r := range recs {
		at[key{r.Step, r.Rank}] = r
	}
	least := map[int64]int64{} // per step
	skip := map[int64]bool{}   // steps with a record lacking its GPU time
	for _, r := range recs {
		next, ok := at[key{r.Step + 1, r.Rank}]
		switch {
		case !ok:
		case r.GPUUS <= 0:
			skip[r.Step] = true
		default:
			g := next.RequestUS - r.DeliverUS - r.GPUUS
			if l, seen := least[r.Step]; !seen || g < l {
				least[r.Step] = g
			}
		}
	}
	var steps []int64
	for t := range least {
		if !skip[t] {
			steps = append(steps, t)
		}
	}
	slices.Sort(steps)
	gaps := make([]int64, len(steps))
	for i, t := range steps {
		gaps[i] = max(least[t], 0)
	}
	return gaps
}

// nodeShare is how the ranks of a real run on one node of the given
// cores share them: with more ranks than cores, datahelix run pins rank r
// to core r mod cores (launcher/pin.go, --pin auto), so the ranks on one
// core share it; otherwise the ranks are not pinned and all share every
// core.
func nodeShare(ranks, cores int) *spmd.CPUShare {
	cores = max(cores, 1)
	sh := &spmd.CPUShare{Group: make([]int, ranks)}
	if ranks <= cores {
		sh.Cores = []int{cores}
		return sh
	}
	sh.Cores = make([]int, cores)
	for c := range sh.Cores {
		sh.Cores[c] = 1
	}
	for r := range sh.Group {
		sh.Group[r] = r % cores
	}
	return sh
}

// modelSlowdown is runSlowdown for simulations on the cost model's
// predictions: it also scales the model's mean cost on the run's samples
// to the mean measured here, so that the simulated workers spend the
// CPU time the real jobs spent.
func (j *realJob) modelSlowdown(k spmd.Kind) float64 {
	sd := j.runSlowdown(k)
	if j.modelMeanUS > 0 && j.cost != nil && j.cost.MeanUS > 0 {
		sd *= j.cost.MeanUS / j.modelMeanUS
	}
	return sd
}

// runSlowdown is the slowdown of each decode worker of loader k's real
// runs as they measured it, from everything but their waits and misses:
// the machine's other processes left the ranks only part of the cores
// (at least a tenth of a core; the simulator shares what is left among
// the threads itself, nodeShare), and the jobs spent CPU time per trained
// sample cpuOverWork(k) times its measured decode time (splitting, MPI,
// reading, the loader, decoding beside other threads).
func (j *realJob) runSlowdown(k spmd.Kind) float64 {
	sd := j.othersFactor(j.othersCores(k))
	if c := j.cpuOverWorkOf(k); c > 0 {
		sd *= c
	}
	return sd
}

// othersFactor is cores / (cores - others) where the machine's other
// processes kept others cores busy: how much less of the cores they left
// the real ranks (at least a tenth of a core; 1 when others is unknown,
// negative).
func (j *realJob) othersFactor(others float64) float64 {
	if others > 0 {
		return float64(j.cores) / max(float64(j.cores)-others, 0.1)
	}
	return 1
}

// othersCores is the mean over loader k's runs of the cores the machine's
// other processes kept busy (-1 when unknown).
func (j *realJob) othersCores(k spmd.Kind) float64 {
	var sum, n float64
	for _, st := range j.stats[k.String()] {
		if st.OthersCores >= 0 {
			sum += st.OthersCores
			n++
		}
	}
	if n == 0 {
		return -1
	}
	return sum / n
}

// validationJobs returns the real jobs to validate against: the real
// evaluation's, or new runs of ValidationWorkloads.
func validationJobs(ctx context.Context, env *SectionEnv, re RealEnv) ([]*realJob, bool, error) {
	if env.Eval != nil {
		if jobs := jobsOf(env.Eval); len(jobs) > 0 {
			return jobs, false, nil
		}
	}
	all, err := Workloads()
	if err != nil {
		return nil, false, err
	}
	cal := env.Calibration
	if cal == nil {
		cal = DefaultCalibration()
	}
	var jobs []*realJob
	for _, name := range ValidationWorkloads {
		i := slices.IndexFunc(all, func(w *Workload) bool { return w.Name == name })
		if i < 0 {
			return nil, false, fmt.Errorf("bench: validation workload %q does not exist", name)
		}
		j, err := prepareRealJob(ctx, re, all[i], cal, ValidationRanks, 0, ValidationSteps, env.Seed, ValidationLoaders)
		if err != nil {
			return nil, false, err
		}
		j.repeat = ValidationRepeat
		if err := j.run(ctx, re); err != nil {
			return nil, false, fmt.Errorf("bench: validation run of %s: %w", name, err)
		}
		jobs = append(jobs, j)
	}
	return jobs, true, nil
}

// validationSection compares real runs of torch, local and helix with
// simulations of the very same setup (ValidationSection's rule). Each
// row also shows the simulation with the true costs measured on this
// machine instead of the cost model's, to tell a cost-model error from a
// scheduling-model error, the simulation on the model's costs unscaled,
// and whether both trained the same batches.
func validationSection(ctx context.Context, env *SectionEnv) (*Section, error) {
	re, err := currentRealEnv()
	if err != nil {
		return nil, err
	}
	jobs, own, err := validationJobs(ctx, env, re)
	if err != nil {
		return nil, err
	}
	if own {
		envJobsMu.Lock()
		envJobs[env] = jobs
		envJobsMu.Unlock()
	}
	var sim, meas, unscaled, real []Result
	others := map[[2]string][3]float64{}
	slowdowns := map[[2]string][][]float64{}
	runs, simRuns := map[[2]string][]Result{}, map[[2]string][]Result{}
	for _, j := range jobs {
		for _, k := range ValidationLoaders {
			i := slices.IndexFunc(j.results, func(r Result) bool { return r.Loader == k.String() })
			if i < 0 {
				continue
			}
			key := [2]string{j.w.Name, k.String()}
			a, as, sds, err := j.simulateAsRuns(k, j.samples.Samples, true)
			if err != nil {
				return nil, err
			}
			b, _, _, err := j.simulateAsRuns(k, j.measuredSamples, false)
			if err != nil {
				return nil, err
			}
			c, _, err := j.simulate(k, j.samples.Samples, nil, nil, j.allreduceUS())
			if err != nil {
				return nil, err
			}
			sim, meas, unscaled, real = append(sim, a), append(meas, b), append(unscaled, c), append(real, j.results[i])
			others[key] = [3]float64{j.othersCores(k), j.cpuOverWorkOf(k), float64(j.allreduceUS())}
			runs[key], simRuns[key], slowdowns[key] = j.runs[k.String()], as, sds
		}
	}
	s := ValidationSection(sim, real)
	extendValidation(s, real, sim, meas, unscaled, others)
	addSlowdowns(s, slowdowns)
	addRealSpread(s, runs, simRuns)
	s.Note += fmt.Sprintf("; real: mpirun ranks of datahelix run on generated data (%s), oversubscribed on %d cores; "+
		"sim: spmd.Simulate of the same samples in the same steps (NewDatasetSamples), the same GPU flags, W, horizon and seed, "+
		"exchange at %.0f MB/s and %d µs per message; the ranks' workers share the cores as the real ranks were pinned (more ranks than cores: "+
		"rank r on core r mod cores; the busy threads of a core share it equally); each step's gradient allreduce takes allreduce_us beyond the "+
		"slowest GPU, what the real runs took (median over their steps); its true costs are the calibrated model's predictions, and each "+
		"simulated rank spends the CPU time the real rank's process spent (all its threads: decoding beside other threads, MPI, reading, "+
		"splitting), which the real runs measured besides their waits, on the cores the machine's other processes left (cores - "+
		"others_cores): by its first delivery, through start-up work before its first decode (what the real rank spent then beyond the "+
		"decodes: first reads, decoder set-up, cold caches), and over the run, its workers running at 1/sim_rank_slowdown of a core; "+
		"cpu_over_work is the same for the whole job: its CPU time "+
		"over the measured decode time of the trained samples. The waits and misses are the simulator's own; "+
		"same_batches: the simulated run trained the very batches of the real one (equal batches_hash); "+
		"diagnostics: sim_measured_* use the costs measured here, sample by sample, scaled the same way, instead of the model's; "+
		"sim_unscaled_* the model's costs as calibrated (one decode alone on a core) at full speed; "+
		"real_*_runs: each real run (the real figures are their mean), real_wait_spread: (max - min) / mean of their wait fractions; "+
		"the section \"real\" lists the runs",
		re.Scale, re.Cores, validationNetwork.BandwidthMBs, validationNetwork.LatencyUS)
	return s, nil
}

// extendValidation adds to ValidationSection's rows whether the
// simulated and real runs trained the same batches, what the real runs
// measured of the machine that the simulations use (inputs, by workload
// and loader: the cores other processes used, the runs' CPU time over
// their decode work, the allreduce's µs), then two diagnostic
// simulations with whether each agrees by the same rule: meas with the
// costs measured on this machine instead of the cost model's, unscaled
// with the model's costs at full speed.
func extendValidation(s *Section, real, sim, meas, unscaled []Result, inputs map[[2]string][3]float64) {
	s.Columns = append(s.Columns, "same_batches", "others_cores", "cpu_over_work", "allreduce_us",
		"sim_measured_wait_frac", "sim_measured_miss_rate", "agrees_measured",
		"sim_unscaled_wait_frac", "sim_unscaled_miss_rate", "agrees_unscaled")
	find := func(rs []Result, name, loader any) *Result {
		for i := range rs {
			if rs[i].Workload == name && rs[i].Loader == loader {
				return &rs[i]
			}
		}
		return nil
	}
	var nm, nu int
	for i, row := range s.Rows {
		r, a, m, v := find(real, row[0], row[1]), find(sim, row[0], row[1]), find(meas, row[0], row[1]), find(unscaled, row[0], row[1])
		if r == nil || a == nil || m == nil || v == nil {
			s.Rows[i] = append(row, "-", "-", "-", "-", "-", "-", "-", "-", "-", "-")
			continue
		}
		okm, _, _ := agrees(*m, *r)
		oku, _, _ := agrees(*v, *r)
		if okm {
			nm++
		}
		if oku {
			nu++
		}
		var oc, cw, ar any = "-", "-", "-"
		if in, ok := inputs[[2]string{r.Workload, r.Loader}]; ok {
			if in[0] >= 0 {
				oc = in[0]
			}
			if in[1] > 0 {
				cw = in[1]
			}
			ar = int64(in[2])
		}
		s.Rows[i] = append(row, a.BatchesHash == r.BatchesHash, oc, cw, ar, m.GPUWaitFrac, m.MissRate, okm, v.GPUWaitFrac, v.MissRate, oku)
	}
	if len(s.Rows) > 0 {
		s.Headline += fmt.Sprintf("; diagnostics: on the costs measured here %d of %d, on the model's costs unscaled %d of %d",
			nm, len(s.Rows), nu, len(s.Rows))
	}
}

// addSlowdowns adds the column of each row's per-rank slowdowns, by
// workload and loader, one list per real run simulated (separated by
// " / ").
func addSlowdowns(s *Section, sds map[[2]string][][]float64) {
	s.Columns = append(s.Columns, "sim_rank_slowdown")
	for i, row := range s.Rows {
		name, _ := row[0].(string)
		loader, _ := row[1].(string)
		var runs []string
		for _, sd := range sds[[2]string{name, loader}] {
			xs := make([]string, len(sd))
			for r, x := range sd {
				xs[r] = fmt.Sprintf("%.2f", x)
			}
			runs = append(runs, strings.Join(xs, " "))
		}
		if len(runs) == 0 {
			s.Rows[i] = append(row, "-")
			continue
		}
		s.Rows[i] = append(row, strings.Join(runs, " / "))
	}
}

// addRealSpread adds each real run's wait fraction and miss rate (the
// real figures are their mean), each run's simulation as it ran (sims,
// the simulated figures are their mean) and, to the headline, how far
// apart the real runs of one setup were: the noise of real runs on this
// machine.
func addRealSpread(s *Section, runs, sims map[[2]string][]Result) {
	s.Columns = append(s.Columns, "real_wait_runs", "real_miss_runs", "real_wait_spread", "sim_wait_runs", "sim_miss_runs")
	worst, n := 0.0, 0
	for i, row := range s.Rows {
		name, _ := row[0].(string)
		loader, _ := row[1].(string)
		key := [2]string{name, loader}
		rs := runs[key]
		if len(rs) == 0 {
			s.Rows[i] = append(row, "-", "-", "-", "-", "-")
			continue
		}
		lo, hi, sum := rs[0].GPUWaitFrac, rs[0].GPUWaitFrac, 0.0
		for _, r := range rs {
			lo, hi, sum = min(lo, r.GPUWaitFrac), max(hi, r.GPUWaitFrac), sum+r.GPUWaitFrac
		}
		spread := 0.0
		if sum > 0 {
			spread = (hi - lo) / (sum / float64(len(rs)))
		}
		if len(rs) > 1 {
			worst = max(worst, spread)
			n++
		}
		waits, misses := runFigures(rs)
		simWaits, simMisses := runFigures(sims[key])
		s.Rows[i] = append(row, waits, misses, spread, simWaits, simMisses)
	}
	if n > 0 {
		s.Headline += fmt.Sprintf("; repeated real runs of one setup differ by up to %.0f %% in wait fraction (the rule allows 20 %%)", 100*worst)
	}
}

// runFigures lists the runs' wait fractions and miss rates, "-" for no
// run.
func runFigures(rs []Result) (waits, misses string) {
	if len(rs) == 0 {
		return "-", "-"
	}
	ws, ms := make([]string, len(rs)), make([]string, len(rs))
	for k, r := range rs {
		ws[k], ms[k] = fmt.Sprintf("%.4g", r.GPUWaitFrac), fmt.Sprintf("%.4g", r.MissRate)
	}
	return strings.Join(ws, " "), strings.Join(ms, " ")
}
