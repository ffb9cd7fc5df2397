package communicator

import (
	"bytes"
	"fmt"
	"os"
	"sync"
)

// local is an in-process communicator: every rank is a goroutine of the
// same process, and operations have the same semantics as on World.
// NewLocal and RunLocal create them; each belongs to one goroutine (or
// several, as with World).
type local struct {
	w    *localWorld
	rank int
}

var _ Comm = (*local)(nil)

// localOption configures newLocal.
type localOption func(*localWorld)

// withAbortHook replaces what Abort does after failing every operation:
// by default it prints the message on standard error and exits the process
// with the code, as MPI_Abort ends an MPI job. Tests install a hook that
// records the call instead.
func withAbortHook(hook func(rank, code int, msg string)) localOption {
	return func(w *localWorld) { w.onAbort = hook }
}

// NewLocal returns the n ranks of a new in-process world, indexed by
// rank: an in-process communicator whose ranks are goroutines of this
// process, with the same semantics as World. Its Abort fails every
// pending and later operation of every rank with ErrAborted, then prints
// the message and exits the process with the code, as MPI_Abort ends a
// job; RunLocal's ranks abort without exiting.
func NewLocal(n int) []Comm {
	ranks := newLocal(n)
	comms := make([]Comm, n)
	for i, c := range ranks {
		comms[i] = c
	}
	return comms
}

// newLocal is NewLocal with options, returning the ranks' own type.
func newLocal(n int, opts ...localOption) []*local {
	if n < 1 {
		panic(fmt.Sprintf("collective: NewLocal(%d): need at least one rank", n))
	}
	w := newLocalWorld(n)
	for _, o := range opts {
		o(w)
	}
	ranks := make([]*local, n)
	for i := range ranks {
		ranks[i] = &local{w: w, rank: i}
	}
	return ranks
}

// localFamily is a world with its duplicates, as MPI_COMM_WORLD and its
// duplicates belong to one job: aborting any of them aborts every one.
type localFamily struct {
	mu      sync.Mutex
	members []*localWorld
}

func newLocalWorld(n int) *localWorld {
	w := &localWorld{
		n:     n,
		seq:   make([]uint64, n),
		slots: map[uint64]*collSlot{},
		boxes: map[mailKey]*mailbox{},
		onAbort: func(rank, code int, msg string) {
			fmt.Fprintf(os.Stderr, "datahelix: rank %d aborted the job: %s\n", rank, msg)
			os.Exit(code)
		},
	}
	w.cond = sync.NewCond(&w.mu)
	w.fam = &localFamily{members: []*localWorld{w}}
	return w
}

// Dup returns the rank's handle on a new world of the same size. Rank 0
// creates it and the collective hands it to the others. The new world
// belongs to the same job: an abort of any of them fails every
// operation of all of them.
func (c *local) Dup() (Comm, error) {
	var nw *localWorld
	if c.rank == 0 {
		nw = newLocalWorld(c.w.n)
		nw.onAbort = c.w.onAbort
		fam := c.w.fam
		fam.mu.Lock()
		nw.fam = fam
		fam.members = append(fam.members, nw)
		fam.mu.Unlock()
	}
	parts, err := c.collective("dup", nw)
	if err != nil {
		return nil, err
	}
	return &local{w: parts[0].(*localWorld), rank: c.rank}, nil
}

type localWorld struct {
	fam     *localFamily // the world and its duplicates: an abort ends them all
	n       int
	mu      sync.Mutex
	cond    *sync.Cond
	aborted error // set once by Abort; every later wait fails with it

	seq   []uint64             // per rank: collectives entered so far
	slots map[uint64]*collSlot // collective in progress, by sequence number
	boxes map[mailKey]*mailbox // point-to-point queues

	onAbort func(rank, code int, msg string)
}

// collSlot is one collective operation in progress: the ranks' inputs, then
// the ranks leaving with their results.
type collSlot struct {
	kind    string
	parts   []any // per rank input
	arrived int
	left    int
}

type mailKey struct{ src, dst, tag int }

// mailbox holds, for one (src, dst, tag), the messages sent but not yet
// received and the receives posted but not yet matched. MPI's
// non-overtaking rule makes both FIFO.
type mailbox struct {
	msgs [][]byte
	recv []*Request
}

type localReq struct {
	buf []byte
}

// Rank returns this rank's index.
func (c *local) Rank() int { return c.rank }

// Size returns the number of ranks.
func (c *local) Size() int { return c.w.n }

