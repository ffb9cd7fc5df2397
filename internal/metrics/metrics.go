package metrics

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/datahelix/datahelix/internal/step"
)

// ToleranceUS is the least lateness that counts as a deadline miss: 1 ms.
const ToleranceUS = 1000

// Tolerance is how late a batch may be ready before its step counts as a
// deadline miss, for a GPU step of gpuStepUS: the larger of ToleranceUS
// and 2 % of the step. A flat 1 ms would hide a miss of half a 100 µs
// text step and count scheduling noise against a 2 s video step.
func Tolerance(gpuStepUS int64) int64 { return max(ToleranceUS, gpuStepUS/50) }

// Missed reports whether a batch that became ready at readyUS missed the
// GPU's request at requestUS (DESIGN.md's deadline miss), for a GPU step
// of gpuStepUS: it was ready more than Tolerance(gpuStepUS) after the
// request. The GPU's wait, delivery less request, also holds the
// hand-off of a batch that was ready in time (the training loop's thread
// getting a core back on a busy node, the loader's lock): input wait,
// counted in the GPU wait, but not a late batch.
func Missed(requestUS, readyUS, gpuStepUS int64) bool {
	return readyUS-requestUS > Tolerance(gpuStepUS)
}

// StepRecord is one rank's account of one training step. Times are µs
// since the job's start on that rank's clock (the simulator's virtual
// clock in a simulation). One record per rank per step is the trace
// (--trace writes them as JSON lines).
type StepRecord struct {
	Step      int64 `json:"step"`
	Rank      int   `json:"rank"`
	RequestUS int64 `json:"request_us"` // the GPU asked for the batch
	ReadyUS   int64 `json:"ready_us"`   // its last sample was decoded
	DeliverUS int64 `json:"deliver_us"` // the GPU got it
	WaitUS    int64 `json:"wait_us"`    // DeliverUS - RequestUS
	ComputeUS int64 `json:"compute_us"` // the GPU's step compute time
	// GPUUS is the simulated GPU's modelled compute for the batch, in
	// runs with a simulated GPU: a real run's ComputeUS, the time until
	// its next request, also holds the gradient allreduce's.
	GPUUS int64 `json:"gpu_us,omitempty"`
	// CPUUS is the CPU time the rank's process used, all its threads,
	// from its previous delivery to this one; the first step's counts
	// from the loader's start, and what runs after the last delivery is
	// in no record. With ranks as goroutines of one process it is every
	// rank's. In a simulation: the time the rank's tasks finished since
	// its previous delivery took on a core of their own.
	CPUUS int64 `json:"cpu_us,omitempty"`
	// DecodeCPUUS is the part of it the rank's decode workers spent on
	// the tasks they finished since the previous delivery (their threads'
	// CPU clocks): CPUUS less it is the rest of the process (reading,
	// planning, exchange, MPI polling while it waits). In a simulation:
	// the decode tasks' part of CPUUS, without start-up work.
	DecodeCPUUS int64 `json:"decode_cpu_us,omitempty"`
	Miss        bool  `json:"miss"` // ReadyUS - RequestUS > TolUS: the batch was late
	// TolUS is the step's miss tolerance, Tolerance of the GPU step the
	// rank knew when the batch was delivered (its estimate in a real run,
	// the modelled step in a simulation).
	TolUS   int64 `json:"tolerance_us"`
	Samples int   `json:"samples"` // delivered
	Dropped int   `json:"dropped"` // failed to decode, left out
	// Damaged counts delivered samples whose compressed bytes were
	// damaged: the decoder concealed it (decode.Output.Damaged).
	Damaged  int   `json:"damaged,omitempty"`
	BytesIn  int64 `json:"bytes_in"`  // compressed bytes received for the batch
	BytesOut int64 `json:"bytes_out"` // compressed bytes sent away
	// NetBytesOut is the part of BytesOut sent to ranks of other nodes.
	NetBytesOut int64 `json:"net_bytes_out,omitempty"`
	PlanUS      int64 `json:"plan_us"` // planner time for the batch
	GatherUS    int64 `json:"allgather_us"`
	// What the plan of a planned loader saw and predicted for this rank,
	// µs from the planning instant: its GPU's deadline for the batch, the
	// decode work already queued (in its own wall time) and its predicted
	// finish. Zero for unplanned loaders.
	PlanDeadlineUS int64 `json:"plan_deadline_us,omitempty"`
	PlanBacklogUS  int64 `json:"plan_backlog_us,omitempty"`
	PlanFinishUS   int64 `json:"plan_finish_us,omitempty"`
	// Digest sums IDDigest over the step's samples on this rank, decoded
	// or dropped: summed over ranks it identifies the global batch.
	Hash uint64 `json:"digest,string"`
}

