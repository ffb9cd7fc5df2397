package realrun

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/datahelix/datahelix/gpu"
	"github.com/datahelix/datahelix/internal/bench/workload"
	"github.com/datahelix/datahelix/internal/metrics"
	"github.com/datahelix/datahelix/internal/sim"
	"github.com/datahelix/datahelix/internal/step"
)

func TestAllreduceGaps(t *testing.T) {
	rec := func(step int64, rank int, request, deliver, gpu int64) metrics.StepRecord {
		return metrics.StepRecord{Step: step, Rank: rank, RequestUS: request, DeliverUS: deliver, GPUUS: gpu}
	}
	// Two ranks, own clocks. Step 0: rank 0 computes 100-200 and asks
	// again at 230 (gap 30); rank 1 computes 150-260, the slowest, and
	// asks at 265 (gap 5): the allreduce took 5. Step 1: gaps 7 and 40.
	// Step 2 is the last: no next request.
	recs := []metrics.StepRecord{
		rec(0, 0, 0, 100, 100), rec(0, 1, 0, 150, 110),
		rec(1, 0, 230, 230, 100), rec(1, 1, 265, 265, 100),
		rec(2, 0, 337, 337, 100), rec(2, 1, 405, 405, 100),
	}
	if got, want := allreduceGaps(recs), []int64{5, 7}; !slices.Equal(got, want) {
		t.Errorf("gaps %v, want %v", got, want)
	}
	// Runs without a modelled GPU time give nothing.
	for i := range recs {
		recs[i].GPUUS = 0
	}
	if got := allreduceGaps(recs); len(got) != 0 {
		t.Errorf("gaps without GPU times: %v", got)
	}
	j := &realJob{records: map[string][][]metrics.StepRecord{
		"torch": {{rec(0, 0, 0, 10, 10), rec(1, 0, 50, 50, 10)}, {rec(0, 0, 0, 10, 10), rec(1, 0, 60, 60, 10)}},
		"helix": {{rec(0, 0, 0, 10, 10), rec(1, 0, 30, 30, 10)}}}}
	if got := j.allreduceUS(); got != 30 {
		t.Errorf("allreduce %d µs, want the median 30 of 30, 40 and 10 (every run)", got)
	}
	if got := allreduceOf(j.records["torch"][1]); got != 40 {
		t.Errorf("allreduce of one run %d µs, want 40", got)
	}
}

func TestNodeShare(t *testing.T) {
	const u = sim.OtherUnit
	for _, tc := range []struct {
		ranks, cores int
		others       float64
		want         sim.CPUShare
	}{
		// More ranks than cores: pinned round-robin, a core per group.
		{4, 2, 0, sim.CPUShare{Group: []int{0, 1, 0, 1}, Cores: []int{1, 1}}},
		{3, 2, 0, sim.CPUShare{Group: []int{0, 1, 0}, Cores: []int{1, 1}}},
		// Other processes' threads, free to move between the cores.
		{4, 2, 1, sim.CPUShare{Group: []int{0, 1, 0, 1}, Cores: []int{1, 1}, Others: u}},
		// Not pinned: every rank shares every core, with the others.
		{2, 2, 0, sim.CPUShare{Group: []int{0, 0}, Cores: []int{2}}},
		{2, 8, 0, sim.CPUShare{Group: []int{0, 0}, Cores: []int{8}}},
		{2, 2, 0.75, sim.CPUShare{Group: []int{0, 0}, Cores: []int{2}, Others: 3 * u / 4}},
	} {
		got := nodeShare(tc.ranks, tc.cores, tc.others)
		if !slices.Equal(got.Group, tc.want.Group) || !slices.Equal(got.Cores, tc.want.Cores) || got.Others != tc.want.Others {
			t.Errorf("nodeShare(%d, %d, %v) = %+v, want %+v", tc.ranks, tc.cores, tc.others, *got, tc.want)
		}
	}
}

