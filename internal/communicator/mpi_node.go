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

// ShareNodeCPUs has the ranks of this node (those MPI_COMM_TYPE_SHARED
// groups, which Info's LocalRank numbers) exchange the CPU sets they
// started with (mpinode.StartCPUs) and returns them in local rank order,
// or nil when some rank could not read its own. From their union it sets
// the count mpinode.NodeCPUs returns and chooses the wait policy again
// with it (it matters when DATAHELIX_MPI_WAIT is auto or unset): MPI_Init
// chose it before the ranks could compare. The world's ranks then agree
// on one policy (agreeWaitPolicy): sleep if any node's ranks chose it.
// Every rank of the world must call it, before duplicating the world (a
// duplicate keeps the policy it copied).
func (w *World) ShareNodeCPUs() ([]unix.CPUSet, error) {
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
