package sim

import (
	"context"
	"fmt"
	"math/bits"
	"runtime"
	"slices"
	"time"

	"github.com/datahelix/datahelix/gpu"
	"github.com/datahelix/datahelix/internal/metrics"
	"github.com/datahelix/datahelix/internal/planlimits"
	"github.com/datahelix/datahelix/internal/step"
	"github.com/datahelix/datahelix/plan"
)

// Sample is one sample of a simulated job.
type Sample struct {
	ID    uint64
	Bytes int64
	Cost  int64 // true preparation cost, µs of reference CPU
	Est   int64 // what the cost model predicts for it
	// Parts are the true costs of its keyframe-aligned decode tasks when
	// the clip can be split (summing to Cost); PartsEst their estimates.
	Parts    []int64
	PartsEst []int64
	Frames   int // decoded frames the GPU consumes (images count 1)
	Tokens   int
	Mem      int64 // decoded bytes
	// Train, when positive, is the GPU time (ns) the sample adds to its
	// step, as a recorded run measured it, instead of the time the job's
	// GPU model gives its Frames and Tokens.
	Train int64
}

// Config describes a simulated job: the same loaders, scheduling
// policies and planner as the runtime, on a virtual clock, with decode
// times taken from the samples instead of measured.
type Config struct {
	Loader   step.Kind
	Ranks    int
	Batch    int
	Steps    int
	Workers  int
	Horizon  int   // planning horizon in steps; 0 means 2*Workers
	Prefetch int   // torch's prefetch factor; 0 means 2
	Budget   int64 // decoded bytes in flight per rank; 0 means unlimited
	GPU      gpu.Model
	// AllreduceUS is the gradient allreduce's own duration, after the
	// slowest rank's compute.
	AllreduceUS int64
	// Bandwidth is the exchange bandwidth, fixed-point bytes/µs
	// (plan.One = 1 B/µs), at most planlimits.Bandwidth; 0 means 1 GB/s.
	Bandwidth int64
	LatencyUS int64 // per message, 0..planlimits.Latency
	// Nodes, when set, is each rank's node. Moves between ranks of
	// different nodes cross the network: NodeLatencyUS, then the bytes
	// at NodeBandwidth (fixed-point, 0 meaning Bandwidth) over the
	// sending node's link, which carries one node's transfers one after
	// another; and a step's allgather, queued behind them, completes
	// only when every link has drained.
	Nodes         []int
	NodeBandwidth int64
	NodeLatencyUS int64
	Margin        int64 // the gate's margin, µs
	// Speed is each rank's decode slowdown, fixed-point: a task of cost c
	// takes c*Speed[r]/plan.One µs on rank r. nil means every rank runs
	// at reference speed.
	Speed []int64
	// SpeedAt, when set, changes the ranks' speeds over time (noisy
	// neighbours): rank r's decode slowdown, as Speed, from the time step
	// s is prepared on. It must be deterministic; Speed is then ignored.
	SpeedAt func(s int64, r int) int64
	// Overheads, when set, charges a planned loader's own work per step,
	// which is free otherwise.
	Overheads *Overheads
	// StartUS, when set, is per rank the start-up work (µs on a core of
	// its own) its workers do, split evenly, before any decode: a real
	// process's first reads, decoder set-up and cold caches.
	StartUS []int64
	// CPUs, when set, puts the ranks' decode workers on shared cores, as
	// on a node running more threads than it has cores; nil gives every
	// worker a core of its own.
	CPUs *CPUShare
	// Samples returns rank r's B samples for a step, the same for every
	// loader. It must be deterministic.
	Samples func(step int64, rank int) []Sample
	Seed    uint64
	// KeepPlanTimes records the planner's real run time per step: the CPU
	// time of the thread that plans (CLOCK_THREAD_CPUTIME_ID, as bench
	// plan measures), what a plan costs one core whatever else the
	// machine runs (the only clock reading; it does not influence the
	// simulation).
	KeepPlanTimes bool
	// OnPlan, when set, sees every plan with its input and the virtual
	// time it was made at (to study predictions against outcomes).
	OnPlan func(step, at int64, in *plan.Input, p *plan.Plan)
	// Progress, when set, replaces what the simulated ranks measure of
	// themselves with a recorded run's progress: rank r's at step s.
	Progress func(s int64, r int) plan.Progress
}