// Summary is a loader's result over a whole run, as the JSON summary and
// the tables print it.
type Summary struct {
	Loader string `json:"loader"`
	Ranks  int    `json:"ranks"`
	// FirstStep is the run's first step: 0, or the checkpoint step a
	// resumed run started from. Steps counts the steps from there, and
	// every figure, BatchesHash included, covers only those steps.
	FirstStep int     `json:"first_step"`
	Steps     int     `json:"steps"`
	Batch     int     `json:"batch"`
	Workers   int     `json:"workers"`
	Misses    int     `json:"misses"`
	MissRate  float64 `json:"miss_rate"`
	// GPUWaitS is the time the GPUs waited for input, summed over ranks
	// (rank-seconds): GPUWaitPerRankS is the mean per rank.
	GPUWaitS float64 `json:"gpu_wait_s"`
	// GPUWaitFrac is GPUWaitS over ranks x wall time: the fraction of its
	// wall time the mean rank's GPU waited.
	GPUWaitFrac       float64 `json:"gpu_wait_frac"`
	ThroughputSPS     float64 `json:"throughput_sps"`
	WallS             float64 `json:"wall_s"`
	BytesMovedPerStep float64 `json:"bytes_moved_per_step"`
	// NetBytesMovedPerStep is the part of BytesMovedPerStep that crossed
	// the network between nodes (0 on one node).
	NetBytesMovedPerStep float64 `json:"net_bytes_moved_per_step"`
	PlanUSP50            float64 `json:"plan_us_p50"`
	AllgatherUSP50       float64 `json:"allgather_us_p50"`
	// CostMAPE is the cost model's mean absolute percentage error on
	// samples it had not learned from, averaged over ranks (0.1 = 10 %);
	// nil when no rank got past its warm-up.
	CostMAPE *float64 `json:"cost_mape"`
	// GPUModelMAPE is the learned GPU model's error predicting each
	// step before it saw it (Config.LearnGPU), averaged over ranks; nil
	// when the loader did not learn one.
	GPUModelMAPE *float64 `json:"gpu_model_mape,omitempty"`
	// RingBytes is the shared-memory ring a trainer's batches travel in
	// (datahelix train and serve), per rank; 0 for a simulated GPU.
	RingBytes      int64 `json:"ring_bytes,omitempty"`
	DroppedSamples int   `json:"dropped_samples"`
	// DamagedSamples counts deliveries of samples with damage the
	// decoder concealed (StepRecord.Damaged).
	DamagedSamples int    `json:"damaged_samples"`
	PeakRSSBytes   int64  `json:"peak_rss_bytes"`
	BatchesHash    string `json:"batches_hash"`
	// WarmupSteps is how many first steps the steady_ figures leave out
	// (the planning horizon: until then the loader is still filling its
	// window and its step-time estimate has no history).
	WarmupSteps int `json:"warmup_steps"`
	// SteadySteps is how many steps the steady_ figures cover; 0 when the
	// run is not longer than the warm-up, and then the steady_ figures
	// are 0 here and null in JSON.
	SteadySteps         int     `json:"steady_steps"`
	SteadyMissRate      float64 `json:"steady_miss_rate"`
	SteadyGPUWaitFrac   float64 `json:"steady_gpu_wait_frac"`
	SteadyThroughputSPS float64 `json:"steady_throughput_sps"`
	// The job's steady figures: a step lasts as long as its slowest rank.
	// SteadyStepMissRate is the fraction of steps in which any rank
	// missed; SteadyJobStallFrac the sum over steps of the largest rank
	// wait, over the steady wall time; SteadyEfficiency the throughput
	// over the GPUs' ceiling, ranks x batch / mean GPU step.
	SteadyStepMissRate float64 `json:"steady_step_miss_rate"`
	SteadyJobStallFrac float64 `json:"steady_job_stall_frac"`
	SteadyEfficiency   float64 `json:"steady_efficiency"`
	// TimeToFirstBatchS is the run's start to the last rank's delivery of
	// its first step; WarmupStallS the sum over the warm-up steps of the
	// largest rank wait.
	TimeToFirstBatchS float64 `json:"time_to_first_batch_s"`
	WarmupStallS      float64 `json:"warmup_stall_s"`
}

