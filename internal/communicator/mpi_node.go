//go:build !nompi

package communicator

/*
#include "mpi_shim.h"
*/
import "C"

import (
	"golang.org/x/sys/unix"

	"github.com/datahelix/datahelix/internal/mpinode"
)

// The command reaches a World's node-level operations through mpinode,
// outside this package's API.
func init() {
	mpinode.Register(func(comm any) mpinode.Node {
		if w, ok := comm.(*World); ok && w != nil {
			return worldNode{w}
		}
		return nil
	})
}

// worldNode is a World's mpinode.Node.
type worldNode struct{ w *World }

func (n worldNode) ShareNodeCPUs() ([]unix.CPUSet, error) { return n.w.shareNodeCPUs() }
func (n worldNode) ShareCores(threads int) error          { return n.w.shareCores(threads) }
func (n worldNode) WaitPolicy() string                    { return n.w.currentPolicy().String() }

// shareNodeCPUs is mpinode.Node's ShareNodeCPUs: the ranks of this node
// exchange the CPU sets they started with (mpinode.StartCPUs), set the
// count mpinode.NodeCPUs returns from their union, and choose the wait
// policy again with it; the world's ranks then agree on one policy
// (agreeWaitPolicy). Every rank of the world must call it, before
// duplicating the world.
func (w *World) shareNodeCPUs() ([]unix.CPUSet, error) {
	var node C.MPI_Comm
	var rc C.int
	if err := w.do(func() {
		rc = C.MPI_Comm_split_type(w.comm, C.MPI_COMM_TYPE_SHARED, C.int(w.rank), C.dhmpi_info_null(), &node)
		if rc == C.MPI_SUCCESS {
			C.MPI_Comm_set_errhandler(node, C.dhmpi_errors_return())
		}
	}); err != nil {
		return nil, err
	}
	if err := check("MPI_Comm_split_type", rc); err != nil {
		return nil, err
	}
	defer w.do(func() { C.MPI_Comm_free(&node) })
	// A communicator of the node's ranks, waiting by blocking calls (a
	// one-off exchange at start).
	n := w.sub(node, w.info.LocalRank, w.info.LocalSize)
	var mine []byte
	if set, ok := mpinode.StartCPUs(); ok {
		mine = mpinode.EncodeCPUSet(set)
	}
	blocks, err := n.AllgatherVar(mine)
	if err != nil {
		return nil, err
	}
	sets := make([]unix.CPUSet, len(blocks))
	for i, b := range blocks {
		if sets[i], err = mpinode.DecodeCPUSet(b); err != nil {
			sets = nil // that rank does not know its CPUs
			break
		}
	}
	p := w.currentPolicy()
	if sets != nil {
		union, _ := mpinode.UnionCPUs(sets)
		mpinode.SetNodeCPUs(union.Count())
		if p, err = defaultWaitPolicy(w.info.LocalSize); err != nil {
			return nil, err
		}
	}
	// Nodes may choose apart: every rank of the world takes part, on every
	// path (the blocks, and so sets, are the same on a node's ranks).
	var aerr error
	if err := w.do(func() { p, aerr = agreeWaitPolicy(w.comm, w.tInt64, w.opMax, p) }); err != nil {
		return nil, err
	}
	if aerr != nil {
		return nil, aerr
	}
	w.setWaitPolicy(p)
	return sets, nil
}