func TestRunSlowdown(t *testing.T) {
	st := func(cpu, wall time.Duration, others float64) JobStats {
		return JobStats{CPU: cpu, Wall: wall, OthersCores: others}
	}
	j := &realJob{ranks: 4, workers: 2, cores: 2, steps: 10, batch: 5, oversub: 4, cost: &measuredCosts{MeanUS: 1000},
		stats: map[string][]JobStats{
			// 4 ranks x 10 steps x 5 samples x 1 ms = 0.2 s of decode per run.
			"torch": {st(300*time.Millisecond, time.Second, 0.5), st(500*time.Millisecond, time.Second, 1.5)},
			"helix": {st(200*time.Millisecond, time.Second, -1)},
		}}
	if got := j.cpuOverWorkOf(step.KindTorch); math.Abs(got-2) > 1e-12 {
		t.Errorf("torch CPU over work %v, want 2", got)
	}
	if got := j.cpuOverWork(); math.Abs(got-1000.0/600) > 1e-12 {
		t.Errorf("CPU over work %v, want %v", got, 1000.0/600)
	}
	// Torch: others took 1 of the 2 cores on average (the simulator
	// shares the cores among the threads itself), 2x CPU.
	if got := j.runSlowdown(step.KindTorch); math.Abs(got-4) > 1e-12 {
		t.Errorf("torch slowdown %v, want 4", got)
	}
	// Helix: others unknown, 1x CPU.
	if got := j.runSlowdown(step.KindHelix); math.Abs(got-1) > 1e-12 {
		t.Errorf("helix slowdown %v, want 1", got)
	}
	if got := j.othersCores(step.KindLocal); got != -1 {
		t.Errorf("others of a loader that did not run: %v", got)
	}
}

// checkAsRun re-simulates j on the machine simulateAsRun chose for run
// rep and checks that every rank spends the CPU time its real rank
// recorded, over the run and up to its first delivery, and that the
// other processes take the cores the run's stats say they took.
func checkAsRun(t *testing.T, j *realJob, k step.Kind, src sampleSource, process bool, rep int, total, first []int64) {
	t.Helper()
	_, m, err := j.simulateAsRun(k, src, false, process, rep)
	if err != nil {
		t.Fatal(err)
	}
	sd, start := m.slowdown, m.start
	_, res, err := j.simulate(k, src, m)
	if err != nil {
		t.Fatal(err)
	}
	if sts := j.stats[k.String()]; rep < len(sts) && sts[rep].OthersCores > 0 {
		// Within 2 % of the cores.
		want, got := sts[rep].OthersCores, float64(res.OthersUS)/float64(res.WallUS)
		if math.Abs(got-want) > 0.02*float64(j.cores) {
			t.Errorf("%s: others took %.3f cores as %.2f threads, want the run's %.3f", k, got, m.others, want)
		}
	}
	for r := range total {
		var got0 int64
		for _, rec := range res.Records {
			if rec.Step == 0 && rec.Rank == r {
				got0 = rec.CPUUS
			}
		}
		if math.Abs(float64(res.WorkUS[r])/float64(total[r])-1) > 0.05 || math.Abs(float64(got0)/float64(first[r])-1) > 0.05 {
			t.Errorf("%s rank %d: CPU %d µs, %d by its first delivery (slowdown %.2f, start-up %d µs); want the real %d and %d",
				k, r, res.WorkUS[r], got0, sd[r], start[r], total[r], first[r])
		}
	}
}

// cpuRecords are step records of ranks that spent total[r] µs of CPU,
// first[r] of it by their first delivery and the rest evenly.
func cpuRecords(steps int, total, first []int64) []metrics.StepRecord {
	var recs []metrics.StepRecord
	for s := range int64(steps) {
		for r := range total {
			c := first[r]
			if s > 0 {
				c = (total[r] - first[r]) / int64(steps-1)
			}
			recs = append(recs, metrics.StepRecord{Step: s, Rank: r, CPUUS: c})
		}
	}
	return recs
}

