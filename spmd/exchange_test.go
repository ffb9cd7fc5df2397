package spmd

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/datahelix/datahelix/collective"
	"github.com/datahelix/datahelix/decode"
	"github.com/datahelix/datahelix/decode/gen/gentest"
)

// errInjected is the send failure failingSends injects.
var errInjected = errors.New("injected send failure")

// failingSends is a communicator whose IsendParts fails after its first
// pass calls, counting the receives started since the last WaitAll.
type failingSends struct {
	collective.Comm
	pass  int
	recvs int
}

func (c *failingSends) Irecv(buf []byte, src, tag int) (*collective.Request, error) {
	c.recvs++
	return c.Comm.Irecv(buf, src, tag)
}

func (c *failingSends) WaitAll(reqs []*collective.Request) error {
	c.recvs = 0
	return c.Comm.WaitAll(reqs)
}

func (c *failingSends) IsendParts(parts [][]byte, dest, tag int) (*collective.Request, error) {
	if c.pass > 0 {
		c.pass--
		return c.Comm.IsendParts(parts, dest, tag)
	}
	return nil, errInjected
}

// TestFailedExchangeKeepsItsRequests: when a send fails, the exchange
// fails naming the rank it sent to, and the loader keeps the receives that
// exchange had started, never waited for, so that their buffers, which MPI
// holds pinned, stay reachable until the job ends; and none of an earlier,
// successful exchange.
func TestFailedExchangeKeepsItsRequests(t *testing.T) {
	data := gentest.Tiny(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var abandoned, started int
	errs := collective.RunLocal(ctx, 2, func(ctx context.Context, c collective.Comm) error {
		fc := &failingSends{Comm: c, pass: 1}
		ds, err := decode.OpenDataset(data, t.TempDir())
		if err != nil {
			return err
		}
		l, err := NewLoader(ctx, fc, ds, testConfig(KindHelix))
		if err != nil {
			return err
		}
		defer l.Close()
		for {
			if _, err := l.Next(ctx); err != nil {
				if errors.Is(err, errInjected) && c.Rank() == 0 {
					abandoned, started = len(l.abandoned), fc.recvs
				}
				return err
			}
		}
	})
	if errs[0] == nil || !errors.Is(errs[0], errInjected) || !strings.Contains(errs[0].Error(), "send to rank 1") {
		t.Fatalf("rank 0: got %v, want the injected failure of a send to rank 1", errs[0])
	}
	if started == 0 {
		t.Fatal("rank 0 had started no receive when its send failed: the test checks nothing")
	}
	if abandoned != started {
		t.Errorf("the loader kept %d requests, want the %d receives it started", abandoned, started)
	}
}
