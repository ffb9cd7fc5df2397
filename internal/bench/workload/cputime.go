package workload

import (
	"time"

	"golang.org/x/sys/unix"
)

// CPUOf runs f on the calling (locked) thread and returns its CPU time
// (ThreadCPU).
func CPUOf(f func() error) (time.Duration, error) {
	a := ThreadCPU()
	err := f()
	return time.Duration(ThreadCPU() - a), err
}

// ThreadCPU returns the calling thread's CPU time in ns.
func ThreadCPU() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return time.Now().UnixNano() // not on Linux: fall back to wall time
	}
	return ts.Nano()
}
