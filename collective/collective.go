package collective

import (
	"context"

	"github.com/datahelix/datahelix/internal/communicator"
)

// Comm is one rank's handle on a communicator of Size ranks: Rank and
// Size; the collectives Allgather (equal-size blocks), AllgatherVar
// (blocks of any length), AllreduceInt64 (element-wise with an Op), Bcast
// and Barrier; the non-blocking Isend, IsendParts (one message from
// several buffers, without copying them together), Irecv and WaitAll;
// Abort, which ends the whole job; Info, where the rank runs; and Dup, a
// new communicator over the same ranks whose traffic never mixes with
// this one's.
//
// Collective operations must be called by every rank in the same order, as
// in MPI. A Comm may be used from several goroutines; implementations
// serialize calls where the underlying library requires it.
type Comm = communicator.Comm

// Info describes a rank's place in the job: its LocalRank and LocalSize
// among the ranks of its node, the node's Host name, the MPI Library
// version ("in-process" for NewLocal's ranks), and whether MPI granted
// MPI_THREAD_MULTIPLE (ThreadMultiple).
type Info = communicator.Info

// Op is a reduction operator for AllreduceInt64. Its String method names
// it.
type Op = communicator.Op

// The reduction operators.
const (
	OpSum = communicator.OpSum
	OpMin = communicator.OpMin
	OpMax = communicator.OpMax
)

// Request is a pending non-blocking send or receive. It completes in
// WaitAll; its buffer belongs to the communicator until then. Its Done
// method reports whether it completed, Len the bytes it transferred.
type Request = communicator.Request

// Errors returned by communicators. Errors from MPI wrap the library's
// message from MPI_Error_string.
var (
	// ErrSize reports buffers whose lengths do not fit the operation.
	ErrSize = communicator.ErrSize
	// ErrTruncate reports a received message longer than its buffer.
	ErrTruncate = communicator.ErrTruncate
	// ErrRank reports a rank outside [0, Size).
	ErrRank = communicator.ErrRank
	// ErrAborted reports an operation on a job that was aborted.
	ErrAborted = communicator.ErrAborted
	// ErrClosed reports an operation after the communicator was closed.
	ErrClosed = communicator.ErrClosed
	// ErrNoMPI reports a binary built without MPI support (the nompi
	// tag): Init fails with it.
	ErrNoMPI = communicator.ErrNoMPI
)

// AllRanks marks err as one that every rank of the job returns at the same
// point (a bad flag value every rank parsed, a check on allgathered data),
// so the job can end with every rank reporting it and exiting cleanly
// instead of aborting. It returns nil for a nil err.
func AllRanks(err error) error { return communicator.AllRanks(err) }

// IsAllRanks reports whether err was marked with AllRanks.
func IsAllRanks(err error) bool { return communicator.IsAllRanks(err) }

// Init initializes MPI once per process and returns the job's world: a
// duplicate of MPI_COMM_WORLD with MPI_ERRORS_RETURN set, so that MPI
// errors come back as Go errors. A process started without mpirun or
// srun becomes a one-rank world (MPI singleton). Later calls return the
// same world. If MPI grants MPI_THREAD_MULTIPLE, operations call the
// library directly from the calling goroutine; otherwise every call runs
// on the one OS thread that initialized MPI.
func Init() (Comm, error) {
	w, err := communicator.Init()
	if err != nil {
		return nil, err
	}
	return w, nil
}

// Finalize frees the world Init returned and calls MPI_Finalize. Every
// rank must call it before a clean exit; no operation may follow. Without
// a world from Init it does nothing.
func Finalize() error { return communicator.Finalize() }

// NewLocal returns the n ranks of a new in-process world, indexed by
// rank: an in-process communicator whose ranks are goroutines of this
// process, with the same semantics as the MPI world. Its Abort fails
// every pending and later operation of every rank with ErrAborted, then
// prints the message and exits the process with the code, as MPI_Abort
// ends a job; RunLocal's ranks abort without exiting.
func NewLocal(n int) []Comm { return communicator.NewLocal(n) }

// RunLocal runs body on each of n ranks of a new in-process world, each
// rank on its own goroutine, and returns every rank's error, indexed by
// rank, once all have returned.
//
// A rank whose body fails (an error neither marked AllRanks nor itself
// from the abort) aborts the world, so that no rank is left waiting for
// it: the others' pending and later operations fail with ErrAborted, and
// the context they run under is cancelled with a RankFailedError naming
// the failed rank, which stops those busy outside the communicator.
// Only the first failure is named; the abort never exits the process. An
// AllRanks error is returned as it is, since every rank reports it at the
// same point.
//
// When ctx is cancelled (a signal, a deadline) and some rank has still
// not returned 5 seconds later, the world is aborted: a rank waiting in a
// collective for one that has left, or that makes no progress, does not
// see the cancellation, and the process would never end.
func RunLocal(ctx context.Context, n int, body func(ctx context.Context, c Comm) error) []error {
	return communicator.RunLocal(ctx, n, body)
}

// RankFailedError is the cause RunLocal cancels the ranks' context with
// when a rank fails and aborts the world: it reads "stopped because rank
// R failed" rather than "context canceled". It names the Rank and the
// Reason it aborted with. errors.Is matches it with ErrAborted, since the
// ranks stopped because the job was aborted, and with context.Canceled,
// so that code checking a context error for cancellation still sees one.
type RankFailedError = communicator.RankFailedError
