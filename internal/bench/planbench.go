package bench

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"time"

	"github.com/datahelix/datahelix/internal/bench/workload"
	"github.com/datahelix/datahelix/internal/planlimits"
	"github.com/datahelix/datahelix/plan"
)

// PlanBenchConfig sets up a planner benchmark.
type PlanBenchConfig struct {
	Ranks int    // N
	Batch int    // B
	Plans int    // inputs planned; each is timed once
	Seed  uint64 // draws the inputs
}

// PlanBenchResult is what "datahelix bench plan" writes as JSON.
type PlanBenchResult struct {
	Ranks   int `json:"ranks"`
	Batch   int `json:"batch"`
	Samples int `json:"samples"`
	// PlanUSP50 and PlanUSP99 are percentiles of the planning time of one
	// input in ModeHelix, measured as CPU time of the planning thread, in
	// µs (see RunPlanBench).
	PlanUSP50 float64 `json:"plan_us_p50"`
	PlanUSP99 float64 `json:"plan_us_p99"`
	// AllocsPerPlan is the mean number of heap allocations per plan with
	// a reused plan.Planner and plan.Plan, as the runtime plans.
	AllocsPerPlan float64 `json:"allocs_per_plan"`
	// MakespanOverLowerBoundP50 is the median of the ModeOracle plan's
	// makespan over plan.LowerBound: balance quality with free transfers.
	MakespanOverLowerBoundP50 float64 `json:"makespan_over_lower_bound_p50"`
	// BytesMovedFracP50 is the median fraction of the batch's compressed
	// bytes that ModeHelix moves with 10 GB/s links and 5 µs latency.
	BytesMovedFracP50 float64 `json:"bytes_moved_frac_p50"`

	// WallUSP50 is the median wall-clock planning time, µs; it includes
	// whatever else the machine was running. Not part of the JSON.
	WallUSP50 float64 `json:"-"`
}

// String is the one-line human summary.
func (r PlanBenchResult) String() string {
	return fmt.Sprintf("plan: %d ranks x %d = %d samples: p50 %.0f µs, p99 %.0f µs CPU (wall p50 %.0f µs), %.1f allocs/plan, makespan/lower bound p50 %.4f, bytes moved p50 %.2f%%",
		r.Ranks, r.Batch, r.Samples, r.PlanUSP50, r.PlanUSP99, r.WallUSP50, r.AllocsPerPlan, r.MakespanOverLowerBoundP50, 100*r.BytesMovedFracP50)
}

// The exchange network of the benchmark: 10 GB/s, 5 µs per message.
const (
	benchBandwidth = 10_000 * plan.One // bytes/µs, fixed-point
	benchLatency   = 5                 // µs
)

