//go:build !mpich && !nompi

package mpinode

// Flavor names the MPI library this binary was built against (package
// collective's build: "openmpi", "mpich" with -tags mpich, "none" with
// -tags nompi), for the tests and reports that depend on it.
func Flavor() string { return "openmpi" }
