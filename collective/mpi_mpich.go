//go:build mpich && !nompi

package collective

// #cgo pkg-config: mpich
import "C"
