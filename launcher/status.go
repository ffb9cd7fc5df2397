package launcher

import (
	"errors"
	"sync"
	"time"

	"github.com/datahelix/datahelix/collective"
	"github.com/datahelix/datahelix/internal/stall"
	"github.com/datahelix/datahelix/spmd"
)

// The exit statuses of the datahelix command, one per class of failure,
// so that a script (a Slurm epilogue, a requeue rule) can tell a bad
// dataset from a lost node without reading the message. They are a
// promise: docs/failures.md#exit-statuses lists them, and a new class
// takes a new number rather than reusing one.
const (
	exitOK       = 0
	exitFailure  = 1 // anything not in a class below
	exitUsage    = 2 // a bad flag or argument, before MPI starts
	exitBadInput = 3 // the dataset, a shard or a checkpoint cannot be used
	exitLaunch   = 4 // MPI's world is not the one the launcher started (srun without --mpi=pmix)
	exitDisagree = 5 // the ranks were started with different settings or data
	exitPlan     = 6 // the ranks' plans diverged while training
	exitStall    = 7 // no step delivered for --stall-timeout
	exitPeerLost = 8 // a rank unreachable for --peer-timeout
	exitTrainer  = 9 // a trainer failed: exited, was killed, never connected
	// A signal N ends the command with 128+N (130 for SIGINT, 143 for
	// SIGTERM), as a shell reports a command the signal killed.
)

// statuser is an error that carries its exit status.
type statuser interface{ exitStatus() int }

// statusError gives err the exit status of its class; errors.Is and
// errors.As see err through it.
type statusError struct {
	status int
	err    error
}

func (e statusError) Error() string   { return e.err.Error() }
func (e statusError) Unwrap() error   { return e.err }
func (e statusError) exitStatus() int { return e.status }

// withStatus returns err with the exit status status, or nil for nil.
func withStatus(status int, err error) error {
	if err == nil {
		return nil
	}
	return statusError{status: status, err: err}
}

// withStatusAllRanks gives an error every rank reached alike (marked
// collective.AllRanks: a mismatch the ranks found together, a dataset
// that does not split) the status status, and leaves any other error
// (a failed collective) as it is.
func withStatusAllRanks(status int, err error) error {
	if !collective.IsAllRanks(err) {
		return err
	}
	return withStatus(status, err)
}

// exitStatus maps the error a command returned to the process's exit
// status (see the constants above). A signal wins over the class of the
// error it caused; the outermost status an error carries wins over those
// it wraps.
func exitStatus(err error) int {
	if err == nil || errors.Is(err, errHelp) {
		return exitOK
	}
	if errors.Is(err, errUsage) {
		return exitUsage
	}
	if ie, ok := interrupted(err); ok {
		return ie.status()
	}
	var st statuser
	if errors.As(err, &st) {
		return st.exitStatus()
	}
	if errors.Is(err, spmd.ErrPlanMismatch) {
		return exitPlan
	}
	return exitFailure
}

// stallAborts is a communicator for spmd (a Loader, a StallWatch) whose
// aborts end the job with exitStall: spmd aborts a job for one reason
// only, a rank that delivered no step for its stall timeout, and does so
// with status 1.
type stallAborts struct{ collective.Comm }

func (c stallAborts) Abort(_ int, msg string) { c.Comm.Abort(exitStall, msg) }

// watchStalls is stall.Watch ending the job with exitStall.
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

// get returns the first abort's status, exitFailure if there was none.
func (s *abortStatus) get() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.status == 0 {
		return exitFailure
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