// RunPlanBench plans cfg.Plans inputs drawn by VideoPlanInput.
//
// Each input is planned in ModeHelix with a Planner and Plan reused across
// inputs, on one goroutine locked to its OS thread; the time of a plan is
// the thread's CPU time (CLOCK_THREAD_CPUTIME_ID), which is what the plan
// costs one core, unaffected by other processes taking the machine's
// cores. Allocations are counted with runtime.MemStats around the timed
// calls. The same input is then planned in ModeOracle (free transfers)
// for the makespan over plan.LowerBound.
func RunPlanBench(cfg PlanBenchConfig) (PlanBenchResult, error) {
	switch {
	case cfg.Ranks < 1 || cfg.Ranks > planlimits.Ranks:
		return PlanBenchResult{}, fmt.Errorf("bench plan: %d ranks outside [1, %d]", cfg.Ranks, planlimits.Ranks)
	case cfg.Batch < 1 || cfg.Batch > planlimits.Batch:
		return PlanBenchResult{}, fmt.Errorf("bench plan: batch %d outside [1, %d]", cfg.Batch, planlimits.Batch)
	case cfg.Plans < 1:
		return PlanBenchResult{}, errors.New("bench plan: want at least one plan")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	rng := rand.New(rand.NewPCG(cfg.Seed, uint64(cfg.Ranks)<<32|uint64(cfg.Batch)))
	var (
		pl                      plan.Planner
		p                       plan.Plan
		cpu, wall, ratio, moved []float64
		mallocs                 uint64
		ms                      runtime.MemStats
	)
	// One untimed plan sizes the scratch memory, as after the runtime's
	// first step.
	if err := pl.Compute(VideoPlanInput(rng, cfg.Ranks, cfg.Batch), &p); err != nil {
		return PlanBenchResult{}, err
	}
	for i := range cfg.Plans {
		in := VideoPlanInput(rng, cfg.Ranks, cfg.Batch)
		in.Step = int64(i)
		runtime.ReadMemStats(&ms)
		before := ms.Mallocs
		w0, c0 := time.Now(), workload.ThreadCPU()
		err := pl.Compute(in, &p)
		c1, w1 := workload.ThreadCPU(), time.Now()
		runtime.ReadMemStats(&ms)
		if err != nil {
			return PlanBenchResult{}, fmt.Errorf("bench plan: input %d: %w", i, err)
		}
		mallocs += ms.Mallocs - before
		cpu = append(cpu, float64(c1-c0)/1e3)
		wall = append(wall, float64(w1.Sub(w0).Nanoseconds())/1e3)
		var total int64
		for k := range in.Samples {
			total += in.Samples[k].Bytes
		}
		moved = append(moved, float64(p.BytesMoved)/float64(total))

		in.Mode = plan.ModeOracle
		for r := range in.Ranks {
			in.Ranks[r].Deadline = 0
		}
		if err := pl.Compute(in, &p); err != nil {
			return PlanBenchResult{}, fmt.Errorf("bench plan: input %d: %w", i, err)
		}
		ratio = append(ratio, float64(p.Makespan)/float64(plan.LowerBound(in)))
	}
	return PlanBenchResult{
		Ranks:                     cfg.Ranks,
		Batch:                     cfg.Batch,
		Samples:                   cfg.Ranks * cfg.Batch,
		PlanUSP50:                 percentile(cpu, 0.50),
		PlanUSP99:                 percentile(cpu, 0.99),
		AllocsPerPlan:             float64(mallocs) / float64(cfg.Plans),
		MakespanOverLowerBoundP50: percentile(ratio, 0.50),
		BytesMovedFracP50:         percentile(moved, 0.50),
		WallUSP50:                 percentile(wall, 0.50),
	}, nil
}

// percentile returns the q-quantile of xs (nearest rank); it sorts xs.
func percentile(xs []float64, q float64) float64 {
	slices.Sort(xs)
	i := int(math.Ceil(q*float64(len(xs)))) - 1
	return xs[min(max(i, 0), len(xs)-1)]
}

// VideoPlanInput draws a planner input for ranks x batch video clips in
// ModeHelix, shaped like a training step of a video workload:
//
//   - Every rank reads its own shard, and shards differ: a shard has its
//     own clip-length scale (lognormal, σ 0.5) and resolution mix, so a
//     rank's load is correlated, as with source-homogeneous shards.
//   - A clip lasts a lognormal time (median 8 s times the shard's scale,
//     σ 0.9), clipped to [1 s, 180 s], at 360p, 720p or 1080p, 30 fps.
//   - Its compressed size is duration x bitrate (about 0.8, 2.5 and 5
//     Mbit/s, times a lognormal factor of σ 0.3): a few hundred KB to
//     tens of MB, up to about 100 MB for the longest 1080p clips.
//   - Its estimated cost is full decode at 0.7, 2 and 4.5 ms of reference
//     CPU per frame: 21 ms for a short 360p clip, 24 s for the longest
//     1080p one.
//   - Every rank has 8 decode workers at a speed factor of 0.8 to 1.2,
//     10 GB/s links with 5 µs latency, and plans 4 steps ahead with CPUs
//     provisioned at 1.2x the GPUs' demand: the deadline is 4 step times,
//     the backlog about 3 batches of decode, with ±25 % noise per rank.
func VideoPlanInput(rng *rand.Rand, ranks, batch int) *plan.Input {
	type res struct {
		bitrate  float64 // bits per second
		perFrame float64 // µs of reference CPU per frame
	}
	levels := [3]res{{0.8e6, 700}, {2.5e6, 2000}, {5e6, 4500}}
	in := &plan.Input{Params: plan.Params{Mode: plan.ModeHelix, Seed: rng.Uint64()}, Batch: batch}
	in.Samples = make([]plan.Sample, 0, ranks*batch)
	var total float64
	for r := range ranks {
		scale := math.Exp(0.5 * rng.NormFloat64())
		mix := [3]float64{rng.Float64(), rng.Float64(), rng.Float64()}
		for i := range batch {
			dur := min(max(8*scale*math.Exp(0.9*rng.NormFloat64()), 1), 180)
			u := rng.Float64() * (mix[0] + mix[1] + mix[2])
			l := levels[2]
			if u < mix[0] {
				l = levels[0]
			} else if u < mix[0]+mix[1] {
				l = levels[1]
			}
			bytes := dur * l.bitrate / 8 * math.Exp(0.3*rng.NormFloat64())
			cost := dur * 30 * l.perFrame
			total += cost
			in.Samples = append(in.Samples, plan.Sample{
				ID:    uint64(r)<<32 | uint64(i),
				Owner: r,
				Bytes: int64(bytes),
				Cost:  int64(cost),
			})
		}
	}
	// Step time: the mean batch's decode time on a nominal rank, times
	// 1.2 (CPUs provisioned at 1.2x the GPUs' demand).
	const workers, horizon = 8, 4
	step := 1.2 * total / float64(ranks) / workers
	for range ranks {
		speed := 0.8 + 0.4*rng.Float64()
		backlog := (horizon - 1) * step / 1.2 * (0.75 + 0.5*rng.Float64())
		in.Ranks = append(in.Ranks, plan.Progress{
			Deadline:  int64(horizon * step),
			Backlog:   int64(backlog),
			Capacity:  int64(workers * speed * plan.One),
			Bandwidth: benchBandwidth,
			Latency:   benchLatency,
		})
	}
	return in
}
