package step

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
	started  map[int64][]bool // per step, the slots with a part started, not yet released
	memOf    map[int64]int64  // decoded bytes charged per step
	released int64            // steps below this are released
	begun    bool             // a batch was added: released is at least its step
	waiting  int64
	running  int64
}

// NewEDF returns an earliest-deadline-first scheduler with a budget of
// decoded bytes (<= 0: unlimited).
func NewEDF(budget int64) *EDF {
	return &EDF{budget: budget, started: map[int64][]bool{}, memOf: map[int64]int64{}}
}

// Add queues the batch's tasks. The first batch added is the earliest
// undelivered one (a resumed run starts past 0), so the budget cannot hold
// it back.
func (e *EDF) Add(step int64, tasks []Task) {
	if !e.begun {
		e.begun, e.released = true, max(e.released, step)
	}
	for _, t := range tasks {
		e.q.push(t)
		e.waiting += t.Cost
	}
}

// Next pops the earliest task if the memory budget allows it.
func (e *EDF) Next(w int) (Task, bool) {
	if len(e.q) == 0 {
		return Task{}, false
	}
	t := e.q[0]
	slots := e.started[t.Step]
	first := t.Slot >= len(slots) || !slots[t.Slot]
	if first && e.budget > 0 && t.Step > e.released && e.inUse+t.Mem > e.budget {
		return Task{}, false
	}
	e.q.pop()
	if first {
		if t.Slot >= len(slots) {
			slots = append(slots, make([]bool, t.Slot+1-len(slots))...)
			e.started[t.Step] = slots
		}
		slots[t.Slot] = true
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
	for s := range e.started {
		if s <= step {
			delete(e.started, s)
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
// since (step, order) names one sample of the rank. It is a binary
// min-heap on a slice of tasks, without container/heap's interface
// boxing: a simulation of thousands of ranks spends much of its time
// here.
type taskHeap []Task

// less is the heap's order.
func (h taskHeap) less(i, j int) bool {
	a, b := &h[i], &h[j]
	if a.Step != b.Step {
		return a.Step < b.Step
	}
	if a.Order != b.Order {
		return a.Order < b.Order
	}
	return a.Part < b.Part
}

// push adds t.
func (h *taskHeap) push(t Task) {
	*h = append(*h, t)
	q := *h
	for i := len(q) - 1; i > 0; {
		p := (i - 1) / 2
		if !q.less(i, p) {
			break
		}
		q[i], q[p] = q[p], q[i]
		i = p
	}
}

// pop removes the least task (h[0]); h must not be empty.
func (h *taskHeap) pop() {
	q := *h
	n := len(q) - 1
	q[0] = q[n]
	q = q[:n]
	for i := 0; ; {
		l, m := 2*i+1, i
		if l < n && q.less(l, m) {
			m = l
		}
		if r := l + 1; r < n && q.less(r, m) {
			m = r
		}
		if m == i {
			break
		}
		q[i], q[m] = q[m], q[i]
		i = m
	}
	*h = q
}
