package wire

import (
	"math/bits"
	"slices"
)

// Pool keeps the buffers of received exchange messages for reuse. The
// samples unpacked from a message alias its buffer until each is decoded,
// so a buffer comes back only when the last of them is done (Buf). A
// fresh buffer per message cost more than the transfer on a node's shared
// memory: zeroing and first-touch page faults made one 150 KB sample take
// 62-100 µs to receive and unpack against 31 µs into a reused buffer
// (datahelix bench exchange). Only the loader's lock holder uses it.
type Pool struct {
	free  [][]byte // buffers not in use, by capacity ascending
	bytes int64    // their capacities' sum
	limit int64    // most bytes kept free; larger buffers are not kept
	// Hits and Misses count Get calls served from the pool and by a new
	// buffer.
	Hits, Misses int64
	poison       bool // fill the buffers given back with 0xAA
}

// PoolLimit bounds the bytes a loader's pool keeps free (a quarter of
// the compressed-bytes budget if that is less).
const PoolLimit = 64 << 20

// poolMaxFree bounds the buffers a pool keeps free, whatever their
// size (a run of text samples makes many small messages).
const poolMaxFree = 64

// NewPool returns a pool that keeps up to limit bytes of free buffers.
// With poison, it fills the buffers given back with 0xAA, so that a
// sample still aliasing one decodes to garbage: for tests.
func NewPool(limit int64, poison bool) *Pool { return &Pool{limit: max(limit, 0), poison: poison} }

// sizeClass rounds n up to a size class (at least a 4 KiB page): a
// multiple of an eighth of the power of two at or above n, so a buffer
// wastes under 1/4 of its bytes and buffers made for messages of similar
// sizes serve each other.
func sizeClass(n int64) int64 {
	if n <= 4096 {
		return 4096
	}
	step := int64(1) << (bits.Len64(uint64(n-1)) - 3)
	return (n + step - 1) / step * step
}

// Get returns a buffer of length n: the smallest free one that holds n
// and is at most twice n's class (a much larger one would hold memory
// the compressed-bytes budget does not count), else a new one. Its bytes
// are what an earlier message left: the receive overwrites exactly n
// bytes, and the exchange checks it did.
func (p *Pool) Get(n int64) []byte {
	i, _ := slices.BinarySearchFunc(p.free, n, func(b []byte, n int64) int {
		if int64(cap(b)) < n {
			return -1
		}
		return 1
	})
	if i < len(p.free) && int64(cap(p.free[i])) <= 2*sizeClass(n) {
		b := p.free[i]
		p.free = slices.Delete(p.free, i, i+1)
		p.bytes -= int64(cap(b))
		p.Hits++
		return b[:n]
	}
	p.Misses++
	return make([]byte, n, sizeClass(n))
}

// Put gives b back. When the pool then holds more than its limit or
// poolMaxFree buffers, it lets the smallest go: a large buffer is the
// costly one to make, and it serves smaller messages too.
func (p *Pool) Put(b []byte) {
	if p.poison {
		b = b[:cap(b)]
		for i := range b {
			b[i] = 0xAA
		}
	}
	c := int64(cap(b))
	if c == 0 || c > p.limit {
		return
	}
	i, _ := slices.BinarySearchFunc(p.free, c, func(f []byte, c int64) int {
		if int64(cap(f)) < c {
			return -1
		}
		return 1
	})
	p.free = slices.Insert(p.free, i, b[:0])
	p.bytes += c
	for p.bytes > p.limit || len(p.free) > poolMaxFree {
		p.bytes -= int64(cap(p.free[0]))
		p.free = slices.Delete(p.free, 0, 1)
	}
}

// Buf is one received message's buffer and how many of the samples
// unpacked from it are not yet done.
type Buf struct {
	data  []byte
	users int
}

// NewBuf returns the buffer of a message from which users samples were
// unpacked.
func NewBuf(data []byte, users int) *Buf { return &Buf{data: data, users: users} }

// Release marks one sample of the message done and gives the buffer back
// to p after the last.
func (r *Buf) Release(p *Pool) {
	r.users--
	if r.users == 0 {
		p.Put(r.data)
		r.data = nil
	}
}
