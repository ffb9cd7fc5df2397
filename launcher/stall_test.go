package launcher

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/datahelix/datahelix/collective"
	"github.com/datahelix/datahelix/internal/stall"
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
			defer w.Stop()
			w.Start("helix")
			return w.Watched(c).Barrier()
		})
	took := time.Since(start)
	want := "no step delivered for 1s (--stall-timeout), loader helix before its first step: this rank has waited in Barrier for "
	if exitStatus(err) != exitStall || errors.Is(err, errReported) || !strings.Contains(err.Error(), want) {
		t.Errorf("got %v (status %d, stderr %q); want an unreported error with status %d and %q", err, exitStatus(err), errOut.String(), exitStall, want)
	}
	if took < timeout+time.Second || took > timeout+10*time.Second {
		t.Errorf("aborted after %v, want about %v", took, timeout+time.Second)
	}
	if w := stall.Watch(nil, 0); w != nil {
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
			defer w.Stop()
			w.Start("helix")
			w.Delivered(6)
			if c.Rank() == 1 {
				<-ctx.Done() // stuck in its own work
				return context.Cause(ctx)
			}
			return w.Watched(c).Barrier()
		})
	want := "aborted by rank 1 (code 7): no step delivered for 1s (--stall-timeout), loader helix after step 6: this rank is busy outside the collectives"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("got %v (stderr %q); want an error with %q", err, errOut.String(), want)
	}
}
