package spmd

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/datahelix/datahelix/collective"
	"github.com/datahelix/datahelix/decode"
	"github.com/datahelix/datahelix/internal/gen/gentest"
)

// runWatched runs body on 2 in-process ranks, each with a stall watch,
// the rank's communicator wrapped by it and a duplicate of that, and
// fails the test on a rank's error.
func runWatched(t *testing.T, body func(c collective.Comm, w *StallWatch, wc, d collective.Comm) error) {
	t.Helper()
	errs := collective.RunLocal(context.Background(), 2, func(ctx context.Context, c collective.Comm) error {
		w := &StallWatch{base: time.Now()}
		wc := w.Watched(c)
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
	runWatched(t, func(c collective.Comm, w *StallWatch, wc, d collective.Comm) error {
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

// TestWatchedCommCounts checks that the watched communicator marks its
// rank as waiting in MPI exactly while a blocking call runs, through a
// duplicate too.
func TestWatchedCommCounts(t *testing.T) {
	runWatched(t, func(c collective.Comm, w *StallWatch, wc, d collective.Comm) error {
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

// TestLoaderStallTimeout: a loader with Config.StallTimeout aborts the
// world when its rank delivers nothing (the training loop never asks),
// naming the timeout, instead of leaving every rank waiting.
func TestLoaderStallTimeout(t *testing.T) {
	data := gentest.Tiny(t)
	cfg := Config{Loader: KindHelix, Batch: 2, Steps: 30, Horizon: 2, Workers: 1, Seed: 1, Decode: decode.Options{Frames: 2, Size: 32}, StallTimeout: time.Second}
	start := time.Now()
	errs := collective.RunLocal(context.Background(), 2, func(ctx context.Context, c collective.Comm) error {
		ds, err := decode.OpenDatasetPart(data, "", c.Rank(), c.Size())
		if err != nil {
			return err
		}
		defer ds.Close()
		l, err := NewLoader(ctx, c, ds, cfg)
		if err != nil {
			return err
		}
		defer l.Close()
		if c.Rank() == 0 {
			for { // rank 1 never asks: rank 0 soon waits for its plans
				if _, err := l.Next(ctx); err != nil {
					return err
				}
			}
		}
		<-ctx.Done()
		return context.Cause(ctx)
	})
	took := time.Since(start)
	aborted := false
	for _, err := range errs {
		if err != nil && strings.Contains(err.Error(), "no step delivered for 1s") {
			aborted = true
		}
	}
	if !aborted || took > 20*time.Second || took < time.Second {
		t.Errorf("after %v: errors %v, want the watch to abort the world naming the timeout", took, errs)
	}
}
