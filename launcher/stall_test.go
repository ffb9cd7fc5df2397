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
// world about its timeout later, and the command must report why (an
// abort no rank caused by failing used to be taken as already printed).
func TestStallWatchInProcess(t *testing.T) {
	const timeout = time.Second
	var errOut bytes.Buffer
	start := time.Now()
	err := runLocal(context.Background(), worldFlags{ranks: 2, pin: autoFalse}, io.Discard, &errOut,
		func(ctx context.Context, c collective.Comm, out io.Writer) error {
			if c.Rank() == 1 {
				<-ctx.Done() // a rank that makes no progress
				return context.Cause(ctx)
			}
			w := watchStalls(c, timeout)
			defer w.stop()
			w.start("helix")
			return c.Barrier()
		})
	took := time.Since(start)
	want := "no step delivered for 1s (--stall-timeout), loader helix before its first step"
	if err == nil || errors.Is(err, errReported) || !strings.Contains(err.Error(), want) {
		t.Errorf("got %v (stderr %q); want an unreported error with %q", err, errOut.String(), want)
	}
	if took < timeout || took > timeout+10*time.Second {
		t.Errorf("aborted after %v, want about %v", took, timeout)
	}
	if w := watchStalls(nil, 0); w != nil {
		t.Errorf("a zero timeout made a watch")
	}
}
