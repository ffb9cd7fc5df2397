package launcher

import (
	"sync"
	"time"

	"github.com/datahelix/datahelix/collective"
	"github.com/datahelix/datahelix/internal/cli"
	"github.com/datahelix/datahelix/internal/stall"
)

// withStatusAllRanks gives an error every rank reached alike (marked
// collective.AllRanks: a mismatch the ranks found together, a dataset
// that does not split) the status status, and leaves any other error
// (a failed collective) as it is.
func withStatusAllRanks(status int, err error) error {
	if !collective.IsAllRanks(err) {
		return err
	}
	return cli.WithStatus(status, err)
}

// stallAborts is a communicator for spmd (a Loader, a StallWatch) whose
// aborts end the job with cli.ExitStall: spmd aborts a job for one reason
// only, a rank that delivered no step for its stall timeout, and does so
// with status 1.
type stallAborts struct{ collective.Comm }

func (c stallAborts) Abort(_ int, msg string) { c.Comm.Abort(cli.ExitStall, msg) }

// watchStalls is stall.Watch ending the job with cli.ExitStall.
func watchStalls(c collective.Comm, timeout time.Duration) *stall.Watcher {
	return stall.Watch(stallAborts{c}, timeout)
}

// abortStatus keeps the status of the first abort of an in-process
// world, which its ranks see only as collective.ErrAborted.
type abortStatus struct {
	mu     sync.Mutex
	status int // 0 until an abort
}

// recordAborts returns c noting the status of its aborts in s.
func (s *abortStatus) recordAborts(c collective.Comm) collective.Comm {
	return abortRecorder{Comm: c, s: s}
}

// get returns the first abort's status, cli.ExitFailure if there was none.
func (s *abortStatus) get() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.status == 0 {
		return cli.ExitFailure
	}
	return s.status
}

type abortRecorder struct {
	collective.Comm
	s *abortStatus
}

func (c abortRecorder) Abort(code int, msg string) {
	c.s.mu.Lock()
	if c.s.status == 0 {
		c.s.status = code
	}
	c.s.mu.Unlock()
	c.Comm.Abort(code, msg)
}
