package spmd

import (
	"container/heap"
	"fmt"
	"slices"
	"time"

	"github.com/datahelix/datahelix/gpu"
	"github.com/datahelix/datahelix/plan"
)

// SimSample is one sample of a simulated job.
type SimSample struct {
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
}

// SimConfig describes a simulated job: the same loaders, scheduling
// policies and planner as the runtime, on a virtual clock, with decode
// times taken from the samples instead of measured.
type SimConfig struct {
	Loader   Kind
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
	Bandwidth   int64 // exchange bandwidth, fixed-point bytes/µs (plan.One = 1 B/µs)
	LatencyUS   int64 // per message
	Margin      int64 // the gate's margin, µs
	// Speed is each rank's decode slowdown, fixed-point: a task of cost c
	// takes c*Speed[r]/plan.One µs on rank r. nil means every rank runs
	// at reference speed.
	Speed []int64
	// Samples returns rank r's B samples for a step, the same for every
	// loader. It must be deterministic.
	Samples func(step int64, rank int) []SimSample
	Seed    uint64
	// KeepPlanTimes records the planner's real run time per step (the
	// only wall-clock reading; it does not influence the simulation).
	KeepPlanTimes bool
	// OnPlan, when set, sees every plan with its input and the virtual
	// time it was made at (to study predictions against outcomes).
	OnPlan func(step, at int64, in *plan.Input, p *plan.Plan)
}

// SimResult is the outcome of a simulation.
type SimResult struct {
	Summary Summary
	Records []StepRecord // per rank per step, by step then rank
	WallUS  int64
}

func (c *SimConfig) defaults() error {
	if c.Ranks < 1 || c.Batch < 1 || c.Steps < 1 || c.Workers < 1 {
		return fmt.Errorf("spmd: simulation needs ranks, batch, steps and workers >= 1 (got %d, %d, %d, %d)", c.Ranks, c.Batch, c.Steps, c.Workers)
	}
	if c.Samples == nil {
		return fmt.Errorf("spmd: simulation has no sample source")
	}
	if c.Horizon <= 0 {
		c.Horizon = 2 * c.Workers
	}
	if c.Prefetch <= 0 {
		c.Prefetch = 2
	}
	if c.Bandwidth <= 0 {
		c.Bandwidth = 1000 * plan.One // 1 GB/s
	}
	if c.Speed != nil && len(c.Speed) != c.Ranks {
		return fmt.Errorf("spmd: %d speed factors for %d ranks", len(c.Speed), c.Ranks)
	}
	return c.GPU.Validate()
}

// simTask is a task with its true duration on the simulated rank.
type simTask struct {
	Task
	trueCost int64
}

// simRank is one rank of the simulation: its workers on the virtual clock
// and its batches in progress.
type simRank struct {
	r       int
	sched   Scheduler
	speed   int64
	now     int64
	workers []int64 // busy until, µs; <= now when idle
	running []*simTask
	events  eventHeap // task completions and task arrivals
	// per step: parts left to decode, completion time, true task costs
	left    map[int64]int
	readyAt map[int64]int64
	costs   map[taskKey]int64
	tracker *gpu.Tracker
	batches map[int64][]SimSample // the rank's batch per step (after planning)
	moved   map[int64][2]int64    // bytes in, bytes out per step
	seq     int64                 // event tie-break: first pushed, first processed
	// inflight is the estimated cost of tasks planned for this rank whose
	// samples are still on their way: part of its backlog, as in the
	// runtime, where a batch's exchange completes before the next plan.
	inflight int64
}

type taskKey struct {
	step       int64
	slot, part int
}

type event struct {
	at     int64
	kind   int // 0 arrival, 1 completion
	worker int
	step   int64
	tasks  []Task
	seq    int64
}

