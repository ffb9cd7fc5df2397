package communicator

import "sync"

// joinBufsKept bounds the buffers a joinBufs keeps for reuse: a rank has
// a message in flight to a few peers at a time.
const joinBufsKept = 8

// joinBufs is a small free list of the buffers IsendParts joins messages
// into, so that a run of joined sends reuses them as the loader once
// reused its send buffer, instead of allocating (and zeroing, and
// collecting) a buffer per message. A buffer comes back once WaitAll has
// completed its send.
type joinBufs struct {
	mu   sync.Mutex
	free [][]byte
}

// join returns the concatenation of parts in a kept buffer large enough,
// the smallest such, or in a new one.
func (j *joinBufs) join(parts [][]byte) []byte {
	total := 0
	for _, p := range parts {
		total += len(p)
	}
	var buf []byte
	j.mu.Lock()
	best := -1
	for i, b := range j.free {
		if cap(b) >= total && (best < 0 || cap(b) < cap(j.free[best])) {
			best = i
		}
	}
	if best >= 0 {
		buf = j.free[best][:0]
		j.free = append(j.free[:best], j.free[best+1:]...)
	}
	j.mu.Unlock()
	if buf == nil {
		buf = make([]byte, 0, total)
	}
	for _, p := range parts {
		buf = append(buf, p...)
	}
	return buf
}

// put keeps buf for a later join; when the list is full, the smallest
// buffer kept is dropped, or buf itself when it is smaller still.
func (j *joinBufs) put(buf []byte) {
	if cap(buf) == 0 {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if len(j.free) < joinBufsKept {
		j.free = append(j.free, buf)
		return
	}
	small := 0
	for i, b := range j.free {
		if cap(b) < cap(j.free[small]) {
			small = i
		}
	}
	if cap(buf) > cap(j.free[small]) {
		j.free[small] = buf
	}
}
