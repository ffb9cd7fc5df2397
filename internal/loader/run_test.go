package loader

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/datahelix/datahelix/collective"
	"github.com/datahelix/datahelix/internal/gen/gentest"
)

// failCheckpoint makes rank's checkpoint of loader k at step fail: the
// temporary file's name is taken by a directory (root can write anywhere,
// so a read-only directory would not do).
func failCheckpoint(t *testing.T, dir string, k Kind, step int64, rank int) {
	t.Helper()
	if err := os.MkdirAll(checkpointPath(dir, k, step, rank)+".tmp", 0o755); err != nil {
		t.Fatal(err)
	}
}

// TestRunInProcessPeersNameTheFailedRank fails one rank's checkpoint mid
// run: that rank returns its own error, and every other rank an error
// that names it and matches collective.ErrAborted — whether it was
// waiting in a collective (the planned loaders' allgather, the GPU's
// allreduce) or for a batch — and not a bare "context canceled".
func TestRunInProcessPeersNameTheFailedRank(t *testing.T) {
	data := gentest.Tiny(t)
	const ranks, failing = 4, 1
	for _, k := range []Kind{KindTorch, KindHelix} {
		dir := t.TempDir()
		cfg := testConfig(k)
		cfg.Steps, cfg.CheckpointDir, cfg.CheckpointEvery = 6, dir, 2
		failCheckpoint(t, dir, k, 2, failing)
		_, errs := runBounded(t, ranks, data, cfg, time.Minute)
		for r, err := range errs {
			switch {
			case err == nil:
				t.Errorf("%s: rank %d: got no error, want one", k, r)
			case r == failing && (!strings.Contains(err.Error(), "checkpoint") || errors.Is(err, collective.ErrAborted)):
				t.Errorf("%s: rank %d: got %v, want its checkpoint error", k, r, err)
			case r != failing && (!errors.Is(err, collective.ErrAborted) || !strings.Contains(err.Error(), "rank 1") ||
				strings.Contains(err.Error(), "context canceled")):
				t.Errorf("%s: rank %d: got %q, want an abort naming rank %d", k, r, err, failing)
			}
		}
	}
}

// TestRunReturnsTheCause cancels a run with a cause: every rank's error is
// the cause, whatever it was doing, rather than "context canceled".
func TestRunReturnsTheCause(t *testing.T) {
	data := gentest.Tiny(t)
	stop := errors.New("stopped by the test")
	cause := causeError{stop}
	ctx, cancel := context.WithCancelCause(context.Background())
	time.AfterFunc(300*time.Millisecond, func() { cancel(cause) })
	cfg := testConfig(KindLocal)
	cfg.Steps = 1_000_000
	done := make(chan []error, 1)
	go func() {
		_, errs := RunInProcess(ctx, 2, data, t.TempDir(), cfg)
		done <- errs
	}()
	select {
	case errs := <-done:
		for r, err := range errs {
			if !errors.Is(err, stop) && !errors.Is(err, collective.ErrAborted) {
				t.Errorf("rank %d: got %v, want %v (or an abort by the other rank)", r, err, cause)
			}
		}
		if !errors.Is(errs[0], stop) && !errors.Is(errs[1], stop) {
			t.Errorf("got %v, want a rank to return %v", errs, cause)
		}
	case <-time.After(time.Minute):
		t.Fatal("the cancelled run did not end in a minute")
	}
}

// causeError is a cancellation cause that is a context.Canceled, as the
// command's signal cause is.
type causeError struct{ err error }

func (e causeError) Error() string { return e.err.Error() }
func (e causeError) Unwrap() []error {
	return []error{e.err, context.Canceled}
}