type eventHeap []event

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].seq < h[j].seq
}
func (h eventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(event)) }
func (h *eventHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

func (s *simRank) push(e event) {
	s.seq++
	e.seq = s.seq
	heap.Push(&s.events, e)
}

// dispatch starts tasks on idle workers at the current time.
func (s *simRank) dispatch() {
	for w := range s.workers {
		if s.workers[w] > s.now || s.running[w] != nil {
			continue
		}
		t, ok := s.sched.Next(w)
		if !ok {
			continue
		}
		dur := s.costs[taskKey{t.Step, t.Slot, t.Part}] * s.speed / plan.One
		st := &simTask{Task: t, trueCost: dur}
		s.running[w] = st
		s.workers[w] = s.now + dur
		s.push(event{at: s.now + dur, kind: 1, worker: w})
	}
}

// step processes the next event; false when there is none.
func (s *simRank) step() bool {
	if len(s.events) == 0 {
		return false
	}
	e := heap.Pop(&s.events).(event)
	if e.at > s.now {
		s.now = e.at
	}
	switch e.kind {
	case 0:
		s.sched.Add(e.step, e.tasks)
		for _, t := range e.tasks {
			s.inflight -= t.Cost
		}
	case 1:
		t := s.running[e.worker]
		s.running[e.worker] = nil
		s.sched.Finish(e.worker, t.Task)
		s.left[t.Step]--
		if s.left[t.Step] == 0 {
			s.readyAt[t.Step] = s.now
		}
	}
	s.dispatch()
	return true
}

// advance processes every event up to time t and moves the clock to t.
func (s *simRank) advance(t int64) {
	for len(s.events) > 0 && s.events[0].at <= t {
		s.step()
	}
	if t > s.now {
		s.now = t
	}
	s.dispatch()
}

// readyTime runs the rank until batch step is decoded and returns when.
func (s *simRank) readyTime(step int64) (int64, error) {
	for {
		if at, ok := s.readyAt[step]; ok {
			return at, nil
		}
		if !s.step() {
			return 0, fmt.Errorf("spmd: simulation stalled: rank %d cannot finish batch %d", s.r, step)
		}
	}
}

// Simulate runs the job on the virtual clock and returns its metrics. It
// is deterministic: the same configuration gives the same result.
func Simulate(cfg SimConfig) (*SimResult, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	n, b := cfg.Ranks, cfg.Batch
	prior := cfg.GPU.StepTime(gpu.Contents{Samples: b, Frames: b * 8}) + time.Duration(cfg.AllreduceUS)*time.Microsecond
	ranks := make([]*simRank, n)
	for r := range ranks {
		speed := int64(plan.One)
		if cfg.Speed != nil {
			speed = cfg.Speed[r]
		}
		ranks[r] = &simRank{
			r: r, sched: cfg.Loader.NewScheduler(cfg.Workers, cfg.Prefetch, cfg.Budget), speed: speed,
			workers: make([]int64, cfg.Workers), running: make([]*simTask, cfg.Workers),
			left: map[int64]int{}, readyAt: map[int64]int64{}, costs: map[taskKey]int64{},
			tracker: gpu.NewTracker(prior), batches: map[int64][]SimSample{}, moved: map[int64][2]int64{},
		}
	}
	res := &SimResult{}
	splitAbove := SplitAbove(prior.Microseconds())
	var planner plan.Planner
	var pl plan.Plan
	planTimes := map[int64]int64{}

	// prepare plans (or not) batch s at virtual time at and schedules the
	// arrival of its tasks on every rank.
	prepare := func(s int64, at int64) error {
		own := make([][]SimSample, n)
		for r := range own {
			own[r] = cfg.Samples(s, r)
			if len(own[r]) != b {
				return fmt.Errorf("spmd: sample source gave rank %d %d samples for step %d, want %d", r, len(own[r]), s, b)
			}
		}
		for _, rk := range ranks {
			rk.advance(at)
		}
		batches := make([][]SimSample, n)
		orders := make([][]int, n)
		arrive := make([][]int64, n) // per rank per slot: when the sample's bytes are there
		if !cfg.Loader.Planned() {
			for r := range own {
				batches[r] = own[r]
				arrive[r] = make([]int64, b)
				if cfg.Loader == KindTorch {
					orders[r] = samplerOrder(b)
				} else {
					orders[r] = localOrder(simItems(own[r], r, false, cfg.Loader.Splits(), splitAbove, cfg.GPU))
				}
			}
		} else {
			in := &plan.Input{
				Params: plan.Params{Mode: cfg.Loader.PlanMode(), Seed: cfg.Seed, Margin: cfg.Margin},
				Step:   s, Batch: b, Ranks: make([]plan.Progress, n), Samples: make([]plan.Sample, 0, n*b),
			}
			oracle := cfg.Loader == KindOracle
			for r, rk := range ranks {
				waiting, running := rk.sched.Queued()
				waiting += rk.inflight
				deadline := rk.tracker.NeedAt(s, time.UnixMicro(0)).UnixMicro() - at
				st := RankState{DeadlineUS: deadline, Waiting: waiting, Running: running,
					Workers: cfg.Workers, Speed: rk.speed, Bandwidth: cfg.Bandwidth, LatencyUS: cfg.LatencyUS}
				in.Ranks[r] = st.Progress()
				for _, it := range simItems(own[r], r, oracle, cfg.Loader.Splits(), splitAbove, cfg.GPU) {
					in.Samples = append(in.Samples, plan.Sample{ID: it.ID, Owner: r, Bytes: it.Bytes, Cost: it.Est, Train: it.Train})
				}
			}
			var t0 time.Time
			if cfg.KeepPlanTimes {
				t0 = time.Now()
			}
			if err := planner.Compute(in, &pl); err != nil {
				return fmt.Errorf("spmd: plan step %d: %w", s, err)
			}
			if cfg.KeepPlanTimes {
				planTimes[s] = time.Since(t0).Microseconds()
			}
			if cfg.OnPlan != nil {
				cfg.OnPlan(s, at, in, &pl)
			}
			for r := range batches {
				ord := pl.DecodeOrder(r)
				batches[r] = make([]SimSample, b)
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
				if !oracle {
					delay = cfg.LatencyUS + mv.Bytes*plan.One/cfg.Bandwidth
				}
				src, dst := ranks[mv.Src].moved[s], ranks[mv.Dst].moved[s]
				ranks[mv.Src].moved[s] = [2]int64{src[0], src[1] + mv.Bytes}
				ranks[mv.Dst].moved[s] = [2]int64{dst[0] + mv.Bytes, dst[1]}
				for _, k := range mv.Samples {
					arrive[mv.Dst][slotOf[k]] = delay
				}
			}
		}
		for r, rk := range ranks {
			rk.batches[s] = batches[r]
			items := simItems(batches[r], r, cfg.Loader == KindOracle, cfg.Loader.Splits(), splitAbove, cfg.GPU)
			tasks := buildTasks(s, items, orders[r], cfg.Loader.Splits(), splitAbove)
			rk.left[s] = len(tasks)
			byArrival := map[int64][]Task{}
			for _, t := range tasks {
				x := batches[r][t.Slot]
				c := x.Cost
				if t.Parts > 1 {
					c = x.Parts[t.Part]
				}
				rk.costs[taskKey{t.Step, t.Slot, t.Part}] = c
				d := arrive[r][t.Slot]
				byArrival[d] = append(byArrival[d], t)
			}
			// Own samples arrive at once, moved ones after their message.
			for _, d := range sortedKeys(byArrival) {
				for _, t := range byArrival[d] {
					rk.inflight += t.Cost
				}
				rk.push(event{at: at + d, kind: 0, step: s, tasks: byArrival[d]})
			}
			rk.advance(at)
		}
		return nil
	}

	for s := int64(0); s < int64(min(cfg.Horizon, cfg.Steps)); s++ {
		if err := prepare(s, 0); err != nil {
			return nil, err
		}
	}
	request := int64(0)
	res.Records = make([]StepRecord, 0, n*cfg.Steps)
	for t := int64(0); t < int64(cfg.Steps); t++ {
		end := int64(0)
		lastDeliver := int64(0)
		for r, rk := range ranks {
			ready, err := rk.readyTime(t)
			if err != nil {
				return nil, err
			}
			deliver := max(request, ready)
			rk.advance(deliver)
			rk.sched.Release(t)
			rk.dispatch()
			rk.tracker.Requested(t, time.UnixMicro(request))
			rk.tracker.Delivered(t, time.UnixMicro(deliver))
			c := gpu.Contents{Samples: b}
			var hash uint64
			for _, x := range rk.batches[t] {
				c.Frames += x.Frames
				c.Tokens += x.Tokens
				hash += IDDigest(x.ID)
			}
			compute := cfg.GPU.StepTime(c).Microseconds()
			end = max(end, deliver+compute)
			lastDeliver = max(lastDeliver, deliver)
			mv := rk.moved[t]
			rec := StepRecord{Step: t, Rank: r, RequestUS: request, ReadyUS: ready, DeliverUS: deliver,
				WaitUS: deliver - request, ComputeUS: compute, Samples: b, BytesIn: mv[0], BytesOut: mv[1],
				PlanUS: planTimes[t], Hash: hash}
			rec.Miss = rec.WaitUS > ToleranceUS
			res.Records = append(res.Records, rec)
			delete(rk.batches, t)
			delete(rk.moved, t)
		}
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
	res.Summary = Summarize(cfg.Loader, res.Records, n, cfg.Steps, b, cfg.Workers, cfg.Horizon, res.WallUS)
	return res, nil
}

// simItems converts simulated samples to pipeline items, with estimated
// costs (or true ones for the oracle). A sample the rank will split —
// splittable, by a loader that splits, estimated above splitAbove, as
// the runtime decides — is planned at the cost of its parts, which is
// what splitting costs. Each item's GPU time is its frames and tokens
// under m.
func simItems(xs []SimSample, owner int, truth, split bool, splitAbove int64, m gpu.Model) []Item {
	items := make([]Item, len(xs))
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
		items[i] = Item{ID: x.ID, Owner: owner, Bytes: x.Bytes, Est: max(est, 1), Parts: parts, Mem: x.Mem,
			Train: trainTime(m, gpu.Contents{Samples: 1, Frames: x.Frames, Tokens: x.Tokens})}
	}
	return items
}

func sortedKeys(m map[int64][]Task) []int64 {
	keys := make([]int64, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