// TestSimulateAsRun: each simulated rank spends the CPU time its real
// rank recorded, in all and by its first delivery, through a slowdown and
// start-up work. Two ranks pinned to one core, one worker each; rank 0's
// samples cost 4 ms, rank 1's 1 ms, over 6 steps: 24 and 6 ms of work.
// The real ranks spent 60 and 21 ms, 18 and 7 of it by their first
// delivery: more than their first decodes, as real start-ups do.
func TestSimulateAsRun(t *testing.T) {
	const steps = 6
	batches := make([][][]sim.Sample, steps)
	for s := range batches {
		batches[s] = [][]sim.Sample{
			{{ID: uint64(10*s + 0), Bytes: 100, Cost: 4000, Est: 4000, Frames: 1}},
			{{ID: uint64(10*s + 1), Bytes: 100, Cost: 1000, Est: 1000, Frames: 1}},
		}
	}
	total, first := []int64{60_000, 21_000}, []int64{18_000, 7_000}
	j := &realJob{w: &workload.Workload{Name: "w"}, ranks: 2, cores: 1, workers: 1, batch: 1, steps: steps, horizon: 2, frames: 1, size: 8,
		model: gpu.Model{Base: 10 * time.Millisecond}, cost: &measuredCosts{MeanUS: 2500},
		records: map[string][][]metrics.StepRecord{"local": {cpuRecords(steps, total, first)}}}
	checkAsRun(t, j, step.KindLocal, fixedSource(batches), false, 0, total, first)
	// A second run that spent more: simulated as it ran, and the mean is
	// the runs' mean.
	total2, first2 := []int64{90_000, 30_000}, []int64{30_000, 9_000}
	j.records["local"] = append(j.records["local"], cpuRecords(steps, total2, first2))
	checkAsRun(t, j, step.KindLocal, fixedSource(batches), false, 1, total2, first2)
	m, runs, ms, err := j.simulateAsRuns(step.KindLocal, fixedSource(batches), false, false)
	if err != nil || len(runs) != 2 || len(ms) != 2 || ms[1].slowdown[0] <= ms[0].slowdown[0] || runs[1].GPUWaitS <= runs[0].GPUWaitS ||
		math.Abs(m.GPUWaitS-(runs[0].GPUWaitS+runs[1].GPUWaitS)/2) > 1e-9 {
		t.Errorf("two runs: mean %+v, runs %+v, machines %+v (%v); want the second slower and their mean", m, runs, ms, err)
	}
	// The misses with the CPU times scaled: more CPU, more misses; the
	// machines are left as they were.
	before := slices.Clone(ms[1].slowdown)
	lo, err1 := j.missesScaled(step.KindLocal, fixedSource(batches), ms, 0.5)
	hi, err2 := j.missesScaled(step.KindLocal, fixedSource(batches), ms, 3)
	if err1 != nil || err2 != nil || hi <= lo || hi <= m.MissRate || !slices.Equal(ms[1].slowdown, before) {
		t.Errorf("misses at 0.5x and 3x the CPU: %v and %v (fitted %v; %v, %v), slowdowns %v then %v", lo, hi, m.MissRate, err1, err2, before, ms[1].slowdown)
	}
	// Other processes took half the core during the second run: the
	// ranks still spend their CPU time, and wait longer for it.
	j.stats = map[string][]JobStats{"local": {{OthersCores: 0.001}, {OthersCores: 0.5}}}
	checkAsRun(t, j, step.KindLocal, fixedSource(batches), false, 1, total2, first2)
	// Others too few to simulate (under one OtherUnit) leave the CPU
	// times refined.
	checkAsRun(t, j, step.KindLocal, fixedSource(batches), false, 0, total, first)
	if shared, _, err := j.simulateAsRun(step.KindLocal, fixedSource(batches), false, false, 1); err != nil || shared.GPUWaitS <= runs[1].GPUWaitS {
		t.Errorf("with others: wait %v s, without %v s (%v); want longer", shared.GPUWaitS, runs[1].GPUWaitS, err)
	}
	// Records with the decode workers' CPU time: fitted to the process's
	// by the first delivery and the workers' after it; process fits
	// to the process's throughout.
	j.stats = nil
	dec := cpuRecords(steps, total2, first2)
	for i := range dec {
		if dec[i].Step > 0 {
			dec[i].DecodeCPUUS = dec[i].CPUUS / 2
		}
	}
	j.records["local"] = [][]metrics.StepRecord{dec}
	half := []int64{first2[0] + (total2[0]-first2[0])/2, first2[1] + (total2[1]-first2[1])/2}
	checkAsRun(t, j, step.KindLocal, fixedSource(batches), false, 0, half, first2)
	checkAsRun(t, j, step.KindLocal, fixedSource(batches), true, 0, total2, first2)
	j.records["local"] = [][]metrics.StepRecord{cpuRecords(steps, total, first), cpuRecords(steps, total2, first2)}
	// A rank without CPU records: every rank takes the job's factor
	// (no stats: 1) and no start-up work.
	j.stats = nil
	for i, r := range j.records["local"][0] {
		if r.Rank == 1 {
			j.records["local"][0][i].CPUUS = 0
		}
	}
	if _, m, err := j.simulateAsRun(step.KindLocal, fixedSource(batches), false, false, 0); err != nil || !slices.Equal(m.slowdown, []float64{1, 1}) || m.start != nil {
		t.Errorf("without per-rank CPU: slowdowns %v, start-up %v (%v), want [1 1] and none", m.slowdown, m.start, err)
	}
}

