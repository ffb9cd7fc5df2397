package communicator

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// StuckGrace is how long ranks get to return once their work is
// cancelled (a signal, a deadline) before their job is aborted: a rank
// waiting in a collective for a peer that makes no progress never sees
// the cancellation. RunLocal applies it to in-process ranks; the
// datahelix command to MPI ranks.
const StuckGrace = 5 * time.Second

// RunLocal runs body on each of n ranks of a new in-process world, each
// rank on its own goroutine, and returns every rank's error, indexed by
// rank, once all have returned.
//
// A rank whose body fails (an error neither marked AllRanks nor itself
// from the abort) aborts the world, so that no rank is left waiting for
// it: the others' pending and later operations fail with ErrAborted, and
// the context they run under is cancelled with a RankFailedError naming
// the failed rank, which stops those busy outside the communicator
// (waiting for a batch, decoding). Only the first failure is named; the
// abort never exits the process. An AllRanks error is returned as it is,
// since every rank reports it at the same point.
//
// When ctx is cancelled (a signal, a deadline) and some rank has still
// not returned StuckGrace later, the world is aborted: a rank waiting
// in a collective for one that has left, or that makes no progress, does
// not see the cancellation, and the process would never end.
func RunLocal(ctx context.Context, n int, body func(ctx context.Context, c Comm) error) []error {
	parent := ctx
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	ranks := newLocal(n, withAbortHook(func(rank, code int, msg string) {
		cancel(RankFailedError{Rank: rank, Reason: msg})
	}))
	finished := make(chan struct{})
	defer close(finished)
	go func() {
		select {
		case <-finished:
			return
		case <-parent.Done():
		}
		select {
		case <-finished:
		case <-time.After(StuckGrace):
			ranks[0].Abort(1, fmt.Sprintf("%v; ranks still waiting %v later", context.Cause(parent), StuckGrace))
		}
	}()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r, c := range ranks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = body(ctx, c)
			if err := errs[r]; err != nil && !IsAllRanks(err) && !errors.Is(err, ErrAborted) {
				c.Abort(1, err.Error())
			}
		}()
	}
	wg.Wait()
	return errs
}

// RankFailedError is the cause RunLocal cancels the ranks' context with
// when a rank fails and aborts the world: it reads "stopped because rank
// R failed" rather than "context canceled". errors.Is matches it with
// ErrAborted, since the ranks stopped because the job was aborted, and
// with context.Canceled, so that code checking a context error for
// cancellation still sees one.
type RankFailedError struct {
	Rank   int    // the rank that failed and aborted the job
	Reason string // what it aborted with (its error, which it returns itself)
}

// Error names the failed rank.
func (e RankFailedError) Error() string {
	return fmt.Sprintf("stopped because rank %d failed", e.Rank)
}

// Is reports whether target is ErrAborted or context.Canceled.
func (e RankFailedError) Is(target error) bool {
	return target == ErrAborted || target == context.Canceled
}
