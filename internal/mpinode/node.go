// Package mpinode is the node-level machinery under the MPI world: the
// CPU sets of a node's ranks (what they started with, their union, how
// many the node's ranks may use together) and the operations of an MPI
// world that act on its node — exchanging those sets, and choosing how
// its ranks wait for MPI.
//
// It is the command's (launcher's --pin, info, run, train), not a user's,
// so it lives here rather than in collective's public API. collective
// implements the operations that need MPI and registers them (Register);
// Of finds them for a communicator.
package mpinode

import "golang.org/x/sys/unix"

// Node is what an MPI world can do about the node its rank runs on.
type Node interface {
	// ShareNodeCPUs has the ranks of this node (those
	// MPI_COMM_TYPE_SHARED groups, which collective.Info's LocalRank
	// numbers) exchange the CPU sets they started with (StartCPUs) and
	// returns them in local rank order, or nil when some rank could not
	// read its own. From their union it sets the count NodeCPUs returns
	// (SetNodeCPUs) and chooses the wait policy again with it (it matters
	// when DATAHELIX_MPI_WAIT is auto or unset): MPI_Init chose it before
	// the ranks could compare. The world's ranks then agree on one
	// policy: sleep if any node's ranks chose it. Every rank of the world
	// must call it, before duplicating the world (a duplicate keeps the
	// policy it copied).
	ShareNodeCPUs() ([]unix.CPUSet, error)
	// ShareCores chooses the wait policy again for ranks that each keep
	// threads threads busy (a rank's decode workers, its trainer process)
	// rather than one: with DATAHELIX_MPI_WAIT auto or unset, the ranks
	// sleep in waits when the node's ranks times threads outnumber its
	// cores, since a rank spinning in a wait takes a core from them. An
	// explicit DATAHELIX_MPI_WAIT is kept. The ranks agree (sleep when
	// any chose it), and duplicates made afterwards inherit the policy.
	// Every rank must call it with the same threads.
	ShareCores(threads int) error
	// WaitPolicy names how the world's rank waits for MPI operations to
	// complete, as DATAHELIX_MPI_WAIT spells it: "block" or "sleep".
	WaitPolicy() string
}

// of is what Register installed.
var of func(comm any) Node

// Register installs the function Of asks. collective calls it when it is
// built with MPI; without MPI, Of finds no Node.
func Register(f func(comm any) Node) { of = f }

// Of returns the Node of comm when comm is an MPI world
// (*communicator.World or a duplicate of one), nil otherwise (an
// in-process communicator, a binary built without MPI).
func Of(comm any) Node {
	if of == nil {
		return nil
	}
	return of(comm)
}
