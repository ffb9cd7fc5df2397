//go:build nompi

package communicator

// World is unavailable in binaries built with the nompi tag.
type World struct{ local }

type mpiReq struct{}

// Init fails: the binary has no MPI.
func Init() (*World, error) { return nil, ErrNoMPI }

// Finalize does nothing.
func (w *World) Finalize() error { return nil }

// Finalize does nothing: there is no World.
func Finalize() error { return nil }

// Test reports ErrNoMPI.
func (w *World) Test(*Request) (bool, error) { return false, ErrNoMPI }

// TryRecv reports ErrNoMPI.
func (w *World) TryRecv([]byte, int) (src, n int, ok bool, err error) { return 0, 0, false, ErrNoMPI }
