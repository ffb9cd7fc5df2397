package bench

import (
	"time"

	"golang.org/x/sys/unix"
)

// cpuOf runs f on the calling (locked) thread and returns its CPU time
// (threadCPU).
func cpuOf(f func() error) (time.Duration, error) {
	a := threadCPU()
	err := f()
	return time.Duration(threadCPU() - a), err
}

// threadCPU returns the calling thread's CPU time in ns.
func threadCPU() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return time.Now().UnixNano() // not on Linux: fall back to wall time
	}
	return ts.Nano()
}
