package mpinode

import (
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

func TestParseCPUList(t *testing.T) {
	tests := []struct {
		in   string
		want []int
		bad  bool
	}{
		{"0-3,8,10-11\n", []int{0, 1, 2, 3, 8, 10, 11}, false},
		{"5", []int{5}, false},
		{"", nil, false},
		{"\n", nil, false},
		{"3-1", nil, true},
		{"x", nil, true},
		{"1,,2", nil, true},
		{"-1", nil, true},
	}
	for _, tt := range tests {
		got, err := parseCPUList(tt.in)
		if (err != nil) != tt.bad || !slices.Equal(got, tt.want) {
			t.Errorf("parseCPUList(%q) = %v, %v; want %v (error: %v)", tt.in, got, err, tt.want, tt.bad)
		}
	}
}

func TestCgroupCpusetFiles(t *testing.T) {
	tests := []struct {
		name, in string
		want     []string
	}{
		{"cgroup v2", "0::/slurm/uid_1/job_7/step_0\n", []string{
			"/sys/fs/cgroup/slurm/uid_1/job_7/step_0/cpuset.cpus.effective", "/sys/fs/cgroup/cpuset.cpus.effective"}},
		{"cgroup v2 in a container", "0::/\n", []string{
			"/sys/fs/cgroup/cpuset.cpus.effective", "/sys/fs/cgroup/cpuset.cpus.effective"}},
		{"cgroup v1", "4:memory:/x\n3:cpuset,cpu:/docker/abc\n1:name=systemd:/\n", []string{
			"/sys/fs/cgroup/cpuset/docker/abc/cpuset.effective_cpus", "/sys/fs/cgroup/cpuset/cpuset.effective_cpus"}},
		{"no cpuset", "4:memory:/x\n", nil},
	}
	for _, tt := range tests {
		if got := cgroupCpusetFiles([]byte(tt.in)); !slices.Equal(got, tt.want) {
			t.Errorf("%s: got %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestCPUSetEncoding(t *testing.T) {
	var set unix.CPUSet
	for _, c := range []int{0, 3, 63, 64, 100, cpuSetWords*64 - 1} {
		set.Set(c)
	}
	got, err := DecodeCPUSet(EncodeCPUSet(set))
	if err != nil || got != set {
		t.Errorf("round trip: got %v (%v), want %v", got, err, set)
	}
	if _, err := DecodeCPUSet([]byte{1, 2, 3}); err == nil {
		t.Error("DecodeCPUSet of 3 bytes: want an error")
	}
}

// TestNodeCPUs checks the count before and after the node's ranks have
// compared their CPU sets.
func TestNodeCPUs(t *testing.T) {
	online, err := readCPUList("/sys/devices/system/cpu/online")
	if err != nil {
		t.Skip(err)
	}
	if n := NodeCPUs(); n < 1 || n > len(online) {
		t.Errorf("NodeCPUs() = %d before SetNodeCPUs, want 1..%d (the online CPUs)", n, len(online))
	}
	if set, ok := StartCPUs(); !ok || set.Count() < 1 {
		t.Errorf("StartCPUs() = %v, %v; want this process's CPUs", set, ok)
	}
	defer nodeCPUs.Store(nodeCPUs.Load())
	SetNodeCPUs(1)
	if n := NodeCPUs(); n != 1 {
		t.Errorf("NodeCPUs() = %d after SetNodeCPUs(1), want 1", n)
	}
	SetNodeCPUs(0) // ignored
	if n := NodeCPUs(); n != 1 {
		t.Errorf("NodeCPUs() = %d after SetNodeCPUs(0), want 1 still", n)
	}
}

// TestUnionCPUs checks the union of CPU sets and whether they overlap.
func TestUnionCPUs(t *testing.T) {
	set := func(cpus ...int) (s unix.CPUSet) {
		for _, c := range cpus {
			s.Set(c)
		}
		return s
	}
	for _, tt := range []struct {
		sets     []unix.CPUSet
		count    int
		disjoint bool
	}{
		{[]unix.CPUSet{set(0), set(1), set(64, 200)}, 4, true},
		{[]unix.CPUSet{set(0, 1), set(1, 2)}, 3, false},
		{[]unix.CPUSet{set(3), set(3)}, 1, false},
		{nil, 0, true},
	} {
		union, disjoint := UnionCPUs(tt.sets)
		if union.Count() != tt.count || disjoint != tt.disjoint {
			t.Errorf("UnionCPUs(%v) = %d CPUs, disjoint %v; want %d, %v", tt.sets, union.Count(), disjoint, tt.count, tt.disjoint)
		}
	}
}
