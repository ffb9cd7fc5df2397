//go:build !nompi

package collective

// PartsModeOf names how w's IsendParts sends messages of several parts
// (DATAHELIX_MPI_PARTS), for the tests of package collective_test.
func PartsModeOf(w *World) string { return w.parts.String() }
