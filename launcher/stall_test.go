package launcher

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/datahelix/datahelix/collective"
	"github.com/datahelix/datahelix/internal/cli"
	"github.com/datahelix/datahelix/internal/cli/clitest"
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
	err := runLocal(context.Background(), worldFlags{ranks: 2, pin: cli.AutoFalse}, io.Discard, &errOut,
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
	if err == nil || cli.ExitStatus(err) != cli.ExitStall || errors.Is(err, cli.ErrReported) {
		t.Fatalf("got %v (status %d, stderr %q); want an unreported error with status %d", err, cli.ExitStatus(err), errOut.String(), cli.ExitStall)
	}
	// What it says: testdata/stall_TestStallWatchInProcess.golden.
	stallGolden(t, err)
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
	err := runLocal(context.Background(), worldFlags{ranks: 2, pin: cli.AutoFalse}, io.Discard, &errOut,
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
	if err == nil || cli.ExitStatus(err) != cli.ExitStall {
		t.Fatalf("got %v (stderr %q); want status %d", err, errOut.String(), cli.ExitStall)
	}
	// The abort is rank 1's, saying it is busy: the golden's line.
	stallGolden(t, err)
}

// stallGolden compares the error of the test with its line in
// testdata/stall_in_process.golden, the time a rank waited left out.
func stallGolden(t *testing.T, err error) {
	t.Helper()
	tr := clitest.NewTranscript().Replace(`waited in (\w+) for [0-9.]+[µnm]?s`, "waited in $1 for T")
	tr.Add([]string{"# " + t.Name()}, err.Error())
	clitest.Golden(t, "stall_"+t.Name()+".golden", tr.String())
}
