//go:build mpich && !nompi

package communicator

// #cgo pkg-config: mpich
import "C"
