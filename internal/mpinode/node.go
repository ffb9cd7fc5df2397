// Package mpinode is the node-level machinery under the MPI world: the
// CPU sets of a node's ranks (what they started with, their union, how
// many the node's ranks may use together), their encoding, and what the MPI
// world's node needs — the MPI flavour the binary was built with. The
// MPI world (internal/communicator's World) exchanges the sets between a
// node's ranks and chooses how they wait for MPI from them.
//
// It is the command's (launcher's --pin, info, run, train), not a user's.
package mpinode
