package main

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/datahelix/datahelix/collective"
)

// stallWatch aborts the job when a rank delivers no step for a while:
// a collective waits for every rank, so one that makes no progress (a
// stopped process, a hung file system, a swapped-out node) would
// otherwise hold the whole job until the batch system's time limit.
type stallWatch struct {
	c       collective.Comm
	timeout time.Duration
	base    time.Time    // the monotonic clock's origin
	last    atomic.Int64 // since base, ns, of the last step or start
	step    atomic.Int64 // the last step delivered, -1 before the first
	loader  atomic.Value // string: the loader running
	done    chan struct{}
	once    sync.Once
}

// watchStalls starts a watch of c's steps with timeout, or returns nil
// (which does nothing) when timeout is 0.
func watchStalls(c collective.Comm, timeout time.Duration) *stallWatch {
	if timeout <= 0 {
		return nil
	}
	w := &stallWatch{c: c, timeout: timeout, base: time.Now(), done: make(chan struct{})}
	w.start("")
	go w.run()
	return w
}

// start restarts the clock for a loader that is about to run.
func (w *stallWatch) start(loader string) {
	if w == nil {
		return
	}
	w.loader.Store(loader)
	w.step.Store(-1)
	w.last.Store(int64(time.Since(w.base)))
}

// delivered records that step was delivered.
func (w *stallWatch) delivered(step int64) {
	if w == nil {
		return
	}
	w.step.Store(step)
	w.last.Store(int64(time.Since(w.base)))
}

// stop ends the watch; later calls do nothing.
func (w *stallWatch) stop() {
	if w != nil {
		w.once.Do(func() { close(w.done) })
	}
}

func (w *stallWatch) run() {
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
			if idle < w.timeout {
				continue
			}
			what := "before its first step"
			if s := w.step.Load(); s >= 0 {
				what = fmt.Sprintf("after step %d", s)
			}
			if l := w.loader.Load().(string); l != "" {
				what = "loader " + l + " " + what
			}
			w.c.Abort(1, fmt.Sprintf("no step delivered for %v (--stall-timeout), %s: some rank makes no progress (stopped, a hung file system?)", w.timeout, what))
			return
		}
	}
}