// GPUWaitPerRankS is the mean GPU input wait of one rank, seconds: the
// figure to print next to the wall time and GPUWaitFrac
// (GPUWaitPerRankS / WallS == GPUWaitFrac).
func (s Summary) GPUWaitPerRankS() float64 {
	if s.Ranks <= 0 {
		return 0
	}
	return s.GPUWaitS / float64(s.Ranks)
}

// MarshalJSON writes the summary with its steady_ figures null when they
// cover no step (a run not longer than its warm-up), as cost_mape is null
// when no rank measured one: 0 would read as "no misses, no wait".
func (s Summary) MarshalJSON() ([]byte, error) {
	type plain Summary // without this method
	out := struct {
		plain
		SteadyMissRate      *float64 `json:"steady_miss_rate"`
		SteadyGPUWaitFrac   *float64 `json:"steady_gpu_wait_frac"`
		SteadyThroughputSPS *float64 `json:"steady_throughput_sps"`
		SteadyStepMissRate  *float64 `json:"steady_step_miss_rate"`
		SteadyJobStallFrac  *float64 `json:"steady_job_stall_frac"`
		SteadyEfficiency    *float64 `json:"steady_efficiency"`
	}{plain: plain(s)}
	if s.SteadySteps > 0 {
		out.SteadyMissRate, out.SteadyGPUWaitFrac, out.SteadyThroughputSPS = &s.SteadyMissRate, &s.SteadyGPUWaitFrac, &s.SteadyThroughputSPS
		out.SteadyStepMissRate, out.SteadyJobStallFrac = &s.SteadyStepMissRate, &s.SteadyJobStallFrac
		if s.SteadyEfficiency > 0 { // 0: no GPU step was measured
			out.SteadyEfficiency = &s.SteadyEfficiency
		}
	}
	return json.Marshal(out)
}

// Steady holds a run's figures over the steps after its warm-up, and
// the warm-up's own.
type Steady struct {
	Steps         int // steps counted; 0 when there are none
	MissRate      float64
	GPUWaitFrac   float64
	ThroughputSPS float64
	// StepMissRate, JobStallFrac and Efficiency are the job's figures
	// (Summary.SteadyStepMissRate...); Efficiency is 0 when no record
	// holds a GPU step.
	StepMissRate float64
	JobStallFrac float64
	Efficiency   float64
	// FirstBatchUS is when the last rank got the run's first step (µs on
	// the records' clock); WarmupStallUS the sum over warm-up steps of
	// the largest rank wait.
	FirstBatchUS  int64
	WarmupStallUS int64
}

// SteadyState computes the figures over the records after the first
// warmup steps of the run (a resumed run's first step is its
// checkpoint's), from the earliest request of the first step counted to
// endUS (the run's end, on the records' clock), and the warm-up's. The
// steady figures are zero, Steps included, when the run is not longer
// than the warm-up. A step's GPU time is its record's GPUUS (the
// simulated GPU's) or else its ComputeUS (the time to the next request).
func SteadyState(recs []StepRecord, warmup int, endUS int64) Steady {
	if len(recs) == 0 {
		return Steady{}
	}
	first := recs[0].Step
	for _, r := range recs {
		first = min(first, r.Step)
	}
	from := first + int64(warmup)
	var st Steady
	start := int64(-1)
	var wait, gpu int64
	var misses, n, samples, gpuN int
	ranks := map[int]bool{}
	type stepAcc struct {
		maxWait int64
		missed  bool
	}
	steps := map[int64]*stepAcc{}
	for _, r := range recs {
		if r.Step == first {
			st.FirstBatchUS = max(st.FirstBatchUS, r.DeliverUS)
		}
		a := steps[r.Step]
		if a == nil {
			a = &stepAcc{}
			steps[r.Step] = a
		}
		a.maxWait = max(a.maxWait, r.WaitUS)
		a.missed = a.missed || r.Miss
		if r.Step < from {
			continue
		}
		if r.Step == from && (start < 0 || r.RequestUS < start) {
			start = r.RequestUS
		}
		ranks[r.Rank] = true
		wait += r.WaitUS
		samples += r.Samples
		n++
		if r.Miss {
			misses++
		}
		if g := cmp.Or(r.GPUUS, r.ComputeUS); g > 0 {
			gpu += g
			gpuN++
		}
	}
	var stall int64
	var steadySteps, missedSteps int
	for s, a := range steps {
		if s < from {
			st.WarmupStallUS += a.maxWait
			continue
		}
		steadySteps++
		stall += a.maxWait
		if a.missed {
			missedSteps++
		}
	}
	if n == 0 || start < 0 || endUS <= start {
		return Steady{FirstBatchUS: st.FirstBatchUS, WarmupStallUS: st.WarmupStallUS}
	}
	span := float64(endUS - start)
	st.Steps = steadySteps
	st.MissRate = float64(misses) / float64(n)
	st.GPUWaitFrac = float64(wait) / (float64(len(ranks)) * span)
	st.ThroughputSPS = float64(samples) / (span / 1e6)
	st.StepMissRate = float64(missedSteps) / float64(steadySteps)
	st.JobStallFrac = float64(stall) / span
	if gpuN > 0 {
		// The ceiling: every rank's samples of a step each mean GPU step.
		perStep := float64(samples) / float64(steadySteps)
		ceiling := perStep / (float64(gpu) / float64(gpuN) / 1e6)
		st.Efficiency = st.ThroughputSPS / ceiling
	}
	return st
}

