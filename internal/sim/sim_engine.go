package sim

import (
	"slices"

	"github.com/datahelix/datahelix/gpu"
	"github.com/datahelix/datahelix/internal/step"
	"github.com/datahelix/datahelix/plan"
)

// simTask is a task running on a simulated worker.
type simTask struct {
	step.Task
	startup      bool // start-up work, no decode task
	rank, worker int
	start, dur   int64 // when it started; µs it takes on a core of its own
	// rem is the work left, in µs at a whole core's speed times
	// workScale, brought up to date when its core group's sharing
	// changes (shared groups only).
	rem int64
	// version tells a task's live completion event from the ones a
	// change of sharing made stale.
	version int64
}

// simRank is one rank of the simulation: its workers and its batches in
// progress.
type simRank struct {
	r       int
	sched   step.Scheduler
	speed   int64
	group   *cpuGroup
	running []*simTask // per worker; nil when idle
	// per step: tasks left to decode, when the batch was ready (-1 until
	// it is), the rank's batch (after planning), bytes in, out and out to
	// other nodes
	left    []int
	readyAt []int64
	batches [][]Sample
	moved   [][3]int64
	tracker *gpu.Tracker
	// inflight is the estimated cost of tasks planned for this rank whose
	// samples are still on their way: part of its backlog, as in the
	// runtime, where a batch's exchange completes before the next plan.
	inflight int64
	// contention is the smoothed wall time of the rank's tasks over
	// their time on a core of their own, fixed-point, learnt as the
	// runtime learns its wall time over CPU time: what sharing cores
	// costs it (plan.One when its workers have cores of their own).
	contention int64
	work       int64 // own-core µs of the tasks it finished
	workAt     int64 // work at its last delivery
	decode     int64 // the decode tasks' part of work
	decodeAt   int64 // decode at its last delivery
	// debt is CPU µs of the loader's own work (planning, the exchange's
	// copies; Config.Overheads) not yet charged: the next task a worker
	// starts takes that much longer, as the cores it shares were busy.
	debt int64
	// q and now are the rank's own events and clock when the engine is
	// local (simEngine.local).
	q   eventQueue
	now int64
}

// simEngine is the job's one virtual clock: every rank's task arrivals
// and completions in a single time order, so that ranks sharing cores
// see each other's load.
type simEngine struct {
	now    int64
	seq    int64 // tie-break: first pushed, first processed
	events eventQueue
	ranks  []*simRank
	// readied are the ranks a batch became ready on since the step loop
	// last looked.
	readied []int
	// shared tells whether any group shares its cores: only then can a
	// completion event go stale.
	shared bool
	// others are other processes' threads on the groups' cores (nil
	// without).
	others *otherThreads
	// local tells that no rank's events touch another's (no shared
	// cores, no other threads): each rank then keeps its own queue and
	// clock (simRank.q, simRank.now), processed a rank at a time, which
	// keeps one rank's state in cache instead of visiting every rank's
	// in time order. The results are the same: a rank's events come in
	// the same order either way, and only the planner reads every rank,
	// after advance has brought them all to its time.
	local bool
}

// stale tells a completion event that a change of sharing replaced.
func (e *simEngine) stale(ev *event) bool {
	if !e.shared || ev.kind != 1 {
		return false
	}
	return e.ranks[ev.rank].running[ev.worker] != ev.task || ev.task.version != ev.version
}

func (e *simEngine) push(ev event) {
	e.seq++
	ev.seq = e.seq
	if e.local {
		e.ranks[ev.rank].q.push(ev)
		return
	}
	e.events.push(ev)
}

// touch brings g up to the engine's clock before its running tasks
// change: with other threads moving between the cores, every group.
func (e *simEngine) touch(g *cpuGroup) {
	if e.others == nil {
		g.update(e.now)
		return
	}
	for _, h := range e.others.groups {
		h.update(e.now)
	}
	e.others.update(e.now)
}

// reshare sets g's rate after its running tasks changed and reschedules
// their completions: with other threads moving between the cores, every
// group's.
func (e *simEngine) reshare(g *cpuGroup) {
	if e.others == nil {
		g.share()
		e.retime(g)
		return
	}
	o := e.others
	o.before = o.before[:0]
	for _, h := range o.groups {
		o.before = append(o.before, [2]int64{h.num, h.den})
	}
	o.share()
	for i, h := range o.groups {
		// Only g's tasks and those of groups whose rate changed need new
		// completion times.
		if was := o.before[i]; h == g || h.num*was[1] != was[0]*h.den {
			e.retime(h)
		}
	}
}

// retime schedules the completion of each of the group's running tasks
// at the group's current sharing, making earlier schedules stale.
func (e *simEngine) retime(g *cpuGroup) {
	for _, t := range g.running {
		t.version++
		d := mulDivUp(t.rem, g.den, workScale*g.num)
		e.push(event{at: e.now + d, kind: 1, rank: t.rank, worker: t.worker, task: t, version: t.version})
	}
}

