package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/datahelix/datahelix/collective"
)

// TestStallWatchInProcess runs the watch on in-process ranks (--ranks)
// where rank 1 never joins rank 0's collective: the watch must abort the
// world about its timeout (and the grace a rank waiting in MPI gives) later,
// and the command must report why (an abort no rank caused by failing used
// to be taken as already printed).
func TestStallWatchInProcess(t *testing.T) {
	const timeout = time.Second
	var errOut bytes.Buffer
	start := time.Now()
	err := runLocal(context.Background(), worldFlags{ranks: 2, pin: autoFalse}, io.Discard, &errOut,
		func(ctx context.Context, c collective.Comm, out, _ io.Writer) error {
			if c.Rank() == 1 {
				<-ctx.Done() // a rank that makes no progress
				return context.Cause(ctx)
			}
			w := watchStalls(c, timeout)
			defer w.stop()
			w.start("helix")
			return w.watched(c).Barrier()
		})
	took := time.Since(start)
	want := "no step delivered for 1s (--stall-timeout), loader helix before its first step: this rank has waited in Barrier for "
	if err == nil || errors.Is(err, errReported) || !strings.Contains(err.Error(), want) {
		t.Errorf("got %v (stderr %q); want an unreported error with %q", err, errOut.String(), want)
	}
	if took < timeout+time.Second || took > timeout+10*time.Second {
		t.Errorf("aborted after %v, want about %v", took, timeout+time.Second)
	}
	if w := watchStalls(nil, 0); w != nil {
		t.Errorf("a zero timeout made a watch")
	}
}

// TestStallWatchNamesTheBusyRank runs a watch on each in-process rank.
// Rank 1 is stuck outside MPI (a read from a hung file system) while rank
// 0 waits for it in a collective: both watches fire, but the abort must
// come from rank 1 and say that it is the one not waiting, so that the
// operator knows which node to look at.
func TestStallWatchNamesTheBusyRank(t *testing.T) {
	const timeout = time.Second
	var errOut bytes.Buffer
	err := runLocal(context.Background(), worldFlags{ranks: 2, pin: autoFalse}, io.Discard, &errOut,
		func(ctx context.Context, c collective.Comm, out, _ io.Writer) error {
			w := watchStalls(c, timeout)
			defer w.stop()
			w.start("helix")
			w.delivered(6)
			if c.Rank() == 1 {
				<-ctx.Done() // stuck in its own work
				return context.Cause(ctx)
			}
			return w.watched(c).Barrier()
		})
	want := "aborted by rank 1 (code 1): no step delivered for 1s (--stall-timeout), loader helix after step 6: this rank is busy outside the collectives"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("got %v (stderr %q); want an error with %q", err, errOut.String(), want)
	}
}

// TestWatchedCommCounts checks that the watched communicator marks its
// rank as waiting in MPI exactly while a blocking call runs, through a
// duplicate too.
func TestWatchedCommCounts(t *testing.T) {
	runWatched(t, func(c collective.Comm, w *stallWatch, wc, d collective.Comm) error {
		if c.Rank() == 0 {
			time.Sleep(200 * time.Millisecond) // rank 1 waits in the barrier
		} else {
			go func() {
				time.Sleep(100 * time.Millisecond)
				if call, _, ok := w.waiting(); !ok || call != "Barrier" {
					t.Errorf("rank 1 in a barrier: waiting in %q (%v)", call, ok)
				}
			}()
		}
		if err := d.Barrier(); err != nil {
			return err
		}
		if call, _, ok := w.waiting(); ok {
			t.Errorf("rank %d after the barrier: waiting in %q", c.Rank(), call)
		}
		return nil
	})
}

// runWatched runs body on 2 in-process ranks, each with a stall watch,
// the rank's communicator wrapped by it and a duplicate of that, and
// fails the test on a rank's error.
func runWatched(t *testing.T, body func(c collective.Comm, w *stallWatch, wc, d collective.Comm) error) {
	t.Helper()
	errs := collective.RunLocal(context.Background(), 2, func(ctx context.Context, c collective.Comm) error {
		w := &stallWatch{base: time.Now()}
		wc := w.watched(c)
		d, err := wc.Dup()
		if err != nil {
			return err
		}
		return body(c, w, wc, d)
	})
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

// TestWatchNamesTheOldestCallStillRunning has two goroutines of rank 0
// wait on two communicators (the step loop's and the GPU's): once the
// first call returns, the watch must name the one still running, not the
// first that was entered.
func TestWatchNamesTheOldestCallStillRunning(t *testing.T) {
	runWatched(t, func(c collective.Comm, w *stallWatch, wc, d collective.Comm) error {
		buf := []int64{1}
		if c.Rank() == 1 {
			time.Sleep(150 * time.Millisecond)
			if err := wc.Barrier(); err != nil { // releases rank 0's first call
				return err
			}
			time.Sleep(150 * time.Millisecond)
			return d.AllreduceInt64(buf, collective.OpSum) // and its second
		}
		first := make(chan error, 1)
		go func() { first <- wc.Barrier() }()
		time.Sleep(50 * time.Millisecond)
		second := make(chan error, 1)
		go func() { second <- d.AllreduceInt64(buf, collective.OpSum) }()
		if err := <-first; err != nil {
			return err
		}
		time.Sleep(50 * time.Millisecond)
		if call, _, ok := w.waiting(); !ok || call != "AllreduceInt64" {
			t.Errorf("waiting in %q (%v), want the AllreduceInt64 still running", call, ok)
		}
		return <-second
	})
}