// CPUShare places ranks on groups of cores. The busy decode workers of
// the ranks in a group share its cores equally (processor sharing: a
// task runs at min(1, cores/busy) of a core's speed, slowed further by
// its rank's Speed), as the OS time-slices threads pinned to the same
// cores; a worker idle on one rank leaves its share to the others of its
// group. Threads of other processes, always ready to run and free to
// move between the cores, can take their share too (Others).
type CPUShare struct {
	Group []int // per rank: the index of its group
	Cores []int // per group: how many cores it has
	// Others is how many threads of other processes compete for the
	// cores, in OtherUnit units (OtherUnit/2 weighs half a thread: it
	// runs at half the level a thread runs at). They are not pinned: as
	// a fair scheduler balancing its run queues would, they take the
	// idle cores first, and every thread runs at the same share of a
	// core, except the workers of a group whose cores cannot give them
	// that share, which divide those cores (max-min fair sharing, at
	// most a core a thread).
	Others int64
}

// Overheads are the costs of a planned loader's own work per step, from
// microbenchmarks of the machine:
//   - the allgather: the plan's input reaches every rank after
//     ceil(log2 N) rounds of the network's latency (recursive doubling)
//     and the gathered blocks at its bandwidth;
//   - the plan: every rank computes the same plan (there is no
//     coordinator), PlanNSPerSample per sample of the world's batch
//     (N x B), on the cores its decode workers share;
//   - the exchange's copies: ExchangeUSPerMB of CPU per MB a rank sends
//     or receives, besides the wire time already charged.
//
// The allgather and the plan delay the step's tasks (wall time); the plan
// and the copies are CPU time the rank's next decode task waits for.
type Overheads struct {
	PlanNSPerSample int64
	ExchangeUSPerMB int64
}

// OtherUnit is one thread of CPUShare.Others.
const OtherUnit = 256

// Result is the outcome of a simulation.
type Result struct {
	Summary metrics.Summary
	Records []metrics.StepRecord // per rank per step, by step then rank
	WallUS  int64
	// WorkUS is, per rank, the time its decode tasks took on a core of
	// their own (true costs times the rank's Speed): its CPU time.
	WorkUS []int64
	// OthersUS is the CPU time (core µs) the other processes' threads
	// (CPUShare.Others) took over the run, every group's.
	OthersUS int64
}

func (c *Config) defaults() error {
	if c.Ranks < 1 || c.Batch < 1 || c.Steps < 1 || c.Workers < 1 {
		return fmt.Errorf("sim: simulation needs ranks, batch, steps and workers >= 1 (got %d, %d, %d, %d)", c.Ranks, c.Batch, c.Steps, c.Workers)
	}
	if c.Samples == nil {
		return fmt.Errorf("sim: simulation has no sample source")
	}
	if c.Horizon <= 0 {
		c.Horizon = 2 * c.Workers
	}
	if c.Prefetch <= 0 {
		c.Prefetch = 2
	}
	// Out of range, a bandwidth or latency would be simulated as another
	// network than the planner sees (it clamps them), or overflow.
	switch {
	case c.Bandwidth < 0 || c.Bandwidth > planlimits.Bandwidth:
		return fmt.Errorf("sim: bandwidth %d outside [0, %d] (fixed-point bytes/µs, %d = 1 byte/µs)", c.Bandwidth, int64(planlimits.Bandwidth), plan.One)
	case c.LatencyUS < 0 || c.LatencyUS > planlimits.Latency:
		return fmt.Errorf("sim: latency %d µs outside [0, %d]", c.LatencyUS, int64(planlimits.Latency))
	}
	if c.Bandwidth == 0 {
		c.Bandwidth = 1000 * plan.One // 1 GB/s
	}
	switch {
	case c.Nodes != nil && len(c.Nodes) != c.Ranks:
		return fmt.Errorf("sim: nodes for %d ranks, want %d", len(c.Nodes), c.Ranks)
	case c.NodeBandwidth < 0 || c.NodeBandwidth > planlimits.Bandwidth:
		return fmt.Errorf("sim: bandwidth between nodes %d outside [0, %d]", c.NodeBandwidth, int64(planlimits.Bandwidth))
	case c.NodeLatencyUS < 0 || c.NodeLatencyUS > planlimits.Latency:
		return fmt.Errorf("sim: latency between nodes %d µs outside [0, %d]", c.NodeLatencyUS, int64(planlimits.Latency))
	}
	for r, nd := range c.Nodes {
		if nd < 0 || nd >= c.Ranks {
			return fmt.Errorf("sim: rank %d on node %d, want 0..%d", r, nd, c.Ranks-1)
		}
	}
	if c.NodeBandwidth == 0 {
		c.NodeBandwidth = c.Bandwidth
	}
	if c.Speed != nil && len(c.Speed) != c.Ranks {
		return fmt.Errorf("sim: %d speed factors for %d ranks", len(c.Speed), c.Ranks)
	}
	if c.StartUS != nil && len(c.StartUS) != c.Ranks {
		return fmt.Errorf("sim: %d start-up works for %d ranks", len(c.StartUS), c.Ranks)
	}
	if c.CPUs != nil {
		if len(c.CPUs.Group) != c.Ranks {
			return fmt.Errorf("sim: core groups for %d ranks, want %d", len(c.CPUs.Group), c.Ranks)
		}
		for r, g := range c.CPUs.Group {
			if g < 0 || g >= len(c.CPUs.Cores) {
				return fmt.Errorf("sim: rank %d is in core group %d of %d", r, g, len(c.CPUs.Cores))
			}
		}
		for g, k := range c.CPUs.Cores {
			if k < 1 {
				return fmt.Errorf("sim: core group %d has %d cores", g, k)
			}
		}
		if o := c.CPUs.Others; o < 0 || o > maxOthers {
			return fmt.Errorf("sim: %d/%d threads of other processes, want 0 to %d", o, OtherUnit, maxOthers)
		}
	}
	return c.GPU.Validate()
}

