//go:build !mpich && !nompi

package communicator

// #cgo pkg-config: ompi-c
import "C"
