package sim

import "github.com/datahelix/datahelix/internal/step"

type event struct {
	at      int64
	kind    int // 0 arrival, 1 completion
	rank    int
	worker  int
	step    int64
	tasks   []step.Task
	task    *simTask // completion: the task, live while its version matches
	version int64
	seq     int64
}

// evRef orders an event in the queue; the event itself waits in the
// engine's slab, so that the heap moves 24 bytes, not the event.
type evRef struct {
	at, seq int64
	slot    int32
}

func (a evRef) before(b evRef) bool { return a.at < b.at || a.at == b.at && a.seq < b.seq }

// eventQueue is a min-heap of events by time, then by push order.
type eventQueue struct {
	heap []evRef
	slab []event
	free []int32
}

func (q *eventQueue) len() int { return len(q.heap) }

func (q *eventQueue) push(ev event) {
	var slot int32
	if n := len(q.free); n > 0 {
		slot, q.free = q.free[n-1], q.free[:n-1]
		q.slab[slot] = ev
	} else {
		slot = int32(len(q.slab))
		q.slab = append(q.slab, ev)
	}
	q.heap = append(q.heap, evRef{at: ev.at, seq: ev.seq, slot: slot})
	for i := len(q.heap) - 1; i > 0; {
		p := (i - 1) / 2
		if !q.heap[i].before(q.heap[p]) {
			break
		}
		q.heap[i], q.heap[p] = q.heap[p], q.heap[i]
		i = p
	}
}

// top is the earliest event; the queue must not be empty.
func (q *eventQueue) top() *event { return &q.slab[q.heap[0].slot] }

// pop removes and returns the earliest event.
func (q *eventQueue) pop() event {
	h := q.heap
	slot := h[0].slot
	ev := q.slab[slot]
	q.slab[slot] = event{}
	q.free = append(q.free, slot)
	n := len(h) - 1
	h[0] = h[n]
	h = h[:n]
	for i := 0; ; {
		l, m := 2*i+1, i
		if l < n && h[l].before(h[m]) {
			m = l
		}
		if r := l + 1; r < n && h[r].before(h[m]) {
			m = r
		}
		if m == i {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	q.heap = h
	return ev
}
