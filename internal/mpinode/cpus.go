package mpinode

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// startMask is the CPU affinity mask of the process when this package
// was initialized: before main runs, so before the launcher pins it
// (a launcher such as mpirun --bind-to core or srun --cpu-bind may have
// bound it already). startMaskOK is false when sched_getaffinity failed.
var startMask, startMaskOK = func() (unix.CPUSet, bool) {
	var set unix.CPUSet
	err := unix.SchedGetaffinity(0, &set)
	return set, err == nil
}()

// StartCPUs returns the CPUs this process could run on when it started,
// before any pinning of its own, and whether they are known. It is what
// nproc would have printed in the process.
func StartCPUs() (unix.CPUSet, bool) { return startMask, startMaskOK }

// nodeCPUs is the count SetNodeCPUs set; 0 until then.
var nodeCPUs atomic.Int64

// NodeCPUs counts the CPUs the ranks of this node may use together: what
// decides whether the node runs more ranks than it has CPUs (the wait
// policy auto, the launcher's --pin=auto).
//
// Once the ranks of the node have compared their CPU sets, it is the
// number of CPUs in the union of the sets they started with (see
// SetNodeCPUs): the CPUs nproc (sched_getaffinity, which honours taskset
// and cgroup cpusets) counts in the shell that launched them when the
// launcher did not bind them, and the cores it gave them when it did.
// One rank's own mask alone cannot tell: mpirun binds each rank to a core
// when the ranks fit, and that is exactly when they are not
// oversubscribed.
//
// Before that (MPI_Init chooses the wait policy with it), it counts the
// online CPUs in this process's cgroup cpuset (cpuset.cpus.effective of
// cgroup v2, cpuset.effective_cpus of v1), which a container's CPU limit
// narrows but no launcher's binding does; all online CPUs when there is
// no cpuset to read.
func NodeCPUs() int {
	if n := nodeCPUs.Load(); n > 0 {
		return int(n)
	}
	return cgroupCPUsOnce()
}

// cgroupCPUsOnce is cgroupCPUs read once per process: the cpuset of a
// process does not change while MPI starts, and NodeCPUs is asked more
// than once.
var cgroupCPUsOnce = sync.OnceValue(cgroupCPUs)

// SetNodeCPUs makes NodeCPUs return n, the number of CPUs the ranks of
// this node may use together as they found out (n < 1 is ignored).
func SetNodeCPUs(n int) {
	if n > 0 {
		nodeCPUs.Store(int64(n))
	}
}

// cgroupCPUs counts the online CPUs of this process's cgroup cpuset.
func cgroupCPUs() int {
	online, err := readCPUList("/sys/devices/system/cpu/online")
	if err != nil {
		return runtime.NumCPU()
	}
	if cg, ok := cgroupCPUSet(); ok {
		var both []int
		for _, c := range online {
			if cg[c] {
				both = append(both, c)
			}
		}
		if len(both) > 0 {
			return len(both)
		}
	}
	return max(len(online), 1)
}

// cgroupCPUSet reads the effective cpuset of this process's cgroup.
func cgroupCPUSet() (map[int]bool, bool) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, false
	}
	for _, file := range cgroupCpusetFiles(b) {
		if cpus, err := readCPUList(file); err == nil && len(cpus) > 0 {
			set := make(map[int]bool, len(cpus))
			for _, c := range cpus {
				set[c] = true
			}
			return set, true
		}
	}
	return nil, false
}

// cgroupCpusetFiles lists the files that may hold this process's
// effective cpuset, given /proc/self/cgroup: under cgroup v2 ("0::/path")
// the cgroup's own cpuset.cpus.effective, then the mount root's (a
// container whose cgroup namespace hides the path); under v1 the cpuset
// controller's.
func cgroupCpusetFiles(procCgroup []byte) []string {
	var files []string
	sc := bufio.NewScanner(bytes.NewReader(procCgroup))
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		path := filepath.Clean("/" + parts[2])
		switch {
		case parts[0] == "0" && parts[1] == "":
			files = append(files, filepath.Join("/sys/fs/cgroup", path, "cpuset.cpus.effective"), "/sys/fs/cgroup/cpuset.cpus.effective")
		case containsWord(parts[1], "cpuset"):
			files = append(files, filepath.Join("/sys/fs/cgroup/cpuset", path, "cpuset.effective_cpus"), "/sys/fs/cgroup/cpuset/cpuset.effective_cpus")
		}
	}
	return files
}

// containsWord reports whether w is one of the comma-separated words of
// list, such as the controllers field "cpu,cpuset" of a cgroup v1 line
// of /proc/self/cgroup.
func containsWord(list, w string) bool {
	for _, s := range strings.Split(list, ",") {
		if s == w {
			return true
		}
	}
	return false
}

// readCPUList reads a file in the kernel's CPU list format.
func readCPUList(name string) ([]int, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	return parseCPUList(string(b))
}

// parseCPUList reads a CPU list as the kernel prints one
// (/sys/devices/system/cpu/online, cpuset.cpus.effective, taskset -c):
// "0-3,8,10-11", ascending ranges. An empty list is no CPUs.
func parseCPUList(s string) ([]int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	var cpus []int
	for _, part := range strings.Split(s, ",") {
		lo, hi, found := strings.Cut(part, "-")
		a, err1 := strconv.Atoi(lo)
		z := a
		var err2 error
		if found {
			z, err2 = strconv.Atoi(hi)
		}
		if err1 != nil || err2 != nil || a < 0 || z < a || z-a > 1<<20 {
			return nil, fmt.Errorf("mpinode: bad CPU list %q", s)
		}
		for c := a; c <= z; c++ {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}

// UnionCPUs returns the union of sets and whether they are pairwise
// disjoint (no CPU in two of them: a launcher bound each rank to CPUs of
// its own).
func UnionCPUs(sets []unix.CPUSet) (union unix.CPUSet, disjoint bool) {
	disjoint = true
	for i := range sets {
		for c := 0; c < cpuSetWords*64; c++ {
			if sets[i].IsSet(c) {
				disjoint = disjoint && !union.IsSet(c)
				union.Set(c)
			}
		}
	}
	return union, disjoint
}

// cpuSetWords is the number of 64-bit words of a unix.CPUSet.
const cpuSetWords = int(unsafe.Sizeof(unix.CPUSet{}) / 8)

// EncodeCPUSet encodes set for another rank (DecodeCPUSet reads it):
// little-endian 64-bit words, CPU c in bit c%64 of word c/64.
func EncodeCPUSet(set unix.CPUSet) []byte {
	b := make([]byte, 0, cpuSetWords*8)
	for c := 0; c < cpuSetWords*64; c += 64 {
		var w uint64
		for i := 0; i < 64; i++ {
			if set.IsSet(c + i) {
				w |= 1 << i
			}
		}
		b = binary.LittleEndian.AppendUint64(b, w)
	}
	return b
}

// DecodeCPUSet reads what EncodeCPUSet wrote.
func DecodeCPUSet(b []byte) (unix.CPUSet, error) {
	var set unix.CPUSet
	if len(b) != cpuSetWords*8 {
		return set, fmt.Errorf("mpinode: a CPU set of %d bytes, want %d", len(b), cpuSetWords*8)
	}
	for i := 0; i < cpuSetWords; i++ {
		w := binary.LittleEndian.Uint64(b[8*i:])
		for j := 0; j < 64; j++ {
			if w&(1<<j) != 0 {
				set.Set(64*i + j)
			}
		}
	}
	return set, nil
}
