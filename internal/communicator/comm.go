// Package communicator implements the communicators of package
// collective, which shows users the Comm interface, Init and the
// in-process world: World, a thin cgo binding to the system MPI (Open MPI
// by default, MPICH with the mpich build tag, none with nompi), which
// Init opens once per process; and an in-process world whose ranks are
// goroutines (NewLocal, RunLocal), for tests and single-process runs. Both
// pass one conformance suite (internal/collectivetest).
//
// Besides the Comm operations, World has what only the module's commands
// use: Test and TryRecv (the launcher's peer heartbeats), and its
// node-level operations through internal/mpinode.
//
// MPI errors come back as errors wrapping the library's message, matched
// with errors.Is against ErrSize, ErrTruncate and ErrRank; the operations
// of an aborted in-process world fail with ErrAborted. Errors every rank
// returns at the same point are marked with AllRanks, so that a job can
// end cleanly instead of aborting.
//
// DATAHELIX_MPI_WAIT (block, sleep or auto) chooses how World waits for
// MPI: blocking calls, or polling that leaves the core to other threads
// when a node runs more ranks than it has cores.
package communicator

import (
	"errors"
	"fmt"
)

// Comm is one rank's handle on a communicator of Size ranks.
//
// Collective operations must be called by every rank in the same order, as
// in MPI. A Comm may be used from several goroutines; implementations
// serialize calls where the underlying library requires it.
type Comm interface {
	// Rank is this rank's index in [0, Size).
	Rank() int
	// Size is the number of ranks.
	Size() int

	// Allgather gathers equal-size blocks: recv must hold Size()*len(send)
	// bytes and receives rank r's block at offset r*len(send).
	Allgather(send, recv []byte) error
	// AllgatherVar gathers blocks whose length may differ between ranks and
	// returns them indexed by rank. The blocks share one buffer.
	AllgatherVar(send []byte) ([][]byte, error)
	// AllreduceInt64 combines buf element-wise across ranks with op and
	// leaves the result in buf on every rank. All ranks pass the same length.
	AllreduceInt64(buf []int64, op Op) error
	// Bcast copies root's buf into buf on every other rank. All ranks pass
	// the same length.
	Bcast(buf []byte, root int) error
	// Barrier returns once every rank has entered it.
	Barrier() error

	// Isend starts sending buf to rank dest with tag. buf must not be
	// modified until the request completes in WaitAll.
	Isend(buf []byte, dest, tag int) (*Request, error)
	// IsendParts starts sending the concatenation of parts to rank dest
	// with tag, as one message that a single Irecv receives, without
	// first copying large parts into one buffer. No part's bytes may be
	// modified until the request completes in WaitAll; the list parts
	// itself may be reused once IsendParts returns.
	IsendParts(parts [][]byte, dest, tag int) (*Request, error)
	// Irecv starts receiving a message from rank src with tag into buf. A
	// message longer than buf is an error reported by WaitAll.
	Irecv(buf []byte, src, tag int) (*Request, error)
	// WaitAll waits for every request to complete and returns the first
	// error among them. Completed requests may be passed again; they are
	// no-ops.
	WaitAll(reqs []*Request) error

	// Abort ends the whole job with the exit code after printing msg on
	// standard error. It does not return for World; in an in-process
	// world it first fails every pending and later operation of every
	// rank with ErrAborted (RunLocal's ranks then return instead of
	// exiting).
	Abort(code int, msg string)

	// Info describes where this rank runs.
	Info() Info

	// Dup returns a new communicator over the same ranks whose traffic
	// never mixes with this one's (MPI_Comm_dup), so that two goroutines
	// can run collectives at the same time, one on each. Collective: every
	// rank must call it.
	Dup() (Comm, error)
}

// Info describes a rank's place in the job.
type Info struct {
	LocalRank int    // rank among the ranks on the same node
	LocalSize int    // ranks on the same node
	Host      string // node name
	Library   string // MPI library version string, or "in-process"
	// ThreadMultiple reports whether MPI granted MPI_THREAD_MULTIPLE, so
	// calls go straight to the library from any goroutine.
	ThreadMultiple bool
}

// Op is a reduction operator for AllreduceInt64.
type Op int

// The reduction operators.
const (
	OpSum Op = iota
	OpMin
	OpMax
)

// String names the operator.
func (o Op) String() string {
	switch o {
	case OpSum:
		return "sum"
	case OpMin:
		return "min"
	case OpMax:
		return "max"
	}
	return fmt.Sprintf("Op(%d)", int(o))
}

// Errors returned by communicators. Errors from MPI wrap the library's
// message from MPI_Error_string.
var (
	// ErrSize reports buffers whose lengths do not fit the operation.
	ErrSize = errors.New("collective: buffer size mismatch")
	// ErrTruncate reports a received message longer than its buffer.
	ErrTruncate = errors.New("collective: message truncated")
	// ErrRank reports a rank outside [0, Size).
	ErrRank = errors.New("collective: invalid rank")
	// ErrAborted reports an operation on a job that was aborted.
	ErrAborted = errors.New("collective: job aborted")
	// ErrClosed reports an operation after the communicator was closed.
	ErrClosed = errors.New("collective: communicator closed")
	// ErrNoMPI reports a binary built without MPI support (the nompi
	// tag): Init fails with it.
	ErrNoMPI = errors.New("collective: this binary was built without MPI (nompi tag); use --ranks N for an in-process world or rebuild without -tags nompi")
)

// AllRanks marks err as one that every rank of the job returns at the same
// point (a bad flag value every rank parsed, a check on allgathered data),
// so the job can end with every rank reporting it and exiting cleanly
// instead of aborting. It returns nil for a nil err.
func AllRanks(err error) error {
	if err == nil {
		return nil
	}
	return allRanksError{err}
}

// IsAllRanks reports whether err was marked with AllRanks.
func IsAllRanks(err error) bool {
	var a allRanksError
	return errors.As(err, &a)
}

type allRanksError struct{ err error }

func (e allRanksError) Error() string { return e.err.Error() }
func (e allRanksError) Unwrap() error { return e.err }
