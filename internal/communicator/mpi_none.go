//go:build nompi

package communicator

import "golang.org/x/sys/unix"

// World is unavailable in binaries built with the nompi tag.
type World struct{ local }

type mpiReq struct{}

// Init fails: the binary has no MPI.
func Init() (*World, error) { return nil, ErrNoMPI }

// Finalize does nothing.
func (w *World) Finalize() error { return nil }

// Finalize does nothing: there is no World.
func Finalize() error { return nil }

// ShareNodeCPUs reports ErrNoMPI.
func (w *World) ShareNodeCPUs() ([]unix.CPUSet, error) { return nil, ErrNoMPI }

// ShareCores reports ErrNoMPI.
func (w *World) ShareCores(int) error { return ErrNoMPI }

// WaitPolicy is empty: there is no MPI to wait for.
func (w *World) WaitPolicy() string { return "" }

// Test reports ErrNoMPI.
func (w *World) Test(*Request) (bool, error) { return false, ErrNoMPI }

// TryRecv reports ErrNoMPI.
func (w *World) TryRecv([]byte, int) (src, n int, ok bool, err error) { return 0, 0, false, ErrNoMPI }
