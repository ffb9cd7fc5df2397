//go:build !mpich && !nompi

package collective

// #cgo pkg-config: ompi-c
import "C"
