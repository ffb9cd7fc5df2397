//go:build mpich && !nompi

package collective

// #cgo pkg-config: mpich
import "C"

// mpiFlavor names the MPI library this binary was built against.
const mpiFlavor = "mpich"
