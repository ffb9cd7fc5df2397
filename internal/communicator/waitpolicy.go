//go:build !nompi

package communicator

// waitPolicy says how a rank waits for MPI operations to complete.
type waitPolicy int32

const (
	// waitBlock uses blocking MPI calls: the lowest latency when every
	// rank has its own core, as on a cluster node. While waiting, the MPI
	// library polls and keeps the core busy.
	waitBlock waitPolicy = iota
	// waitSleep starts non-blocking operations and polls them with
	// MPI_Test, spinning for up to 2 ms (long enough for a transfer of
	// megabytes, which needs MPI's progress engine called often) and then
	// sleeping between polls (50 µs doubling up to 500 µs). On a node with
	// more ranks than cores a rank waiting for a straggler then leaves its
	// core to the decode workers instead of spinning on it.
	waitSleep
)

// String names the policy as DATAHELIX_MPI_WAIT spells it.
func (p waitPolicy) String() string {
	if p == waitSleep {
		return "sleep"
	}
	return "block"
}
