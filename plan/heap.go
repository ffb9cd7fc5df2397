package plan

// rankHeap is a binary heap of ranks ordered by a shared key slice (the
// ranks' excess), with a position index so that a rank whose key changed
// can be fixed in O(log N). Ties are broken by rank number, so the order is
// total and the heap's shape depends only on the keys.
type rankHeap struct {
	max  bool    // true: largest key on top
	key  []int64 // indexed by rank; owned by the planner
	h    []int32 // heap of ranks
	pos  []int32 // pos[r] is r's index in h
	seen []int32 // scratch for smallest
}

// reset fills the heap with ranks 0..n-1 ordered by key.
func (q *rankHeap) reset(key []int64, max bool) {
	n := len(key)
	q.key, q.max = key, max
	q.h, q.pos = grow(q.h, n), grow(q.pos, n)
	for r := range n {
		q.h[r], q.pos[r] = int32(r), int32(r)
	}
	for i := n/2 - 1; i >= 0; i-- {
		q.down(i)
	}
}

// before reports whether rank a belongs above rank b.
func (q *rankHeap) before(a, b int32) bool {
	ka, kb := q.key[a], q.key[b]
	if ka != kb {
		return (ka > kb) == q.max
	}
	return a < b
}

func (q *rankHeap) top() int32 { return q.h[0] }

// fix restores the heap after rank r's key changed.
func (q *rankHeap) fix(r int32) {
	i := int(q.pos[r])
	if !q.up(i) {
		q.down(i)
	}
}

func (q *rankHeap) up(i int) bool {
	moved := false
	for i > 0 {
		p := (i - 1) / 2
		if !q.before(q.h[i], q.h[p]) {
			break
		}
		q.swap(i, p)
		i, moved = p, true
	}
	return moved
}

func (q *rankHeap) down(i int) {
	n := len(q.h)
	for {
		c := 2*i + 1
		if c >= n {
			return
		}
		if c+1 < n && q.before(q.h[c+1], q.h[c]) {
			c++
		}
		if !q.before(q.h[c], q.h[i]) {
			return
		}
		q.swap(i, c)
		i = c
	}
}

func (q *rankHeap) swap(i, j int) {
	q.h[i], q.h[j] = q.h[j], q.h[i]
	q.pos[q.h[i]], q.pos[q.h[j]] = int32(i), int32(j)
}

// firstK appends to dst the k ranks that come first in heap order, best
// first, without modifying the heap: a best-first walk of the tree whose
// frontier never exceeds k+1 nodes.
func (q *rankHeap) firstK(k int, dst []int32) []int32 {
	front := q.seen[:0] // heap indices, kept sorted best-first
	if len(q.h) > 0 {
		front = append(front, 0)
	}
	for want := len(dst) + k; len(dst) < want && len(front) > 0; {
		i := front[0]
		copy(front, front[1:])
		front = front[:len(front)-1]
		dst = append(dst, q.h[i])
		for c := 2*i + 1; c <= 2*i+2 && int(c) < len(q.h); c++ {
			// insert heap index c into front, keeping best-first order
			j := len(front)
			front = append(front, c)
			for j > 0 && q.before(q.h[c], q.h[front[j-1]]) {
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
