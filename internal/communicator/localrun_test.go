package communicator_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/datahelix/datahelix/internal/communicator"
)

// runLocalBounded is communicator.RunLocal with a 10-second limit, so that a
// rank the run fails to stop fails the test instead of hanging it.
func runLocalBounded(t *testing.T, n int, body func(ctx context.Context, c communicator.Comm) error) []error {
	t.Helper()
	done := make(chan []error, 1)
	go func() { done <- communicator.RunLocal(context.Background(), n, body) }()
	select {
	case errs := <-done:
		return errs
	case <-time.After(10 * time.Second):
		t.Fatal("ranks still running 10 s after the run should have ended")
		return nil
	}
}

// TestRunLocalFailureStopsTheOthers fails rank 1 while rank 2 waits in a
// collective (which only the abort ends) and ranks 0 and 3 wait on their
// context (which only the cancel ends): every other rank must stop with
// an error that names rank 1 and matches ErrAborted.
func TestRunLocalFailureStopsTheOthers(t *testing.T) {
	boom := errors.New("disk on fire")
	errs := runLocalBounded(t, 4, func(ctx context.Context, c communicator.Comm) error {
		switch c.Rank() {
		case 1:
			return boom
		case 2:
			return c.Barrier() // ranks 0 and 3 never join it
		}
		<-ctx.Done()
		return context.Cause(ctx)
	})
	if errs[1] != boom {
		t.Errorf("rank 1: got %v, want %v", errs[1], boom)
	}
	if err := errs[2]; !errors.Is(err, communicator.ErrAborted) || !strings.Contains(err.Error(), "by rank 1") || !strings.Contains(err.Error(), "disk on fire") {
		t.Errorf("rank 2: got %v, want an abort by rank 1 saying disk on fire", err)
	}
	for _, r := range []int{0, 3} {
		err := errs[r]
		if got, want := err, error(communicator.RankFailedError{Rank: 1, Reason: "disk on fire"}); got != want {
			t.Errorf("rank %d: got %v, want %v", r, got, want)
		}
		if !errors.Is(err, communicator.ErrAborted) || !errors.Is(err, context.Canceled) {
			t.Errorf("rank %d: %v does not match both ErrAborted and context.Canceled", r, err)
		}
	}
	if got, want := (communicator.RankFailedError{Rank: 1}).Error(), "stopped because rank 1 failed"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestRunLocalNamesTheFirstFailure fails ranks 0 and 2 one after the
// other: the ranks stopped by the abort name rank 0, the first.
func TestRunLocalNamesTheFirstFailure(t *testing.T) {
	errs := runLocalBounded(t, 3, func(ctx context.Context, c communicator.Comm) error {
		switch c.Rank() {
		case 0:
			return errors.New("first")
		case 2:
			<-ctx.Done()
			return errors.New("second")
		}
		<-ctx.Done()
		return context.Cause(ctx)
	})
	if got, want := errs[1], error(communicator.RankFailedError{Rank: 0, Reason: "first"}); got != want {
		t.Errorf("rank 1: got %v, want %v", got, want)
	}
	if got, want := fmt.Sprint(errs[2]), "second"; got != want {
		t.Errorf("rank 2: got %v, want %v", got, want)
	}
}

// TestRunLocalSuccess runs collectives on every rank: no rank fails, so
// every error is nil.
func TestRunLocalSuccess(t *testing.T) {
	const n = 4
	errs := runLocalBounded(t, n, func(ctx context.Context, c communicator.Comm) error {
		sum := []int64{int64(c.Rank())}
		if err := c.AllreduceInt64(sum, communicator.OpSum); err != nil {
			return err
		}
		if got, want := sum[0], int64(n*(n-1)/2); got != want {
			return fmt.Errorf("allreduce sum: got %d, want %d", got, want)
		}
		if c.Size() != n {
			return fmt.Errorf("size: got %d, want %d", c.Size(), n)
		}
		return ctx.Err()
	})
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: got %v, want nil", r, err)
		}
	}
}

// TestRunLocalAllRanksErrorDoesNotAbort has rank 0 return an AllRanks
// error at once while the others watch their context a while before
// returning the same error: were it taken for a failure, the abort's
// cancel would reach them first.
func TestRunLocalAllRanksErrorDoesNotAbort(t *testing.T) {
	bad := communicator.AllRanks(errors.New("bad flag"))
	errs := runLocalBounded(t, 3, func(ctx context.Context, c communicator.Comm) error {
		if c.Rank() == 0 {
			return bad
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(200 * time.Millisecond):
		}
		// The world is still usable between the other ranks.
		if c.Rank() == 1 {
			if _, err := c.Isend([]byte{1}, 2, 0); err != nil {
				return err
			}
		} else {
			rr, err := c.Irecv(make([]byte, 1), 1, 0)
			if err != nil {
				return err
			}
			if err := c.WaitAll([]*communicator.Request{rr}); err != nil {
				return err
			}
		}
		return bad
	})
	for r, err := range errs {
		if err != bad {
			t.Errorf("rank %d: got %v, want %v", r, err, bad)
		}
	}
}

// TestRunLocalCancelEndsStuckRanks leaves rank 1 early with an AllRanks
// error only it got (a mistake the runtime once made), so rank 0 waits in
// a barrier nobody else will join, then cancels the run's context: the
// world must be aborted StuckGrace later instead of hanging.
func TestRunLocalCancelEndsStuckRanks(t *testing.T) {
	if testing.Short() {
		t.Skip("waits communicator.StuckGrace (5 s)")
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	done := make(chan []error, 1)
	go func() {
		done <- communicator.RunLocal(ctx, 2, func(ctx context.Context, c communicator.Comm) error {
			if c.Rank() == 1 {
				return communicator.AllRanks(errors.New("only mine"))
			}
			return c.Barrier()
		})
	}()
	time.Sleep(100 * time.Millisecond)
	stop := errors.New("interrupted by SIGTERM")
	cancel(stop)
	sent := time.Now()
	select {
	case errs := <-done:
		if took := time.Since(sent); took < communicator.StuckGrace {
			t.Errorf("ended %v after the cancel, before the grace of %v", took, communicator.StuckGrace)
		}
		if !errors.Is(errs[0], communicator.ErrAborted) || !strings.Contains(errs[0].Error(), "interrupted by SIGTERM; ranks still waiting") {
			t.Errorf("rank 0: %v; want the abort naming the cause", errs[0])
		}
	case <-time.After(communicator.StuckGrace + 10*time.Second):
		t.Fatal("rank 0 still waiting in the barrier 10 s after the grace")
	}
}