// dispatch starts tasks on the rank's idle workers at the current time.
func (e *simEngine) dispatch(s *simRank) { e.dispatchAfter(s, false) }

// dispatchAfter is dispatch after a change to the rank's running tasks
// (finished: one of them just finished): a shared group's tasks are
// rescheduled once, whether or not a task starts.
func (e *simEngine) dispatchAfter(s *simRank, finished bool) {
	g := s.group
	if g.shared {
		e.touch(g)
	}
	started := false
	for w := range s.running {
		if s.running[w] != nil {
			continue
		}
		t, ok := s.sched.Next(w)
		if !ok {
			continue
		}
		x := &s.batches[t.Step][t.Slot]
		c := x.Cost
		if t.Parts > 1 {
			c = x.Parts[t.Part]
		}
		dur := c*s.speed/plan.One + s.debt
		s.debt = 0
		e.start(s, &simTask{Task: t, rank: s.r, worker: w, start: e.now, dur: dur})
		started = true
	}
	if g.shared && (started || finished) {
		e.reshare(g)
	}
}

// start puts t on its worker of s: on a core of its own its completion is
// known now; in a shared group it joins the group's running tasks, and
// the caller reschedules the group once it has started them all.
func (e *simEngine) start(s *simRank, t *simTask) {
	s.running[t.worker] = t
	if g := s.group; g.shared {
		t.rem = t.dur * workScale
		g.running = append(g.running, t)
		return
	}
	e.push(event{at: e.now + t.dur, kind: 1, rank: s.r, worker: t.worker, task: t})
}

// startup occupies every worker of s with an equal share of work µs of
// start-up work, at the current time.
func (e *simEngine) startup(s *simRank, work int64) {
	g := s.group
	if g.shared {
		e.touch(g)
	}
	for w := range s.running {
		e.start(s, &simTask{startup: true, rank: s.r, worker: w, start: e.now, dur: work / int64(len(s.running))})
	}
	if g.shared {
		e.reshare(g)
	}
}

// next processes the next event; false when there is none.
func (e *simEngine) next() bool {
	for e.events.len() > 0 {
		ev := e.events.pop()
		if e.stale(&ev) {
			continue
		}
		e.process(e.ranks[ev.rank], &ev)
		return true
	}
	return false
}

// nextRank processes s's next event on a local engine, at s's clock;
// false when s has none.
func (e *simEngine) nextRank(s *simRank) bool {
	if s.q.len() == 0 {
		return false
	}
	ev := s.q.pop()
	e.now = s.now
	e.process(s, &ev)
	s.now = e.now
	return true
}

// advanceRank processes s's events up to time t on a local engine and
// moves its clock to t.
func (e *simEngine) advanceRank(s *simRank, t int64) {
	e.now = s.now
	for s.q.len() > 0 && s.q.heap[0].at <= t {
		ev := s.q.pop()
		e.process(s, &ev)
	}
	s.now = max(e.now, t)
	e.now = s.now
}

// process runs event ev of rank s.
func (e *simEngine) process(s *simRank, ev *event) {
	if ev.at > e.now {
		e.now = ev.at
	}
	switch ev.kind {
	case 0:
		s.sched.Add(ev.step, ev.tasks)
		for _, t := range ev.tasks {
			s.inflight -= t.Cost
		}
	case 1:
		t := ev.task
		s.running[ev.worker] = nil
		if g := s.group; g.shared {
			e.touch(g)
			g.running = slices.DeleteFunc(g.running, func(x *simTask) bool { return x == t })
		}
		s.work += t.dur
		if t.dur > 0 {
			obs := (e.now - t.start) * plan.One / t.dur
			s.contention = min(max((7*s.contention+obs)/8, plan.One), 64*plan.One)
		}
		if t.startup {
			break
		}
		s.decode += t.dur
		s.sched.Finish(ev.worker, t.Task)
		s.left[t.Step]--
		if s.left[t.Step] == 0 {
			s.readyAt[t.Step] = e.now
			if !e.local {
				e.readied = append(e.readied, s.r)
			}
		}
	}
	e.dispatchAfter(s, ev.kind == 1)
}

// peek is the time of the next live event, false when there is none.
func (e *simEngine) peek() (int64, bool) {
	for e.events.len() > 0 {
		if e.stale(e.events.top()) {
			e.events.pop()
			continue
		}
		return e.events.heap[0].at, true
	}
	return 0, false
}

// advance processes every event up to time t and moves the clock to t.
func (e *simEngine) advance(t int64) {
	if e.local {
		for _, s := range e.ranks {
			e.advanceRank(s, t)
		}
		e.now = t
		return
	}
	for {
		at, ok := e.peek()
		if !ok || at > t {
			break
		}
		e.next()
	}
	if t > e.now {
		e.now = t
	}
}