// Run runs the job on the virtual clock and returns its metrics. It
// is deterministic: the same configuration gives the same result.
func Run(cfg Config) (*Result, error) {
	return RunContext(context.Background(), cfg)
}

// globalEngine forces the one time-ordered queue even where ranks are
// independent (a test compares the two).
var globalEngine = false

// ctxEvents is how many events RunContext processes between two
// looks at its context inside a step: a step of a large world runs
// millions.
const ctxEvents = 1 << 12

// RunContext is Run stopping early, with ctx's error, once ctx
// is done: it looks at ctx before planning each step, before delivering
// each step and every ctxEvents events in between, so that a large
// simulation ends within about a step of a cancellation. Not cancelled,
// it returns what Run returns.
func RunContext(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	n, b := cfg.Ranks, cfg.Batch
	prior := cfg.GPU.StepTime(gpu.Contents{Samples: b, Frames: b * 8}) + time.Duration(cfg.AllreduceUS)*time.Microsecond
	ranks := make([]*simRank, n)
	groups, all, shared := rankGroups(&cfg)
	for r := range ranks {
		speed := int64(plan.One)
		switch {
		case cfg.SpeedAt != nil:
			speed = cfg.SpeedAt(0, r)
		case cfg.Speed != nil:
			speed = cfg.Speed[r]
		}
		ranks[r] = &simRank{
			r: r, sched: cfg.Loader.NewScheduler(cfg.Workers, cfg.Prefetch, cfg.Budget), speed: speed,
			group: groups[r], running: make([]*simTask, cfg.Workers), contention: plan.One,
			left: make([]int, cfg.Steps), readyAt: slices.Repeat([]int64{-1}, cfg.Steps),
			batches: make([][]Sample, cfg.Steps), moved: make([][3]int64, cfg.Steps),
			tracker: gpu.NewTracker(prior),
		}
	}
	eng := &simEngine{ranks: ranks, shared: shared}
	if cfg.CPUs != nil && cfg.CPUs.Others > 0 {
		eng.others = &otherThreads{n: cfg.CPUs.Others, groups: all}
		eng.others.share()
	}
	eng.local = !shared && eng.others == nil && !globalEngine
	res := &Result{}
	splitAbove := step.SplitAbove(prior.Microseconds())
	params := step.Params{Kind: cfg.Loader, Batch: b, Seed: cfg.Seed, Margin: cfg.Margin}
	var stepper step.Stepper
	var gathered []byte
	planTimes := map[int64]int64{}

	// prepare plans (or not) batch s at virtual time at and schedules the
	// arrival of its tasks on every rank.
	linkFree := make([]int64, n) // per node: when its link has sent what it was given
	prepare := func(s int64, at int64) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if cfg.Nodes != nil && cfg.Loader.Planned() {
			at = max(at, slices.Max(linkFree)) // the allgather waits behind the bulk
		}
		own := make([][]Sample, n)
		for r := range own {
			own[r] = cfg.Samples(s, r)
			if len(own[r]) != b {
				return fmt.Errorf("sim: sample source gave rank %d %d samples for step %d, want %d", r, len(own[r]), s, b)
			}
		}
		eng.advance(at)
		if cfg.SpeedAt != nil {
			for r, rk := range ranks {
				rk.speed = cfg.SpeedAt(s, r)
			}
		}
		batches := make([][]Sample, n)
		overhead := int64(0) // the allgather's and the plan's wall time
		orders := make([][]int, n)
		arrive := make([][]int64, n) // per rank per slot: when the sample's bytes are there
		if !cfg.Loader.Planned() {
			if cfg.Loader == step.KindTorchPack {
				own = packTrain(own, b, cfg.GPU)
			}
			for r := range own {
				batches[r] = own[r]
				arrive[r] = make([]int64, b)
				orders[r] = cfg.Loader.Order(simItems(own[r], r, false, cfg.Loader.Splits(), splitAbove, cfg.GPU))
			}
		} else {
			oracle := cfg.Loader == step.KindOracle
			gathered = gathered[:0]
			for r, rk := range ranks {
				waiting, running := rk.sched.Queued()
				waiting += rk.inflight
				deadline := rk.tracker.NeedAt(s, time.UnixMicro(0)).UnixMicro() - at
				st := step.RankState{DeadlineUS: deadline, Waiting: waiting, Running: running,
					Workers: cfg.Workers, Speed: rk.speed * rk.contention / plan.One, Bandwidth: cfg.Bandwidth, LatencyUS: cfg.LatencyUS}
				if cfg.Nodes != nil {
					st.Node, st.NodeBandwidth, st.NodeLatencyUS = cfg.Nodes[r], cfg.NodeBandwidth, cfg.NodeLatencyUS
				}
				block := params.Block(s, r, st, simItems(own[r], r, oracle, cfg.Loader.Splits(), splitAbove, cfg.GPU))
				if cfg.Progress != nil {
					block.Progress = cfg.Progress(s, r)
				}
				var err error
				if gathered, err = plan.AppendBlock(gathered, block); err != nil {
					return fmt.Errorf("sim: step %d: encode rank %d's block: %w", s, r, err)
				}
			}
			var t0 int64
			if cfg.KeepPlanTimes {
				runtime.LockOSThread()
				t0 = threadCPU()
			}
			in, pl, err := stepper.Plan(s, gathered)
			if cfg.KeepPlanTimes {
				planTimes[s] = (threadCPU() - t0) / 1000
				runtime.UnlockOSThread()
			}
			if err != nil {
				return fmt.Errorf("sim: %w", err)
			}
			if cfg.OnPlan != nil {
				cfg.OnPlan(s, at, in, pl)
			}
			if ov := cfg.Overheads; ov != nil && !oracle {
				rounds := int64(bits.Len(uint(n - 1)))
				gather := rounds*cfg.LatencyUS + int64(len(gathered))*plan.One/cfg.Bandwidth
				planUS := ov.PlanNSPerSample * int64(n) * int64(b) / 1000
				overhead = gather + planUS
				for _, rk := range ranks {
					rk.debt += planUS
				}
			}
			for r := range batches {
				ord := pl.DecodeOrder(r)
				batches[r] = make([]Sample, b)
				orders[r] = make([]int, b)
				arrive[r] = make([]int64, b)
				for slot, k := range ord {
					batches[r][slot] = own[int(k)/b][int(k)%b]
					orders[r][slot] = slot // slots are numbered in decode order
				}
			}
			slotOf := make(map[int32]int, n*b) // sample index -> slot on its new rank
			for r := 0; r < n; r++ {
				for slot, k := range pl.DecodeOrder(r) {
					slotOf[k] = slot
				}
			}
			for _, mv := range pl.Moves {
				// Loaders that plan without the gate still wait for the
				// bytes; only the oracle's transfers are free.
				delay := int64(0)
				switch {
				case oracle:
				case cfg.Nodes != nil && cfg.Nodes[mv.Src] != cfg.Nodes[mv.Dst]:
					link := cfg.Nodes[mv.Src]
					linkFree[link] = max(linkFree[link], at) + cfg.NodeLatencyUS + mv.Bytes*plan.One/cfg.NodeBandwidth
					delay = linkFree[link] - at
				default:
					delay = cfg.LatencyUS + mv.Bytes*plan.One/cfg.Bandwidth
				}
				ranks[mv.Src].moved[s][1] += mv.Bytes
				ranks[mv.Dst].moved[s][0] += mv.Bytes
				if ov := cfg.Overheads; ov != nil && !oracle {
					copyUS := mv.Bytes * ov.ExchangeUSPerMB / 1e6
					ranks[mv.Src].debt += copyUS
					ranks[mv.Dst].debt += copyUS
				}
				if cfg.Nodes != nil && cfg.Nodes[mv.Src] != cfg.Nodes[mv.Dst] {
					ranks[mv.Src].moved[s][2] += mv.Bytes
				}
				for _, k := range mv.Samples {
					arrive[mv.Dst][slotOf[k]] = delay
				}
			}
		}
		for r, rk := range ranks {
			rk.batches[s] = batches[r]
			items := simItems(batches[r], r, cfg.Loader == step.KindOracle, cfg.Loader.Splits(), splitAbove, cfg.GPU)
			tasks := step.BuildTasks(s, items, orders[r], cfg.Loader.Splits(), splitAbove)
			rk.left[s] = len(tasks)
			byArrival := map[int64][]step.Task{}
			for _, t := range tasks {
				d := arrive[r][t.Slot]
				byArrival[d] = append(byArrival[d], t)
			}
			// Own samples arrive at once, moved ones after their message.
			for _, d := range sortedKeys(byArrival) {
				for _, t := range byArrival[d] {
					rk.inflight += t.Cost
				}
				eng.push(event{at: at + overhead + d, kind: 0, rank: r, step: s, tasks: byArrival[d]})
			}
		}
		eng.advance(at)
		return nil
	}

	for r, rk := range ranks {
		if cfg.StartUS != nil && cfg.StartUS[r] > 0 {
			eng.startup(rk, cfg.StartUS[r])
		}
	}
	for s := int64(0); s < int64(min(cfg.Horizon, cfg.Steps)); s++ {
		if err := prepare(s, 0); err != nil {
			return nil, err
		}
	}
	request := int64(0)
	res.Records = make([]metrics.StepRecord, 0, n*cfg.Steps)
	recs := make([]metrics.StepRecord, n)
	delivered := make([]bool, n)
	events := 0
	for t := int64(0); t < int64(cfg.Steps); t++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		end := int64(0)
		lastDeliver := int64(0)
		// deliver hands rank r's batch t to its GPU at the engine's clock.
		deliver := func(r int) {
			rk := ranks[r]
			at := eng.now
			rk.sched.Release(t)
			eng.dispatch(rk)
			rk.tracker.Requested(t, time.UnixMicro(request))
			rk.tracker.Delivered(t, time.UnixMicro(at))
			c := gpu.Contents{Samples: b}
			var hash uint64
			for _, x := range rk.batches[t] {
				c.Frames += x.Frames
				c.Tokens += x.Tokens
				hash += metrics.IDDigest(x.ID)
			}
			compute := cfg.GPU.StepTime(c).Microseconds()
			end = max(end, at+compute)
			lastDeliver = max(lastDeliver, at)
			mv := rk.moved[t]
			rec := metrics.StepRecord{Step: t, Rank: r, RequestUS: request, ReadyUS: rk.readyAt[t], DeliverUS: at,
				WaitUS: at - request, ComputeUS: compute, GPUUS: compute, Samples: b, BytesIn: mv[0], BytesOut: mv[1], NetBytesOut: mv[2],
				PlanUS: planTimes[t], Hash: hash, CPUUS: rk.work - rk.workAt, DecodeCPUUS: rk.decode - rk.decodeAt}
			rk.workAt, rk.decodeAt = rk.work, rk.decode
			rec.TolUS = metrics.Tolerance(compute)
			rec.Miss = rec.ReadyUS-rec.RequestUS > rec.TolUS
			recs[r] = rec
			delivered[r] = true
			rk.batches[t] = nil
		}
		// Batches ready by the request go at the request; a late one goes
		// once every event of the instant it became ready has run.
		if eng.local {
			// A rank at a time: only its own events can make it ready.
			for r, rk := range ranks {
				eng.advanceRank(rk, request)
				for rk.readyAt[t] < 0 {
					if events++; events%ctxEvents == 0 {
						if err := ctx.Err(); err != nil {
							return nil, err
						}
					}
					if !eng.nextRank(rk) {
						return nil, fmt.Errorf("sim: simulation stalled: rank %d cannot finish batch %d", r, t)
					}
				}
				for rk.q.len() > 0 && rk.q.heap[0].at == rk.now {
					eng.nextRank(rk)
				}
				eng.now = rk.now
				deliver(r)
			}
			res.Records = append(res.Records, recs...)
			if next := t + int64(cfg.Horizon); next < int64(cfg.Steps) {
				if err := prepare(next, lastDeliver); err != nil {
					return nil, err
				}
			}
			request = end + cfg.AllreduceUS
			continue
		}
		eng.advance(request)
		eng.readied = eng.readied[:0]
		left := n
		for r := range ranks {
			delivered[r] = false
			if ranks[r].readyAt[t] >= 0 {
				deliver(r)
				left--
			}
		}
		for left > 0 {
			if events++; events%ctxEvents == 0 {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
			}
			if !eng.next() {
				for r := range ranks {
					if !delivered[r] {
						return nil, fmt.Errorf("sim: simulation stalled: rank %d cannot finish batch %d", r, t)
					}
				}
			}
			if at, ok := eng.peek(); ok && at == eng.now {
				continue
			}
			slices.Sort(eng.readied)
			for _, r := range eng.readied {
				if ranks[r].readyAt[t] >= 0 && !delivered[r] {
					deliver(r)
					left--
				}
			}
			eng.readied = eng.readied[:0]
		}
		res.Records = append(res.Records, recs...)
		// Every rank's control loop plans batch t+H once it has delivered
		// batch t; the allgather completes when the last rank gets there.
		if next := t + int64(cfg.Horizon); next < int64(cfg.Steps) {
			if err := prepare(next, lastDeliver); err != nil {
				return nil, err
			}
		}
		request = end + cfg.AllreduceUS
	}
	res.WallUS = request
	res.WorkUS = make([]int64, n)
	for r, rk := range ranks {
		res.WorkUS[r] = rk.work
	}
	if o := eng.others; o != nil {
		o.update(max(res.WallUS, o.last))
		res.OthersUS = o.cpu / OtherUnit
	}
	res.Summary = metrics.Summarize(cfg.Loader, res.Records, n, cfg.Steps, b, cfg.Workers, cfg.Horizon, res.WallUS)
	return res, nil
}