// Info describes the in-process rank: every rank shares one node.
func (c *local) Info() Info {
	host, _ := os.Hostname()
	return Info{LocalRank: c.rank, LocalSize: c.w.n, Host: host, Library: "in-process", ThreadMultiple: true}
}

// collective enters the next collective with this rank's input, waits for
// every rank and returns all inputs indexed by rank. The caller must not
// modify the returned inputs. kind names the operation so that ranks
// calling different collectives get an error instead of garbage.
func (c *local) collective(kind string, in any) ([]any, error) {
	w := c.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.aborted != nil {
		return nil, w.aborted
	}
	seq := w.seq[c.rank]
	w.seq[c.rank]++
	s := w.slots[seq]
	if s == nil {
		s = &collSlot{kind: kind, parts: make([]any, w.n)}
		w.slots[seq] = s
	}
	if s.kind != kind {
		// Poison the slot so every rank of this collective fails.
		s.kind = "mismatch"
	}
	s.parts[c.rank] = in
	s.arrived++
	if s.arrived == w.n {
		w.cond.Broadcast()
	}
	for s.arrived < w.n && w.aborted == nil {
		w.cond.Wait()
	}
	if w.aborted != nil {
		return nil, w.aborted
	}
	s.left++
	if s.left == w.n {
		delete(w.slots, seq)
	}
	if s.kind == "mismatch" {
		return nil, fmt.Errorf("collective: ranks called different collectives (%s on rank %d) at collective #%d", kind, c.rank, seq)
	}
	return s.parts, nil
}

// Allgather gathers equal-size blocks.
func (c *local) Allgather(send, recv []byte) error {
	if len(recv) != c.w.n*len(send) {
		// Still enter the collective so the other ranks are not left waiting.
		_, _ = c.collective("allgather", -1)
		return fmt.Errorf("%w: allgather of %d-byte blocks over %d ranks needs a %d-byte receive buffer, got %d",
			ErrSize, len(send), c.w.n, c.w.n*len(send), len(recv))
	}
	parts, err := c.collective("allgather", send)
	if err != nil {
		return err
	}
	for r, p := range parts {
		b, ok := p.([]byte)
		if !ok || len(b) != len(send) {
			return fmt.Errorf("%w: allgather block of rank %d differs from this rank's %d bytes", ErrSize, r, len(send))
		}
		copy(recv[r*len(send):], b)
	}
	return nil
}

// AllgatherVar gathers variable-size blocks.
func (c *local) AllgatherVar(send []byte) ([][]byte, error) {
	parts, err := c.collective("allgatherv", send)
	if err != nil {
		return nil, err
	}
	total := 0
	for _, p := range parts {
		total += len(p.([]byte))
	}
	buf := make([]byte, total)
	out := make([][]byte, len(parts))
	off := 0
	for r, p := range parts {
		n := copy(buf[off:], p.([]byte))
		out[r] = buf[off : off+n : off+n]
		off += n
	}
	return out, nil
}

// AllreduceInt64 reduces buf element-wise across ranks.
func (c *local) AllreduceInt64(buf []int64, op Op) error {
	if op != OpSum && op != OpMin && op != OpMax {
		_, _ = c.collective("allreduce", nil)
		return fmt.Errorf("collective: allreduce: unknown operator %v", op)
	}
	in := append([]int64(nil), buf...)
	parts, err := c.collective("allreduce", in)
	if err != nil {
		return err
	}
	for r, p := range parts {
		v, ok := p.([]int64)
		if !ok || len(v) != len(buf) {
			return fmt.Errorf("%w: allreduce of %d values, rank %d passed another length", ErrSize, len(buf), r)
		}
	}
	for i := range buf {
		acc := parts[0].([]int64)[i]
		for _, p := range parts[1:] {
			v := p.([]int64)[i]
			switch op {
			case OpSum:
				acc += v
			case OpMin:
				acc = min(acc, v)
			case OpMax:
				acc = max(acc, v)
			}
		}
		buf[i] = acc
	}
	return nil
}

// Bcast copies root's buf to every rank.
func (c *local) Bcast(buf []byte, root int) error {
	if root < 0 || root >= c.w.n {
		_, _ = c.collective("bcast", nil)
		return fmt.Errorf("%w: bcast root %d not in [0,%d)", ErrRank, root, c.w.n)
	}
	in := buf
	if c.rank == root {
		in = append([]byte(nil), buf...)
	}
	parts, err := c.collective("bcast", in)
	if err != nil {
		return err
	}
	src, ok := parts[root].([]byte)
	if !ok || len(src) != len(buf) {
		return fmt.Errorf("%w: bcast of %d bytes, root %d passed another length", ErrSize, len(buf), root)
	}
	if c.rank != root {
		copy(buf, src)
	}
	return nil
}

