package launcher

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// pinCPUs restricts this process to its share of the CPUs it may use: the
// allowed CPUs split into localSize contiguous blocks (pinBlock), block
// localRank, so ranks on one node do not compete for cores (as
// mpirun --bind-to core would). With more ranks than CPUs the blocks are
// single CPUs, reused round-robin. It returns the CPUs chosen.
//
// Linux sets affinity per thread, so every existing thread of the process
// is pinned; threads created later inherit the mask from their creator.
func pinCPUs(localRank, localSize int) ([]int, error) {
	allowed, err := unpinnedCPUs()
	if err != nil {
		return nil, err
	}
	return pinCPUsOf(allowed, localRank, localSize)
}

// unpinnedCPUs returns the CPUs this process may use, or had before
// pinCPUs pinned it (from the launcher's environment, before MPI
// started): its share is always cut from those, not from a share.
func unpinnedCPUs() (unix.CPUSet, error) {
	pinState.Lock()
	pinned, before := pinState.pinned, pinState.before
	pinState.Unlock()
	if pinned {
		return before, nil
	}
	var allowed unix.CPUSet
	if err := unix.SchedGetaffinity(0, &allowed); err != nil {
		return allowed, fmt.Errorf("pin: sched_getaffinity: %w", err)
	}
	return allowed, nil
}

// pinCPUsOf is pinCPUs splitting the CPUs in allowed (the CPUs the
// node's ranks may use together).
func pinCPUsOf(allowed unix.CPUSet, localRank, localSize int) ([]int, error) {
	if localRank < 0 || localSize < 1 || localRank >= localSize {
		return nil, fmt.Errorf("pin: local rank %d of %d is unknown or invalid", localRank, localSize)
	}
	before, err := unpinnedCPUs()
	if err != nil {
		return nil, err
	}
	mine := pinBlock(cpusIn(&allowed), localRank, localSize)
	var set unix.CPUSet
	for _, c := range mine {
		set.Set(c)
	}
	if err := setAffinityAllThreads(set); err != nil {
		return nil, fmt.Errorf("pin: %w", err)
	}
	pinState.Lock()
	pinState.pinned, pinState.before, pinState.mine = true, before, set
	pinState.Unlock()
	return mine, nil
}

// unpinCPUs gives the process back the CPUs it had before pinCPUs, if
// it pinned it.
func unpinCPUs() error {
	pinState.Lock()
	defer pinState.Unlock()
	if !pinState.pinned {
		return nil
	}
	if err := setAffinityAllThreads(pinState.before); err != nil {
		return fmt.Errorf("unpin: %w", err)
	}
	pinState.pinned = false
	return nil
}

// pinState remembers the mask a pinned process had before pinCPUs, for
// withAllCPUs.
var pinState struct {
	sync.Mutex
	pinned       bool
	before, mine unix.CPUSet
}

// withAllCPUs runs fn with the CPUs this process had before it was
// pinned, then pins it again; when it was not pinned it just runs fn.
// One-off node-wide work that a single rank does while the others wait
// (generating the default dataset) uses it: pinned, that rank and the
// encoders it starts would be held to its share of the node while the
// other ranks, waiting in a collective, use little of theirs.
// fn is told how many CPUs it may use.
func withAllCPUs(fn func(cpus int) error) error {
	pinState.Lock()
	defer pinState.Unlock()
	if !pinState.pinned {
		var now unix.CPUSet
		n := runtime.NumCPU()
		if unix.SchedGetaffinity(0, &now) == nil {
			n = now.Count()
		}
		return fn(n)
	}
	if err := setAffinityAllThreads(pinState.before); err != nil {
		return fmt.Errorf("unpin: %w", err)
	}
	ferr := fn(pinState.before.Count())
	if err := setAffinityAllThreads(pinState.mine); err != nil && ferr == nil {
		ferr = fmt.Errorf("pin again: %w", err)
	}
	return ferr
}

// pinBlock returns block localRank of cpus split into localSize
// contiguous parts whose sizes differ by at most one: rank r gets
// cpus[r*n/L : (r+1)*n/L]. With more ranks than CPUs each rank gets one
// CPU, reused round-robin.
func pinBlock(cpus []int, localRank, localSize int) []int {
	n := len(cpus)
	if n == 0 {
		return nil
	}
	if localSize >= n {
		return []int{cpus[localRank%n]}
	}
	return cpus[localRank*n/localSize : (localRank+1)*n/localSize]
}

// setAffinityAllThreads sets the CPU mask of every thread of the process.
func setAffinityAllThreads(set unix.CPUSet) error {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return fmt.Errorf("list threads: %w", err)
	}
	for _, t := range tasks {
		if tid, err := strconv.Atoi(t.Name()); err == nil {
			if err := unix.SchedSetaffinity(tid, &set); err != nil && err != unix.ESRCH {
				return fmt.Errorf("sched_setaffinity(thread %d): %w", tid, err)
			}
		}
	}
	return nil
}

// cpusIn returns the CPUs in set, ascending.
func cpusIn(set *unix.CPUSet) []int {
	n := set.Count()
	cpus := make([]int, 0, n)
	for c := 0; c < maxCPUs && len(cpus) < n; c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus
}

// cpuList formats a CPU set as Linux prints one in
// /proc/self/status Cpus_allowed_list and taskset -c reads it: ascending
// ranges, "0-3,8,10-11"; "none" for an empty set.
func cpuList(set *unix.CPUSet) string {
	cpus := cpusIn(set)
	if len(cpus) == 0 {
		return "none"
	}
	var b []byte
	for i := 0; i < len(cpus); {
		lo, hi := cpus[i], cpus[i]
		for i++; i < len(cpus) && cpus[i] == hi+1; i++ {
			hi++
		}
		if len(b) > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(lo), 10)
		if hi > lo {
			b = append(b, '-')
			b = strconv.AppendInt(b, int64(hi), 10)
		}
	}
	return string(b)
}

// maxCPUs is the number of CPUs a unix.CPUSet holds (CPU_SETSIZE).
const maxCPUs = int(unsafe.Sizeof(unix.CPUSet{})) * 8

// currentCPUs returns the CPUs the calling thread may run on, as cpuList
// formats them. Pinning sets every thread of the process alike, so this is
// the rank's CPU set.
func currentCPUs() (string, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return "", fmt.Errorf("sched_getaffinity: %w", err)
	}
	return cpuList(&set), nil
}
