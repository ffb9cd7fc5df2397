package main

import (
	"fmt"
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
	last    atomic.Int64 // unix nanoseconds of the last step or start
	step    atomic.Int64 // the last step delivered, -1 before the first
	loader  atomic.Value // string: the loader running
	done    chan struct{}
}

// watchStalls starts a watch of c's steps with timeout, or returns nil
// (which does nothing) when timeout is 0.
func watchStalls(c collective.Comm, timeout time.Duration) *stallWatch {
	if timeout <= 0 {
		return nil
	}
	w := &stallWatch{c: c, timeout: timeout, done: make(chan struct{})}
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
	w.last.Store(time.Now().UnixNano())
}

// delivered records that step was delivered.
func (w *stallWatch) delivered(step int64) {
	if w == nil {
		return
	}
	w.step.Store(step)
	w.last.Store(time.Now().UnixNano())
}

// stop ends the watch.
func (w *stallWatch) stop() {
	if w != nil {
		close(w.done)
	}
}

func (w *stallWatch) run() {
	tick := time.NewTicker(min(w.timeout/4, time.Second))
	defer tick.Stop()
	for {
		select {
		case <-w.done:
			return
		case now := <-tick.C:
			idle := now.Sub(time.Unix(0, w.last.Load()))
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
			w.c.Abort(1, fmt.Sprintf("no step delivered for %v (--stall-timeout), %s: some rank makes no progress (stopped, a hung file system?)", idle.Round(time.Second), what))
			return
		}
	}
}