// Summarize aggregates the records of every rank of a run. wallUS is the
// run's duration (first request to last step end, the slowest rank's).
// GPU wait fraction is the waiting time summed over ranks divided by
// ranks x wall time; throughput is delivered samples per second. The
// steady_ figures leave out the first warmup steps (see SteadyState).
func Summarize(k step.Kind, recs []StepRecord, ranks, steps, batch, workers, warmup int, wallUS int64) Summary {
	s := Summary{Loader: k.String(), Ranks: ranks, Steps: steps, Batch: batch, Workers: workers, WarmupSteps: warmup}
	var first int64
	for i, r := range recs {
		if i == 0 || r.RequestUS < first {
			first = r.RequestUS
		}
	}
	st := SteadyState(recs, warmup, first+wallUS)
	s.SteadySteps = st.Steps
	s.SteadyMissRate, s.SteadyGPUWaitFrac, s.SteadyThroughputSPS = st.MissRate, st.GPUWaitFrac, st.ThroughputSPS
	s.SteadyStepMissRate, s.SteadyJobStallFrac, s.SteadyEfficiency = st.StepMissRate, st.JobStallFrac, st.Efficiency
	s.TimeToFirstBatchS = float64(st.FirstBatchUS) / 1e6 // the records' clock starts with the job
	s.WarmupStallS = float64(st.WarmupStallUS) / 1e6
	var wait, moved, netMoved int64
	var samples int
	var plans, gathers []int64
	perStep := map[int64]uint64{}
	for _, r := range recs {
		wait += r.WaitUS
		moved += r.BytesOut
		netMoved += r.NetBytesOut
		samples += r.Samples
		s.DroppedSamples += r.Dropped
		s.DamagedSamples += r.Damaged
		if r.Miss {
			s.Misses++
		}
		if r.Rank == 0 && (r.PlanUS > 0 || r.GatherUS > 0) {
			plans = append(plans, r.PlanUS)
			gathers = append(gathers, r.GatherUS)
		}
		perStep[r.Step] += r.Hash
	}
	if ranks*steps > 0 {
		s.MissRate = float64(s.Misses) / float64(ranks*steps)
	}
	s.GPUWaitS = float64(wait) / 1e6
	if wallUS > 0 {
		s.WallS = float64(wallUS) / 1e6
		s.GPUWaitFrac = float64(wait) / (float64(ranks) * float64(wallUS))
		s.ThroughputSPS = float64(samples) / s.WallS
	}
	if steps > 0 {
		s.BytesMovedPerStep = float64(moved) / float64(steps)
		s.NetBytesMovedPerStep = float64(netMoved) / float64(steps)
	}
	s.PlanUSP50 = p50(plans)
	s.AllgatherUSP50 = p50(gathers)
	s.BatchesHash = fmt.Sprintf("%016x", batchesHash(perStep))
	return s
}

// batchesHash folds the per-step digests in step order, so it identifies
// which samples trained in which step, whatever rank prepared them.
func batchesHash(perStep map[int64]uint64) uint64 {
	steps := make([]int64, 0, len(perStep))
	for st := range perStep {
		steps = append(steps, st)
	}
	slices.Sort(steps)
	h := uint64(0xcbf29ce484222325)
	for _, st := range steps {
		h = Mix64(h ^ Mix64(uint64(st)) ^ perStep[st])
	}
	return h
}

// IDDigest is the contribution of one delivered sample to a step's
// digest; digests add up over samples and ranks, so the order in which a
// rank or a loader delivered them does not matter.
func IDDigest(id uint64) uint64 { return Mix64(id ^ 0x9e3779b97f4a7c15) }

func p50(v []int64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return float64(s[len(s)/2])
}

// Mix64 is the splitmix64 finalizer: a bijection that spreads the bits of
// an id over the whole word (the planner hashes sample ids with the
// same). The batch digests are built with it.
func Mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
