package collective

import (
	"os"
	"runtime"
	"strconv"
	"strings"
)

// NodeCPUs counts the online CPUs of this node, whatever the process's
// affinity: mpirun binds each rank to a core when the ranks fit, so the
// CPUs a rank may use say nothing of whether the node is oversubscribed.
func NodeCPUs() int {
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		return runtime.NumCPU()
	}
	n := 0
	for _, part := range strings.Split(strings.TrimSpace(string(b)), ",") {
		lo, hi, found := strings.Cut(part, "-")
		a, err1 := strconv.Atoi(lo)
		z := a
		var err2 error
		if found {
			z, err2 = strconv.Atoi(hi)
		}
		if err1 != nil || err2 != nil || z < a {
			return runtime.NumCPU()
		}
		n += z - a + 1
	}
	return max(n, 1)
}