// packTrain repacks a step's global batch (own: every rank's samples)
// across the ranks by GPU work, as torch-pack does (step.PackTrain): each
// rank then reads and decodes the samples it trains from storage, so no
// bytes move between ranks.
func packTrain(own [][]Sample, b int, m gpu.Model) [][]Sample {
	var all []Sample
	for _, xs := range own {
		all = append(all, xs...)
	}
	packed := step.PackTrain(simItems(all, 0, false, false, 0, m), len(own), b)
	out := make([][]Sample, len(own))
	for r, idx := range packed {
		out[r] = make([]Sample, len(idx))
		for i, k := range idx {
			out[r][i] = all[k]
		}
	}
	return out
}

// simItems converts simulated samples to pipeline items, with estimated
// costs (or true ones for the oracle). A sample the rank will split —
// splittable, by a loader that splits, estimated above splitAbove, as
// the runtime decides — is planned at the cost of its parts, which is
// what splitting costs. Each item's GPU time is its frames and tokens
// under m.
func simItems(xs []Sample, owner int, truth, split bool, splitAbove int64, m gpu.Model) []step.Item {
	items := make([]step.Item, len(xs))
	for i, x := range xs {
		est, parts := x.Est, x.PartsEst
		if truth {
			est, parts = x.Cost, x.Parts
		}
		if len(x.Parts) > 1 && len(parts) != len(x.Parts) {
			parts = x.Parts
		}
		if !split || len(x.Parts) < 2 || est <= splitAbove {
			parts = nil
		} else {
			est = 0
			for _, c := range parts {
				est += c
			}
		}
		train := x.Train
		if train <= 0 {
			train = step.TrainTime(m, gpu.Contents{Samples: 1, Frames: x.Frames, Tokens: x.Tokens})
		}
		items[i] = step.Item{ID: x.ID, Owner: owner, Bytes: x.Bytes, Est: max(est, 1), Parts: parts, Mem: x.Mem, Train: train}
	}
	return items
}

func sortedKeys(m map[int64][]step.Task) []int64 {
	keys := make([]int64, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
