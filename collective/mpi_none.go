//go:build nompi

package collective

import "errors"

// World is unavailable in binaries built with the nompi tag.
type World struct{ Local }

type mpiReq struct{}

// ErrNoMPI reports a binary built without MPI support.
var ErrNoMPI = errors.New("collective: this binary was built without MPI (nompi tag); use --ranks N for an in-process world or rebuild without -tags nompi")

// Available reports whether this binary was built with MPI support.
func Available() bool { return false }

// Flavor names the MPI library the binary was built against: "none".
func Flavor() string { return "none" }

// Init fails: the binary has no MPI.
func Init() (*World, error) { return nil, ErrNoMPI }

// Finalize does nothing.
func (w *World) Finalize() error { return nil }

// WaitPolicy returns WaitBlock: a binary without MPI never waits on it.
func (w *World) WaitPolicy() WaitPolicy { return WaitBlock }

// SetWaitPolicy does nothing: there is no MPI to wait for.
func (w *World) SetWaitPolicy(WaitPolicy) {}

// PartsMode returns "none": a binary without MPI sends nothing through it.
func (w *World) PartsMode() string { return "none" }

// Test reports ErrNoMPI.
func (w *World) Test(*Request) (bool, error) { return false, ErrNoMPI }

// TryRecv reports ErrNoMPI.
func (w *World) TryRecv([]byte, int) (src, n int, ok bool, err error) { return 0, 0, false, ErrNoMPI }

// ShareCores does nothing: there is no MPI to wait for.
func (w *World) ShareCores(int) error { return nil }
