package main

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// pinCPUs restricts this process to its share of the CPUs it may use: the
// allowed CPUs split into localSize equal contiguous blocks, block
// localRank, so ranks on one node do not compete for cores (as
// mpirun --bind-to core would). With more ranks than CPUs the blocks are
// single CPUs, reused round-robin. It returns the CPUs chosen.
//
// Linux sets affinity per thread, so every existing thread of the process
// is pinned; threads created later inherit the mask from their creator.
func pinCPUs(localRank, localSize int) ([]int, error) {
	if localRank < 0 || localSize < 1 || localRank >= localSize {
		return nil, fmt.Errorf("pin: local rank %d of %d is unknown or invalid", localRank, localSize)
	}
	var allowed unix.CPUSet
	if err := unix.SchedGetaffinity(0, &allowed); err != nil {
		return nil, fmt.Errorf("pin: sched_getaffinity: %w", err)
	}
	var cpus []int
	for c := 0; c < 1024 && len(cpus) < allowed.Count(); c++ {
		if allowed.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	mine := pinBlock(cpus, localRank, localSize)
	var set unix.CPUSet
	for _, c := range mine {
		set.Set(c)
	}
	if err := setAffinityAllThreads(set); err != nil {
		return nil, fmt.Errorf("pin: %w", err)
	}
	return mine, nil
}

// pinBlock returns block localRank of cpus split into localSize parts.
func pinBlock(cpus []int, localRank, localSize int) []int {
	if len(cpus) == 0 {
		return nil
	}
	if localSize >= len(cpus) {
		return []int{cpus[localRank%len(cpus)]}
	}
	per := len(cpus) / localSize
	lo := localRank * per
	hi := lo + per
	if localRank == localSize-1 {
		hi = len(cpus) // the last rank takes the remainder
	}
	return cpus[lo:hi]
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