// TestCPUByRank: a rank's CPU time is its process's by its first
// delivery and its decode workers' after it, or its process's throughout
// when asked or when no record has a decode time.
func TestCPUByRank(t *testing.T) {
	rec := func(step int64, rank int, cpu, dec int64) metrics.StepRecord {
		return metrics.StepRecord{Step: step, Rank: rank, CPUUS: cpu, DecodeCPUUS: dec}
	}
	withDecode := []metrics.StepRecord{rec(0, 0, 100, 40), rec(0, 1, 50, 0), rec(1, 0, 30, 20), rec(1, 1, 25, 0), rec(2, 1, 70, 60), rec(2, 7, 1000, 1000)}
	noDecode := []metrics.StepRecord{rec(0, 0, 100, 0), rec(1, 0, 30, 0), rec(1, 1, 25, 0)}
	for _, c := range []struct {
		name               string
		recs               []metrics.StepRecord
		process            bool
		wantTotal, wantOne []int64
	}{
		{"decode", withDecode, false, []int64{120, 110}, []int64{100, 50}},
		{"process", withDecode, true, []int64{130, 145}, []int64{100, 50}},
		{"no decode times", noDecode, false, []int64{130, 25}, []int64{100, 0}},
	} {
		total, first := cpuByRank(c.recs, 2, c.process)
		if !slices.Equal(total, c.wantTotal) || !slices.Equal(first, c.wantOne) {
			t.Errorf("%s: total %v, first %v; want %v, %v", c.name, total, first, c.wantTotal, c.wantOne)
		}
	}
	if total, _ := rankCPU(noDecode[:2], 2, false); total != nil {
		t.Errorf("a rank without records: %v, want nil", total)
	}
}

// TestSimulateAsRunPlanned: helix moves work away from the ranks it sees
// slowed, so one division by the full-speed work would miss the real CPU
// time; refined, the slowdowns and start-up works give each simulated
// rank the CPU time its real rank recorded, within 5 %.
func TestSimulateAsRunPlanned(t *testing.T) {
	const steps, ranks, b = 12, 4, 4
	rng := rand.New(rand.NewPCG(3, 4))
	batches := make([][][]sim.Sample, steps)
	for s := range batches {
		batches[s] = make([][]sim.Sample, ranks)
		for r := range ranks {
			for i := range b {
				c := int64(1000 + rng.IntN(3000))
				if r == 0 {
					c *= 4
				}
				batches[s][r] = append(batches[s][r], sim.Sample{ID: uint64(s<<16 | r<<8 | i), Bytes: 1000, Cost: c, Est: c, Frames: 1})
			}
		}
	}
	total := []int64{180_000, 90_000, 60_000, 130_000}
	first := []int64{60_000, 30_000, 20_000, 40_000}
	j := &realJob{w: &workload.Workload{Name: "w"}, ranks: ranks, cores: 2, workers: 2, batch: b, steps: steps, horizon: 4, frames: 1, size: 8,
		model: gpu.Model{Base: 20 * time.Millisecond}, cost: &measuredCosts{MeanUS: 2500},
		records: map[string][][]metrics.StepRecord{"helix": {cpuRecords(steps, total, first)}}}
	checkAsRun(t, j, step.KindHelix, fixedSource(batches), false, 0, total, first)
	// With other processes taking 0.4 of the two cores.
	j.stats = map[string][]JobStats{"helix": {{OthersCores: 0.4}}}
	checkAsRun(t, j, step.KindHelix, fixedSource(batches), false, 0, total, first)
}