// Barrier waits for every rank.
func (c *local) Barrier() error {
	_, err := c.collective("barrier", nil)
	return err
}

// Isend starts a send. The data is copied at once, which MPI allows.
func (c *local) Isend(buf []byte, dest, tag int) (*Request, error) {
	return c.send(append([]byte(nil), buf...), dest, tag)
}

// IsendParts sends the concatenation of parts as one message: the in-process world
// copies at once anyway, into one new buffer.
func (c *local) IsendParts(parts [][]byte, dest, tag int) (*Request, error) {
	return c.send(bytes.Join(parts, nil), dest, tag)
}

// send delivers msg, which it takes over, or queues it for the receiver.
func (c *local) send(msg []byte, dest, tag int) (*Request, error) {
	if dest < 0 || dest >= c.w.n {
		return nil, fmt.Errorf("%w: send to rank %d not in [0,%d)", ErrRank, dest, c.w.n)
	}
	w := c.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.aborted != nil {
		return nil, w.aborted
	}
	k := mailKey{c.rank, dest, tag}
	box := w.box(k)
	if len(box.recv) > 0 {
		r := box.recv[0]
		box.recv[0] = nil // nor its buffer, once delivered
		box.recv = box.recv[1:]
		w.tidy(k, box)
		deliver(r, msg)
		w.cond.Broadcast()
	} else {
		box.msgs = append(box.msgs, msg)
	}
	return &Request{done: true, n: len(msg)}, nil
}

// Irecv posts a receive.
func (c *local) Irecv(buf []byte, src, tag int) (*Request, error) {
	if src < 0 || src >= c.w.n {
		return nil, fmt.Errorf("%w: receive from rank %d not in [0,%d)", ErrRank, src, c.w.n)
	}
	w := c.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.aborted != nil {
		return nil, w.aborted
	}
	r := &Request{local: &localReq{buf: buf}}
	k := mailKey{src, c.rank, tag}
	box := w.box(k)
	if len(box.msgs) > 0 {
		msg := box.msgs[0]
		box.msgs[0] = nil // the queue's array must not keep it
		box.msgs = box.msgs[1:]
		w.tidy(k, box)
		deliver(r, msg)
	} else {
		box.recv = append(box.recv, r)
	}
	return r, nil
}

// deliver completes receive r with msg; the world lock is held.
func deliver(r *Request, msg []byte) {
	n := copy(r.local.buf, msg)
	r.n = n
	if len(msg) > len(r.local.buf) {
		r.err = fmt.Errorf("%w: %d-byte message into a %d-byte buffer", ErrTruncate, len(msg), len(r.local.buf))
	}
	r.done = true
}

// tidy removes the mailbox k once it holds neither messages nor
// receives: a job uses a new tag for every step, so that boxes kept would
// grow with the steps, each keeping the last message it queued.
func (w *localWorld) tidy(k mailKey, b *mailbox) {
	if len(b.msgs) == 0 && len(b.recv) == 0 {
		delete(w.boxes, k)
	}
}

// box returns the mailbox k, made when there is none; the world lock is
// held.
func (w *localWorld) box(k mailKey) *mailbox {
	b := w.boxes[k]
	if b == nil {
		b = &mailbox{}
		w.boxes[k] = b
	}
	return b
}

// WaitAll waits for every request.
func (c *local) WaitAll(reqs []*Request) error {
	w := c.w
	w.mu.Lock()
	defer w.mu.Unlock()
	var first error
	for _, r := range reqs {
		if r == nil {
			continue
		}
		for !r.done && w.aborted == nil {
			w.cond.Wait()
		}
		if !r.done {
			return w.aborted
		}
		if r.err != nil && first == nil {
			first = r.err
		}
	}
	return first
}

// Abort fails every pending and later operation on every rank and calls
// the abort hook.
func (c *local) Abort(code int, msg string) {
	err := fmt.Errorf("%w by rank %d (code %d): %s", ErrAborted, c.rank, code, msg)
	fam := c.w.fam
	fam.mu.Lock()
	members := append([]*localWorld(nil), fam.members...)
	fam.mu.Unlock()
	for _, w := range members {
		w.mu.Lock()
		if w.aborted == nil {
			w.aborted = err
		}
		w.cond.Broadcast()
		w.mu.Unlock()
	}
	c.w.onAbort(c.rank, code, msg)
}
