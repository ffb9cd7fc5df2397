// Package collective is the communicator every other package uses: rank and
// size, collectives, non-blocking point-to-point transfers of byte buffers
// and job abort.
//
// Two implementations of Comm pass one conformance suite: the MPI world,
// a thin cgo binding to the system MPI (Open MPI by default, MPICH with
// the mpich build tag, none with nompi), which Init opens once per
// process and Finalize closes; and an in-process world whose ranks are
// goroutines (NewLocal, RunLocal), for tests and single-process runs.
// Both live in the module's internal/communicator.
//
// MPI errors come back as errors wrapping the library's message, matched
// with errors.Is against ErrSize, ErrTruncate and ErrRank; the operations
// of an aborted in-process world fail with ErrAborted. Errors every rank
// returns at the same point are marked with AllRanks, so that a job can
// end cleanly instead of aborting.
//
// DATAHELIX_MPI_WAIT (block, sleep or auto) chooses how the MPI world
// waits for MPI: blocking calls, or polling that leaves the core to other
// threads when a node runs more ranks than it has cores.
package collective
