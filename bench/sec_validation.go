package bench

import (
	"context"
	"fmt"
	"math"
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

// simMachine is what a simulation of a real job takes of the machine
// the real run had.
type simMachine struct {
	// slowdown is per rank: its workers run at 1/slowdown of a core's
	// speed (nil: all at full speed).
	slowdown []float64
	// start is per rank the start-up work (µs) before its first decode
	// (nil: none).
	start []int64
	// allreduceUS is how long the gradient allreduce takes beyond the
	// slowest GPU.
	allreduceUS int64
	// others is how many threads of other processes, always ready to
	// run and free to move between the cores, compete for them
	// (spmd.CPUShare.Others).
	others float64
}

// clone is a copy of m that shares no slice with it.
func (m simMachine) clone() simMachine {
	m.slowdown, m.start = slices.Clone(m.slowdown), slices.Clone(m.start)
	return m
}

// simulate runs the job's setup through the simulator with loader k on
// src: the same samples in the same steps (DatasetSamples, the runtime's
// reader order), the same GPU model as the real run's flags, W workers
// per rank on the cores the real ranks had (nodeShare), on the machine m,
// the same horizon, budget, gate margin and seed.
func (j *realJob) simulate(k spmd.Kind, src sampleSource, m simMachine) (Result, *spmd.SimResult, error) {
	var speed []int64
	if m.slowdown != nil {
		speed = make([]int64, j.ranks)
		for r := range speed {
			speed[r] = max(int64(m.slowdown[r]*plan.One+0.5), 1)
		}
	}
	budget := int64(j.horizon) * int64(j.batch) * int64(j.frames) * int64(j.size) * int64(j.size) * 3
	cfg := spmd.SimConfig{Loader: k, Ranks: j.ranks, Batch: j.batch, Steps: j.steps, Workers: j.workers, Horizon: j.horizon,
		Budget: budget, GPU: j.model, Bandwidth: validationNetwork.fixedBandwidth(), LatencyUS: validationNetwork.LatencyUS,
		Margin: GateMarginUS, Speed: speed, CPUs: nodeShare(j.ranks, j.cores, m.others), AllreduceUS: m.allreduceUS, StartUS: m.start,
		Samples: src, Seed: j.seed}
	t0 := time.Now()
	res, err := spmd.Simulate(cfg)
	if err != nil {
		return Result{}, nil, wrapf(err, "simulate %s with %s", j.w.Name, k)
	}
	return resultOf(j.w, res.Summary, time.Since(t0)), res, nil
}

// simulateAsRun simulates loader k on src as its real run rep ran: with
// the gradient allreduce that run took (allreduceOf its records), the
// machine's other processes competing for the cores as much as they used
// of them during the run (others_cores, as threads always ready to run:
// they take a thread's share of a busy core and the whole of an idle
// one), and so that each rank spends the CPU time the real rank spent
// (rankCPU): before its first delivery, with start-up work (what the real
// rank spent then beyond the decodes the simulated rank finished: first
// reads, decoder set-up, cold caches), and over the run, with its
// workers slowed. How much the others take, and where a planned loader
// moves work, depend on what the ranks do, so the others' threads, the
// slowdowns and the start-up works are refined a few times against what
// the simulation then gives, and the closest is kept (asRunError). Where
// the run did not record its CPU time per rank, every rank takes the
// jobs' factor, uniform (what the machine's CPU time says over the
// measured costs; model scales the model's costs to those), with the
// others standing for the cores they left, and no start-up work.
// With process, each rank's CPU time is its process's throughout, not
// its decode workers' after its first delivery (cpuByRank).
func (j *realJob) simulateAsRun(k spmd.Kind, src sampleSource, model, process bool, rep int) (Result, simMachine, error) {
	var recs []spmd.StepRecord
	if runs := j.records[k.String()]; rep < len(runs) {
		recs = runs[rep]
	}
	m := simMachine{slowdown: make([]float64, j.ranks), allreduceUS: allreduceOf(recs)}
	cpu, first := rankCPU(recs, j.ranks, process)
	if cpu == nil {
		uniform := j.runSlowdown(k)
		if model {
			uniform = j.modelSlowdown(k)
		}
		for r := range m.slowdown {
			m.slowdown[r] = uniform
		}
		res, _, err := j.simulate(k, src, m)
		return res, m, err
	}
	used := 0.0 // cores the other processes used during the run
	if sts := j.stats[k.String()]; rep < len(sts) {
		used = max(sts[rep].OthersCores, 0)
	}
	m.start, m.others = make([]int64, j.ranks), used
	for r := range m.slowdown {
		m.slowdown[r] = 1
	}
	var best Result
	var bestM simMachine
	bestErr := math.Inf(1)
	for range simulateAsRunRounds {
		res, sim, err := j.simulate(k, src, m)
		if err != nil {
			return Result{}, m, err
		}
		_, sim0 := cpuByRank(sim.Records, j.ranks, true)
		got := float64(sim.OthersUS) / float64(max(sim.WallUS, 1))
		// The later of equally close rounds: the more refined.
		if e := asRunError(cpu, first, sim.WorkUS, sim0, (got-used)/float64(j.cores)); e <= bestErr {
			best, bestErr = res, e
			bestM = m.clone()
		}
		for r := range m.slowdown {
			// The decode work ran at slowdown[r]: scale it to the real
			// CPU time less the start-up work.
			before := m.start[r]
			m.start[r] = max(0, m.start[r]+first[r]-sim0[r])
			if w := sim.WorkUS[r] - before; w > 0 {
				if want := cpu[r] - m.start[r]; want > 0 {
					m.slowdown[r] *= float64(want) / float64(w)
				}
			}
		}
		if used > 0 && got > 0 {
			m.others = min(m.others*used/got, maxOtherThreads)
		}
	}
	return best, bestM, nil
}

// asRunError is how far a simulation is from the real run it stands for:
// the largest relative error of a rank's CPU time over the run (cpu
// against work) or by its first delivery (first against work0), or the
// error of the cores the other processes took, as a fraction of all the
// cores (others: a relative error of tiny figures would be noise).
func asRunError(cpu, first, work, work0 []int64, others float64) float64 {
	rel := func(got, want float64) float64 {
		if want <= 0 {
			return 0
		}
		return math.Abs(got/want - 1)
	}
	e := math.Abs(others)
	for r := range cpu {
		e = max(e, rel(float64(work[r]), float64(cpu[r])), rel(float64(work0[r]), float64(first[r])))
	}
	return e
}

// maxOtherThreads bounds the other processes' threads simulateAsRun
// fits.
const maxOtherThreads = 64

// simulateAsRuns simulates loader k on src as each of its real runs ran
// (simulateAsRun), and returns the mean result, each run's, and each
// run's machine.
func (j *realJob) simulateAsRuns(k spmd.Kind, src sampleSource, model, process bool) (Result, []Result, []simMachine, error) {
	var rs []Result
	var ms []simMachine
	for rep := range max(len(j.records[k.String()]), 1) {
		r, m, err := j.simulateAsRun(k, src, model, process, rep)
		if err != nil {
			return Result{}, nil, nil, err
		}
		rs, ms = append(rs, r), append(ms, m)
	}
	mean, err := meanResult(rs)
	return mean, rs, ms, err
}

// simulateAsRunRounds is how many times simulateAsRun refines the
// machine, keeping the closest: unplanned loaders need one or two.
// Helix's moves, and the others' share, which depends on how busy the
// ranks keep the cores, do not settle: the error swings from round to
// round (3 to 17 % in TestSimulateAsRunPlanned), and the closest of 10
// rounds is within 5 % of the real CPU time.
const simulateAsRunRounds = 10

// rankCPU is cpuByRank of a real run's records, nil when a rank recorded
// no CPU time.
func rankCPU(recs []spmd.StepRecord, ranks int, process bool) (total, first []int64) {
	total, first = cpuByRank(recs, ranks, process)
	for _, c := range total {
		if c <= 0 {
			return nil, nil
		}
	}
	return total, first
}

// cpuByRank is, per rank of the records, the CPU time (µs) they show over
// the run and up to its first delivery (step 0): the process's, all its
// threads, by its first delivery, and after it, what its decode workers
// spent (decode_cpu_us), or with process, or where no record has it, the
// process's again. The rest of a process's time after step 0 (reading,
// planning, the exchange, MPI polling while the rank waits) is not decode
// work, which is all a simulated rank does: counted as decoding, it
// slowed the simulated workers and gave more misses and wait than the
// real runs had (the validation's sim_process_* columns show that fit).
func cpuByRank(recs []spmd.StepRecord, ranks int, process bool) (total, first []int64) {
	if !process {
		process = !slices.ContainsFunc(recs, func(r spmd.StepRecord) bool { return r.DecodeCPUUS > 0 })
	}
	total, first = make([]int64, ranks), make([]int64, ranks)
	for _, r := range recs {
		if r.Rank < 0 || r.Rank >= ranks {
			continue
		}
		switch {
		case r.Step == 0:
			first[r.Rank] = r.CPUUS
			total[r.Rank] += r.CPUUS
		case process:
			total[r.Rank] += r.CPUUS
		default:
			total[r.Rank] += r.DecodeCPUUS
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
// cores share them, with others threads of other processes always ready
// to run and free to move between the cores: with more ranks than cores,
// datahelix run pins rank r to core r mod cores (launcher/pin.go, --pin
// auto), so the ranks on one core share it; otherwise the ranks are not
// pinned and all share every core.
func nodeShare(ranks, cores int, others float64) *spmd.CPUShare {
	cores = max(cores, 1)
	sh := &spmd.CPUShare{Group: make([]int, ranks)}
	if ranks <= cores {
		sh.Cores = []int{cores}
	} else {
		sh.Cores = make([]int, cores)
		for c := range sh.Cores {
			sh.Cores[c] = 1
		}
		for r := range sh.Group {
			sh.Group[r] = r % cores
		}
	}
	sh.Others = int64(max(others, 0)*spmd.OtherUnit + 0.5)
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
		if err := j.run(ctx, re, nil); err != nil {
			return nil, false, wrapf(err, "validation run of %s", name)
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
	var sim, meas, unscaled, process, real []Result
	others := map[[2]string][3]float64{}
	machines, decodeShares, missRange := map[[2]string][]simMachine{}, map[[2]string]any{}, map[[2]string]any{}
	runs, simRuns := map[[2]string][]Result{}, map[[2]string][]Result{}
	for _, j := range jobs {
		for _, k := range ValidationLoaders {
			i := slices.IndexFunc(j.results, func(r Result) bool { return r.Loader == k.String() })
			if i < 0 {
				continue
			}
			key := [2]string{j.w.Name, k.String()}
			a, as, ms, err := j.simulateAsRuns(k, j.samples.Samples, true, false)
			if err != nil {
				return nil, err
			}
			b, _, _, err := j.simulateAsRuns(k, j.measuredSamples, false, false)
			if err != nil {
				return nil, err
			}
			p, _, _, err := j.simulateAsRuns(k, j.samples.Samples, true, true)
			if err != nil {
				return nil, err
			}
			allreduce := j.allreduceUS()
			c, _, err := j.simulate(k, j.samples.Samples, simMachine{allreduceUS: allreduce})
			if err != nil {
				return nil, err
			}
			sim, meas, unscaled, real = append(sim, a), append(meas, b), append(unscaled, c), append(real, j.results[i])
			process = append(process, p)
			others[key] = [3]float64{j.othersCores(k), j.cpuOverWorkOf(k), float64(allreduce)}
			runs[key], simRuns[key], machines[key] = j.runs[k.String()], as, ms
			if x := decodeShare(j.records[k.String()]...); x > 0 {
				decodeShares[key] = x
			}
			lo, err := j.missesScaled(k, j.samples.Samples, ms, 0.9)
			if err != nil {
				return nil, err
			}
			hi, err := j.missesScaled(k, j.samples.Samples, ms, 1.1)
			if err != nil {
				return nil, err
			}
			missRange[key] = fmt.Sprintf("%.3g %.3g", lo, hi)
		}
	}
	s := ValidationSection(sim, real)
	extendValidation(s, real, sim, others,
		validationDiagnostic{"measured", "on the costs measured here", meas},
		validationDiagnostic{"unscaled", "on the model's costs unscaled", unscaled},
		validationDiagnostic{"process", "fitted to the whole process's CPU time", process})
	addMachines(s, machines)
	addColumn(s, "decode_cpu_share", decodeShares)
	addColumn(s, "sim_miss_cpu_x0.9_x1.1", missRange)
	addRealSpread(s, runs, simRuns)
	s.Note += fmt.Sprintf("; real: mpirun ranks of datahelix run on generated data (%s), oversubscribed on %d cores; "+
		"sim: each real run simulated as it ran, the simulated figures their mean (sim_*_runs: each), "+
		"spmd.Simulate of the same samples in the same steps (NewDatasetSamples), the same GPU flags, W, horizon and seed, "+
		"exchange at %.0f MB/s and %d µs per message; the ranks' workers share the cores as the real ranks were pinned (more ranks than cores: "+
		"rank r on core r mod cores; the busy threads of a core share it equally); each step's gradient allreduce takes allreduce_us beyond the "+
		"slowest GPU, what the real run took (median over its steps; the column: over every run); its true costs are the calibrated model's predictions, and each "+
		"simulated rank spends the CPU time its real rank spent, which the real runs measured besides their waits (by its first delivery, its whole "+
		"process's, all its threads; after it, its decode workers' alone, decode_cpu_us: the rest, reading, planning, the exchange, MPI polling, "+
		"is not decoding, and the sim_process_* diagnostic counts it as decoding), on cores it shares with the machine's other processes, "+
		"sim_other_threads threads always ready to run (a thread's share of a busy core, all of an idle one) that take the cores "+
		"they took in the real run (others_cores, the column: the mean over the runs): by its first delivery, through start-up work before its first decode (what the real rank spent then beyond the "+
		"decodes: first reads, decoder set-up, cold caches), and over the run, its workers running at 1/sim_rank_slowdown of a core (per run, \" / \" between runs); "+
		"sim_miss_cpu_x0.9_x1.1: the simulated miss rate with every rank's CPU time 0.9x and 1.1x what the real run measured "+
		"(where it jumps, the real ranks ran near their cores' capacity and the miss rule is sensitive to small errors); "+
		"decode_cpu_share: the part of the process CPU time the decode workers spent (the rest: reading, planning, exchange, MPI polling "+
		"while a rank waits); cpu_over_work is the same for the whole job: its CPU time "+
		"over the measured decode time of the trained samples. The waits and misses are the simulator's own; "+
		"same_batches: the simulated run trained the very batches of the real one (equal batches_hash); "+
		"diagnostics: sim_measured_* use the costs measured here, sample by sample, scaled the same way, instead of the model's; "+
		"sim_unscaled_* the model's costs as calibrated (one decode alone on a core) at full speed; "+
		"sim_process_* each rank fitted to its whole process's CPU time over the run, as if all of it were decoding; "+
		"real_*_runs: each real run (the real figures are their mean), real_wait_spread: (max - min) / mean of their wait fractions; "+
		"the section \"real\" lists the runs",
		re.Scale, re.Cores, validationNetwork.BandwidthMBs, validationNetwork.LatencyUS)
	return s, nil
}

// validationDiagnostic is a simulation of the validation's runs made
// another way, shown beside them with whether it agrees by the same rule.
type validationDiagnostic struct {
	name  string // the columns' infix: sim_NAME_wait_frac, ...
	label string // what the headline calls it
	sims  []Result
}

// extendValidation adds to ValidationSection's rows whether the
// simulated and real runs trained the same batches, what the real runs
// measured of the machine that the simulations use (inputs, by workload
// and loader: the cores other processes used, the runs' CPU time over
// their decode work, the allreduce's µs), then each diagnostic
// simulation's wait and misses and whether it agrees, and counts those
// in the headline.
func extendValidation(s *Section, real, sim []Result, inputs map[[2]string][3]float64, diags ...validationDiagnostic) {
	s.Columns = append(s.Columns, "same_batches", "others_cores", "cpu_over_work", "allreduce_us")
	for _, d := range diags {
		s.Columns = append(s.Columns, "sim_"+d.name+"_wait_frac", "sim_"+d.name+"_miss_rate", "agrees_"+d.name)
	}
	find := func(rs []Result, name, loader any) *Result {
		for i := range rs {
			if rs[i].Workload == name && rs[i].Loader == loader {
				return &rs[i]
			}
		}
		return nil
	}
	agreeing := make([]int, len(diags))
	for i, row := range s.Rows {
		r, a := find(real, row[0], row[1]), find(sim, row[0], row[1])
		if r == nil || a == nil {
			for len(row) < len(s.Columns) {
				row = append(row, "-")
			}
			s.Rows[i] = row
			continue
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
		row = append(row, a.BatchesHash == r.BatchesHash, oc, cw, ar)
		for n, d := range diags {
			v := find(d.sims, row[0], row[1])
			if v == nil {
				row = append(row, "-", "-", "-")
				continue
			}
			ok, _, _ := agrees(*v, *r)
			if ok {
				agreeing[n]++
			}
			row = append(row, v.GPUWaitFrac, v.MissRate, ok)
		}
		s.Rows[i] = row
	}
	if len(s.Rows) == 0 || len(diags) == 0 {
		return
	}
	parts := make([]string, len(diags))
	for n, d := range diags {
		parts[n] = fmt.Sprintf("%s %d of %d", d.label, agreeing[n], len(s.Rows))
	}
	s.Headline += "; diagnostics: " + strings.Join(parts, ", ")
}

// decodeShare is the part of the runs' process CPU time (cpu_us) their
// decode workers spent (decode_cpu_us), over every rank; 0 when the
// records have none.
func decodeShare(runs ...[]spmd.StepRecord) float64 {
	var cpu, dec int64
	for _, recs := range runs {
		for _, r := range recs {
			cpu += r.CPUUS
			dec += r.DecodeCPUUS
		}
	}
	if cpu <= 0 || dec <= 0 {
		return 0
	}
	return float64(dec) / float64(cpu)
}

// addColumn adds a column of values by workload and loader ("-" for a
// row without one).
func addColumn(s *Section, name string, xs map[[2]string]any) {
	s.Columns = append(s.Columns, name)
	for i, row := range s.Rows {
		v, ok := xs[rowKey(row)]
		if !ok {
			v = "-"
		}
		s.Rows[i] = append(row, v)
	}
}

// rowKey is a validation row's workload and loader, its first two
// columns.
func rowKey(row []any) [2]string {
	w, _ := row[0].(string)
	loader, _ := row[1].(string)
	return [2]string{w, loader}
}

// missesScaled is the mean miss rate of loader k's simulations on the
// machines ms (one per real run) with every rank's CPU time scaled by f:
// how far the simulated misses move for an error of the fitted CPU.
func (j *realJob) missesScaled(k spmd.Kind, src sampleSource, ms []simMachine, f float64) (float64, error) {
	var sum float64
	for _, m := range ms {
		m = m.clone()
		if m.slowdown == nil {
			m.slowdown = slices.Repeat([]float64{1}, j.ranks)
		}
		for r := range m.slowdown {
			m.slowdown[r] *= f
		}
		for r := range m.start {
			m.start[r] = int64(float64(m.start[r]) * f)
		}
		res, _, err := j.simulate(k, src, m)
		if err != nil {
			return 0, err
		}
		sum += res.MissRate
	}
	return sum / float64(max(len(ms), 1)), nil
}

// addMachines adds the columns of each row's per-rank slowdowns and
// other processes' threads, by workload and loader, one entry per real
// run simulated (separated by " / ").
func addMachines(s *Section, ms map[[2]string][]simMachine) {
	sds, others := map[[2]string]any{}, map[[2]string]any{}
	for key, runs := range ms {
		var sd, ot []string
		for _, m := range runs {
			xs := make([]string, len(m.slowdown))
			for r, x := range m.slowdown {
				xs[r] = fmt.Sprintf("%.2f", x)
			}
			sd, ot = append(sd, strings.Join(xs, " ")), append(ot, fmt.Sprintf("%.2f", m.others))
		}
		if len(runs) > 0 {
			sds[key], others[key] = strings.Join(sd, " / "), strings.Join(ot, " / ")
		}
	}
	addColumn(s, "sim_rank_slowdown", sds)
	addColumn(s, "sim_other_threads", others)
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
		key := rowKey(row)
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
