package sim

import (
	"time"

	"golang.org/x/sys/unix"
)

// threadCPU returns the calling thread's CPU time in ns (wall time where
// the clock is missing), as workload.ThreadCPU; the caller locks its
// goroutine to the thread for the span it measures.
func threadCPU() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return time.Now().UnixNano()
	}
	return ts.Nano()
}
