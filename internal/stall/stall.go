package stall

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/datahelix/datahelix/collective"
)

// Watcher aborts the job when a rank delivers no step for a while:
// a collective waits for every rank, so one that makes no progress (a
// stopped process, a hung file system, a swapped-out node) would
// otherwise hold the whole job until the batch system's time limit.
//
// Each rank's watch says in its message whether that rank waits in MPI
// for the others (the oldest blocking call one of its goroutines is in)
// or is busy outside MPI (reading, decoding, planning, computing its
// step): the rank outside MPI is the one holding the job, so the ranks
// waiting in MPI give it victimGrace more to abort first and name itself.
type Watcher struct {
	c       collective.Comm
	timeout time.Duration
	base    time.Time    // the monotonic clock's origin
	last    atomic.Int64 // since base, ns, of the last step or start
	step    atomic.Int64 // the last step delivered, -1 before the first
	loader  atomic.Value // string: the loader running
	done    chan struct{}
	once    sync.Once

	mu    sync.Mutex
	slots []*callSlot // one per watched communicator
}

// callSlot says whether goroutines of this rank are in a blocking call of
// one watched communicator: how many, which call the first of them
// made, and since when. (spmd runs one goroutine per communicator: the
// step loop's and the GPU's allreduce.)
type callSlot struct {
	n     atomic.Int32
	call  atomic.Value // string
	since atomic.Int64 // since base, ns
}

// Watch starts a watch of c's steps with timeout, or returns nil
// (which does nothing) when timeout is 0.
func Watch(c collective.Comm, timeout time.Duration) *Watcher {
	if timeout <= 0 {
		return nil
	}
	w := &Watcher{c: c, timeout: timeout, base: time.Now(), done: make(chan struct{})}
	w.Start("")
	go w.run()
	return w
}

// Start restarts the clock for a loader that is about to run.
func (w *Watcher) Start(loader string) {
	if w == nil {
		return
	}
	w.loader.Store(loader)
	w.step.Store(-1)
	w.last.Store(int64(time.Since(w.base)))
}

// Delivered records that step was delivered.
func (w *Watcher) Delivered(step int64) {
	if w == nil {
		return
	}
	w.step.Store(step)
	w.last.Store(int64(time.Since(w.base)))
}

// Stop ends the watch; later calls do nothing.
func (w *Watcher) Stop() {
	if w != nil {
		w.once.Do(func() { close(w.done) })
	}
}

// victimGrace is how much longer than the timeout a rank waiting in MPI
// lets pass before it aborts: a tenth of the timeout, between 1 s and
// 30 s.
func (w *Watcher) victimGrace() time.Duration {
	return min(max(w.timeout/10, time.Second), 30*time.Second)
}

// waiting returns the oldest blocking call a goroutine of this rank is
// in and since when, or ok false when none is.
func (w *Watcher) waiting() (call string, since time.Duration, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, sl := range w.slots {
		if sl.n.Load() == 0 {
			continue
		}
		at := time.Duration(sl.since.Load())
		if !ok || at < since {
			call, _ = sl.call.Load().(string)
			since, ok = at, true
		}
	}
	return call, since, ok
}

// Watched returns c reporting its blocking calls to w, or c itself
// when w is nil.
func (w *Watcher) Watched(c collective.Comm) collective.Comm {
	if w == nil {
		return c
	}
	sl := &callSlot{}
	w.mu.Lock()
	w.slots = append(w.slots, sl)
	w.mu.Unlock()
	return watchedComm{Comm: c, w: w, slot: sl}
}

func (w *Watcher) run() {
	every := min(w.timeout/4, time.Second)
	tick := time.NewTicker(every)
	defer tick.Stop()
	prev := time.Since(w.base)
	for {
		select {
		case <-w.done:
			return
		case <-tick.C:
			now := time.Since(w.base)
			if now-prev > 3*every+time.Second {
				// The process did not run for a while (the job was
				// suspended, the node swapped): not a stall of a peer.
				w.last.Store(int64(now))
			}
			prev = now
			idle := now - time.Duration(w.last.Load())
			call, since, waiting := w.waiting()
			if idle < w.timeout || waiting && idle < w.timeout+w.victimGrace() {
				continue
			}
			what := "before its first step"
			if s := w.step.Load(); s >= 0 {
				what = fmt.Sprintf("after step %d", s)
			}
			if l := w.loader.Load().(string); l != "" {
				what = "loader " + l + " " + what
			}
			calls := "MPI"
			if w.c.Info().Library == "in-process" { // --ranks
				calls = "the collectives"
			}
			where := fmt.Sprintf("this rank is busy outside %s (reading, decoding, planning or computing its step: a hung file system?), not waiting for the others", calls)
			if waiting {
				where = fmt.Sprintf("this rank has waited in %s for %v for a rank that makes no progress (stopped, a hung file system?)",
					call, (now - since).Round(time.Second))
			}
			w.c.Abort(1, fmt.Sprintf("no step delivered for %v (--stall-timeout), %s: %s", w.timeout, what, where))
			return
		}
	}
}

// watchedComm is a communicator whose blocking calls tell a stall watch
// that its rank waits in MPI.
type watchedComm struct {
	collective.Comm
	w    *Watcher
	slot *callSlot
}

// enter records that a goroutine enters the blocking call.
func (c watchedComm) enter(call string) {
	if c.slot.n.Add(1) == 1 {
		c.slot.call.Store(call)
		c.slot.since.Store(int64(time.Since(c.w.base)))
	}
}

// leave records that a goroutine left the blocking call it entered.
func (c watchedComm) leave() { c.slot.n.Add(-1) }

func (c watchedComm) Allgather(send, recv []byte) error {
	c.enter("Allgather")
	defer c.leave()
	return c.Comm.Allgather(send, recv)
}

func (c watchedComm) AllgatherVar(send []byte) ([][]byte, error) {
	c.enter("AllgatherVar")
	defer c.leave()
	return c.Comm.AllgatherVar(send)
}

func (c watchedComm) AllreduceInt64(buf []int64, op collective.Op) error {
	c.enter("AllreduceInt64")
	defer c.leave()
	return c.Comm.AllreduceInt64(buf, op)
}

func (c watchedComm) Bcast(buf []byte, root int) error {
	c.enter("Bcast")
	defer c.leave()
	return c.Comm.Bcast(buf, root)
}

func (c watchedComm) Barrier() error {
	c.enter("Barrier")
	defer c.leave()
	return c.Comm.Barrier()
}

func (c watchedComm) WaitAll(reqs []*collective.Request) error {
	c.enter("the sample exchange (WaitAll)")
	defer c.leave()
	return c.Comm.WaitAll(reqs)
}

func (c watchedComm) Dup() (collective.Comm, error) {
	c.enter("Dup") // MPI_Comm_dup is collective
	d, err := c.Comm.Dup()
	c.leave()
	if err != nil {
		return nil, err
	}
	return c.w.Watched(d), nil
}
