package plan

import "math/bits"

// rankHeap is a binary heap of ranks ordered by a shared key slice (the
// ranks' excess), with a position index so that a rank whose key changed
// can be fixed in O(log N). Ties are broken by rank number, so the order is
// total: top and firstK depend only on the keys.
//
// Each entry carries a copy of its rank's key, negated in a max-heap, so
// that a comparison reads one entry and no branch on the direction: fix
// and rekey refresh the copies from the shared slice.
type rankHeap struct {
	max  bool        // true: largest key on top
	key  []int64     // indexed by rank; owned by the planner
	h    []heapEntry // the heap
	pos  []int32     // pos[r] is r's index in h
	seen []int32     // scratch for firstK
}

// heapEntry is a rank in a rankHeap with its key, negated in a max-heap;
// keys stay far from math.MinInt64 (see Input.Validate's limits), so the
// negation is exact.
type heapEntry struct {
	key int64
	r   int32
}

// less reports whether entry a belongs above entry b.
func (a heapEntry) less(b heapEntry) bool { return a.below(b) != 0 }

// below is less as 1 or 0, without a branch: (key, rank) compared as one
// 96-bit number, the key's sign bit flipped to order it unsigned.
func (a heapEntry) below(b heapEntry) int {
	const sign = 1 << 63
	_, borrow := bits.Sub64(uint64(a.r), uint64(b.r), 0)
	_, borrow = bits.Sub64(uint64(a.key)^sign, uint64(b.key)^sign, borrow)
	return int(borrow)
}

// reset fills the heap with ranks 0..n-1 ordered by key.
func (q *rankHeap) reset(key []int64, max bool) {
	n := len(key)
	q.key, q.max = key, max
	q.h, q.pos = grow(q.h, n), grow(q.pos, n)
	for r := range n {
		q.h[r], q.pos[r] = heapEntry{q.keyOf(int32(r)), int32(r)}, int32(r)
	}
	for i := n/2 - 1; i >= 0; i-- {
		q.down(i)
	}
}

// keyOf is rank r's key as the entries hold it.
func (q *rankHeap) keyOf(r int32) int64 {
	if q.max {
		return -q.key[r]
	}
	return q.key[r]
}

// rekey refreshes every entry's key after a change to all keys that
// keeps their order, such as adding the same amount to each.
func (q *rankHeap) rekey() {
	for i := range q.h {
		q.h[i].key = q.keyOf(q.h[i].r)
	}
}

func (q *rankHeap) top() int32 { return q.h[0].r }

// fix restores the heap after rank r's key changed.
func (q *rankHeap) fix(r int32) {
	q.h[q.pos[r]].key = q.keyOf(r)
	q.sift(r)
}

// fixPair restores the heap after the keys of ranks s and t changed
// together: both copies are refreshed before either rank moves, then s
// moves and t. This is what two fix calls did when the entries read the
// shared keys, and the plans depend on it: while s moves, t's entry may
// be out of place, and t's move then repairs only t's own path, so the
// heap can be left out of order; top and firstK then see that order.
func (q *rankHeap) fixPair(s, t int32) {
	q.h[q.pos[s]].key = q.keyOf(s)
	q.h[q.pos[t]].key = q.keyOf(t)
	q.sift(s)
	q.sift(t)
}

// sift moves rank r up or down to its place.
func (q *rankHeap) sift(r int32) {
	i := int(q.pos[r])
	if !q.up(i) {
		q.down(i)
	}
}

// up moves the entry at i up to its place and reports whether it moved.
func (q *rankHeap) up(i int) bool {
	e := q.h[i]
	start := i
	for i > 0 {
		p := (i - 1) / 2
		if !e.less(q.h[p]) {
			break
		}
		q.h[i] = q.h[p]
		q.pos[q.h[i].r] = int32(i)
		i = p
	}
	q.h[i] = e
	q.pos[e.r] = int32(i)
	return i != start
}

// down moves the entry at i down to its place.
func (q *rankHeap) down(i int) {
	h := q.h
	n := len(h)
	e := h[i]
	for {
		c := 2*i + 1
		if c >= n {
			break
		}
		if c+1 < n {
			c += h[c+1].below(h[c])
		}
		if !h[c].less(e) {
			break
		}
		h[i] = h[c]
		q.pos[h[i].r] = int32(i)
		i = c
	}
	h[i] = e
	q.pos[e.r] = int32(i)
}

// firstK appends to dst the k ranks that come first in heap order, best
// first, without modifying the heap: a best-first walk of the tree whose
// frontier, front[head:], never exceeds k+1 nodes.
func (q *rankHeap) firstK(k int, dst []int32) []int32 {
	front := q.seen[:0] // heap indices; front[head:] sorted best-first
	if len(q.h) > 0 {
		front = append(front, 0)
	}
	head := 0
	for want := len(dst) + k; len(dst) < want && head < len(front); {
		i := front[head]
		head++
		dst = append(dst, q.h[i].r)
		for c := 2*i + 1; c <= 2*i+2 && int(c) < len(q.h); c++ {
			// insert heap index c into front, keeping best-first order
			e := q.h[c]
			j := len(front)
			front = append(front, c)
			for j > head && e.less(q.h[front[j-1]]) {
				front[j] = front[j-1]
				j--
			}
			front[j] = c
		}
	}
	q.seen = front
	return dst
}

// grow returns s with length n, reusing its array when it is large enough.
// The contents are unspecified.
func grow[T any](s []T, n int) []T {
	if cap(s) >= n {
		return s[:n]
	}
	return make([]T, n)
}
