package step

import "container/heap"

// EDF is the decode policy of the local, static and helix loaders: every
// worker of the rank takes the runnable task due earliest — the lowest
// step, then the plan's decode order, then the part — as soon as it is
// idle, within a budget of decoded bytes held by batches not yet
// delivered. The earliest undelivered batch may always start, so the
// budget can slow decoding down but never stop it.
type EDF struct {
	budget   int64 // decoded bytes allowed in flight; <= 0 means unlimited
	inUse    int64
	q        taskHeap
	started  map[sampleKey]bool // samples with a part started, not yet released
	memOf    map[int64]int64    // decoded bytes charged per step
	released int64              // steps below this are released
	begun    bool               // a batch was added: released is at least its step
	waiting  int64
	running  int64
}

type sampleKey struct {
	step int64
	slot int
}

// NewEDF returns an earliest-deadline-first scheduler with a budget of
// decoded bytes (<= 0: unlimited).
func NewEDF(budget int64) *EDF {
	return &EDF{budget: budget, started: map[sampleKey]bool{}, memOf: map[int64]int64{}}
}

// Add queues the batch's tasks. The first batch added is the earliest
// undelivered one (a resumed run starts past 0), so the budget cannot hold
// it back.
func (e *EDF) Add(step int64, tasks []Task) {
	if !e.begun {
		e.begun, e.released = true, max(e.released, step)
	}
	for _, t := range tasks {
		heap.Push(&e.q, t)
		e.waiting += t.Cost
	}
}

// Next pops the earliest task if the memory budget allows it.
func (e *EDF) Next(w int) (Task, bool) {
	if len(e.q) == 0 {
		return Task{}, false
	}
	t := e.q[0]
	k := sampleKey{t.Step, t.Slot}
	first := !e.started[k]
	if first && e.budget > 0 && t.Step > e.released && e.inUse+t.Mem > e.budget {
		return Task{}, false
	}
	heap.Pop(&e.q)
	if first {
		e.started[k] = true
		e.inUse += t.Mem
		e.memOf[t.Step] += t.Mem
	}
	e.waiting -= t.Cost
	e.running += t.Cost
	return t, true
}

// Finish accounts a completed task.
func (e *EDF) Finish(w int, t Task) { e.running -= t.Cost }

// Release frees the memory of batch step (and of any earlier batch).
func (e *EDF) Release(step int64) {
	for s := e.released; s <= step; s++ {
		e.inUse -= e.memOf[s]
		delete(e.memOf, s)
	}
	for k := range e.started {
		if k.step <= step {
			delete(e.started, k)
		}
	}
	if step+1 > e.released {
		e.released = step + 1
	}
}

// Queued returns the estimated cost waiting and running.
func (e *EDF) Queued() (waiting, running int64) { return e.waiting, e.running }

// InUse returns the decoded bytes currently charged against the budget.
func (e *EDF) InUse() int64 { return e.inUse }

// taskHeap orders tasks by step, decode order, then part: a total order,
// since (step, order) names one sample of the rank.
type taskHeap []Task

func (h taskHeap) Len() int { return len(h) }
func (h taskHeap) Less(i, j int) bool {
	a, b := h[i], h[j]
	if a.Step != b.Step {
		return a.Step < b.Step
	}
	if a.Order != b.Order {
		return a.Order < b.Order
	}
	return a.Part < b.Part
}
func (h taskHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *taskHeap) Push(x any)   { *h = append(*h, x.(Task)) }
func (h *taskHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	*h = old[:len(old)-1]
	return t
}
