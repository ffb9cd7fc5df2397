//go:build nompi

package collective

import "golang.org/x/sys/unix"

// ShareNodeCPUs fails: the binary has no MPI.
func (w *World) ShareNodeCPUs() ([]unix.CPUSet, error) { return nil, ErrNoMPI }
