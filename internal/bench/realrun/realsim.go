package realrun

import (
	"math"
	"slices"
	"time"

	"github.com/datahelix/datahelix/internal/bench/eval"
	"github.com/datahelix/datahelix/internal/bench/workload"
	"github.com/datahelix/datahelix/internal/metrics"
	"github.com/datahelix/datahelix/internal/sim"
	"github.com/datahelix/datahelix/internal/step"
	"github.com/datahelix/datahelix/plan"
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
	// (sim.CPUShare.Others).
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
func (j *realJob) simulate(k step.Kind, src sampleSource, m simMachine) (eval.Result, *sim.Result, error) {
	var speed []int64
	if m.slowdown != nil {
		speed = make([]int64, j.ranks)
		for r := range speed {
			speed[r] = max(int64(m.slowdown[r]*plan.One+0.5), 1)
		}
	}
	budget := int64(j.horizon) * int64(j.batch) * int64(j.frames) * int64(j.size) * int64(j.size) * 3
	cfg := sim.Config{Loader: k, Ranks: j.ranks, Batch: j.batch, Steps: j.steps, Workers: j.workers, Horizon: j.horizon,
		Budget: budget, GPU: j.model, Bandwidth: validationNetwork.FixedBandwidth(), LatencyUS: validationNetwork.LatencyUS,
		Margin: eval.GateMarginUS, Speed: speed, CPUs: nodeShare(j.ranks, j.cores, m.others), AllreduceUS: m.allreduceUS, StartUS: m.start,
		Samples: src, Seed: j.seed}
	t0 := time.Now()
	res, err := sim.Run(cfg)
	if err != nil {
		return eval.Result{}, nil, workload.Wrapf(err, "simulate %s with %s", j.w.Name, k)
	}
	return eval.ResultOf(j.w, res.Summary, time.Since(t0)), res, nil
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
func (j *realJob) simulateAsRun(k step.Kind, src sampleSource, model, process bool, rep int) (eval.Result, simMachine, error) {
	var recs []metrics.StepRecord
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
	var best eval.Result
	var bestM simMachine
	bestErr := math.Inf(1)
	for range simulateAsRunRounds {
		res, sim, err := j.simulate(k, src, m)
		if err != nil {
			return eval.Result{}, m, err
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
func (j *realJob) simulateAsRuns(k step.Kind, src sampleSource, model, process bool) (eval.Result, []eval.Result, []simMachine, error) {
	var rs []eval.Result
	var ms []simMachine
	for rep := range max(len(j.records[k.String()]), 1) {
		r, m, err := j.simulateAsRun(k, src, model, process, rep)
		if err != nil {
			return eval.Result{}, nil, nil, err
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
func rankCPU(recs []metrics.StepRecord, ranks int, process bool) (total, first []int64) {
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
func cpuByRank(recs []metrics.StepRecord, ranks int, process bool) (total, first []int64) {
	if !process {
		process = !slices.ContainsFunc(recs, func(r metrics.StepRecord) bool { return r.DecodeCPUUS > 0 })
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
	var all [][]metrics.StepRecord
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
func allreduceOf(runs ...[]metrics.StepRecord) int64 {
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
func allreduceGaps(recs []metrics.StepRecord) []int64 {
	type key struct {
		step int64
		rank int
	}
	at := make(map[key]metrics.StepRecord, len(recs))
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
func nodeShare(ranks, cores int, others float64) *sim.CPUShare {
	cores = max(cores, 1)
	sh := &sim.CPUShare{Group: make([]int, ranks)}
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
	sh.Others = int64(max(others, 0)*sim.OtherUnit + 0.5)
	return sh
}

// modelSlowdown is runSlowdown for simulations on the cost model's
// predictions: it also scales the model's mean cost on the run's samples
// to the mean measured here, so that the simulated workers spend the
// CPU time the real jobs spent.
func (j *realJob) modelSlowdown(k step.Kind) float64 {
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
func (j *realJob) runSlowdown(k step.Kind) float64 {
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
func (j *realJob) othersCores(k step.Kind) float64 {
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

// missesScaled is the mean miss rate of loader k's simulations on the
// machines ms (one per real run) with every rank's CPU time scaled by f:
// how far the simulated misses move for an error of the fitted CPU.
func (j *realJob) missesScaled(k step.Kind, src sampleSource, ms []simMachine, f float64) (float64, error) {
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
