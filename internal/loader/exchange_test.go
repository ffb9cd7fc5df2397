package loader

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/datahelix/datahelix/collective"
	"github.com/datahelix/datahelix/decode"
	"github.com/datahelix/datahelix/internal/gen/gentest"
)

// errInjected is the send failure failingSends injects.
var errInjected = errors.New("injected send failure")

// failingSends is a communicator whose IsendParts fails after its first
// pass calls.
type failingSends struct {
	collective.Comm
	pass int
}

func (c *failingSends) IsendParts(parts [][]byte, dest, tag int) (*collective.Request, error) {
	if c.pass > 0 {
		c.pass--
		return c.Comm.IsendParts(parts, dest, tag)
	}
	return nil, errInjected
}

// TestFailedSendEndsTheJob: when a send of the exchange fails, after one
// that succeeded, the rank fails with an error naming the step and the
// rank it sent to, and the job ends instead of leaving the other rank
// waiting for the message.
func TestFailedSendEndsTheJob(t *testing.T) {
	data := gentest.Tiny(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	errs := collective.RunLocal(ctx, 2, func(ctx context.Context, c collective.Comm) error {
		ds, err := decode.OpenDataset(data, t.TempDir())
		if err != nil {
			return err
		}
		var comm collective.Comm = c
		if c.Rank() == 0 {
			comm = &failingSends{Comm: c, pass: 1}
		}
		l, err := NewLoader(ctx, comm, ds, testConfig(KindHelix))
		if err != nil {
			return err
		}
		defer l.Close()
		for {
			if _, err := l.Next(ctx); err != nil {
				return err
			}
		}
	})
	if ctx.Err() != nil {
		t.Fatal("the job did not end within 2 minutes of the failed send")
	}
	if err := errs[0]; !errors.Is(err, errInjected) || !strings.Contains(err.Error(), "send to rank 1") || !strings.Contains(err.Error(), "step ") {
		t.Fatalf("rank 0: got %v, want the injected failure of a send to rank 1 at a step", err)
	}
	if errs[1] == nil {
		t.Error("rank 1 ended without an error although rank 0 failed")
	}
}
