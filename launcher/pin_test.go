package launcher

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestPinBlock(t *testing.T) {
	cpus := []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}
	tests := []struct {
		rank, size int
		want       []int
	}{
		{0, 1, cpus},
		{0, 2, []int{0, 1, 2, 3, 4}},
		{1, 2, []int{5, 6, 7, 8, 9}},
		{0, 3, []int{0, 1, 2}},
		{1, 3, []int{3, 4, 5}},
		{2, 3, []int{6, 7, 8, 9}}, // 10 over 3: 3, 3, 4
		{11, 12, []int{1}},        // more ranks than CPUs: one CPU each, round-robin
	}
	for _, tt := range tests {
		if got := pinBlock(cpus, tt.rank, tt.size); !slices.Equal(got, tt.want) {
			t.Errorf("pinBlock(rank %d of %d) = %v, want %v", tt.rank, tt.size, got, tt.want)
		}
	}
	// The sizes of the blocks differ by at most one (the old split gave
	// the remainder to the last rank: 7 CPUs over 4 ranks were 1,1,1,4).
	for _, tt := range []struct {
		cpus, ranks int
		sizes       []int
	}{
		{7, 4, []int{1, 2, 2, 2}},
		{15, 8, []int{1, 2, 2, 2, 2, 2, 2, 2}},
		{12, 8, []int{1, 2, 1, 2, 1, 2, 1, 2}},
		{8, 8, []int{1, 1, 1, 1, 1, 1, 1, 1}},
		{9, 2, []int{4, 5}},
	} {
		list := make([]int, tt.cpus)
		for i := range list {
			list[i] = i
		}
		var sizes []int
		for r := 0; r < tt.ranks; r++ {
			sizes = append(sizes, len(pinBlock(list, r, tt.ranks)))
		}
		if !slices.Equal(sizes, tt.sizes) {
			t.Errorf("%d CPUs over %d ranks: blocks of %v, want %v", tt.cpus, tt.ranks, sizes, tt.sizes)
		}
	}
	// Every CPU belongs to exactly one rank when ranks <= CPUs.
	for size := 1; size <= len(cpus); size++ {
		var all []int
		for r := 0; r < size; r++ {
			all = append(all, pinBlock(cpus, r, size)...)
		}
		if !slices.Equal(all, cpus) {
			t.Errorf("%d ranks cover %v, want %v", size, all, cpus)
		}
	}
}

func TestPinCPUsSetsEveryThread(t *testing.T) {
	var before unix.CPUSet
	if err := unix.SchedGetaffinity(0, &before); err != nil {
		t.Skip("sched_getaffinity:", err)
	}
	t.Cleanup(func() {
		unpinCPUs() // what the process had before the test pinned it
		setAffinityAllThreads(before)
	})
	if before.Count() < 2 {
		t.Skip("needs two CPUs")
	}
	// Pinning as local rank 1 of 2 must leave this thread (and any
	// other) with the second half of the CPUs.
	got, err := pinCPUs(1, 2)
	if err != nil {
		t.Fatal(err)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var after unix.CPUSet
	if err := unix.SchedGetaffinity(0, &after); err != nil {
		t.Fatal(err)
	}
	if after.Count() != len(got) {
		t.Errorf("thread allowed on %d CPUs after pinning to %v", after.Count(), got)
	}
	for _, c := range got {
		if !after.IsSet(c) {
			t.Errorf("CPU %d chosen but not in the thread's mask", c)
		}
	}
	// withAllCPUs widens every thread back for its function, then pins
	// again.
	err = withAllCPUs(func(cpus int) error {
		var during unix.CPUSet
		if err := unix.SchedGetaffinity(0, &during); err != nil {
			return err
		}
		if cpus != before.Count() || during != before {
			t.Errorf("inside withAllCPUs: told %d CPUs, thread mask has %d; want %d", cpus, during.Count(), before.Count())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.SchedGetaffinity(0, &after); err != nil {
		t.Fatal(err)
	}
	if after.Count() != len(got) {
		t.Errorf("after withAllCPUs the thread runs on %d CPUs, want %d again", after.Count(), len(got))
	}
	// Pinning again splits the CPUs the process had first, not its share.
	again, err := pinCPUs(1, 2)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(again, got) {
		t.Errorf("pinning twice gave %v, then %v; want the same CPUs", got, again)
	}
	// Restore the whole process for the other tests, as a rank the
	// launcher bound does (pinRank).
	if err := unpinCPUs(); err != nil {
		t.Fatal(err)
	}
	if _, err := pinCPUs(2, 2); err == nil {
		t.Error("local rank 2 of 2 accepted")
	}
}

func TestCPUList(t *testing.T) {
	tests := []struct {
		cpus []int
		want string
	}{
		{nil, "none"},
		{[]int{0}, "0"},
		{[]int{0, 1}, "0-1"},
		{[]int{0, 1, 2, 3, 8, 10, 11}, "0-3,8,10-11"},
		{[]int{5, 7, 9}, "5,7,9"},
		{[]int{63, 64, 65}, "63-65"}, // across a mask word
		{[]int{0, maxCPUs - 1}, fmt.Sprintf("0,%d", maxCPUs-1)},
		{[]int{maxCPUs - 2, maxCPUs - 1}, fmt.Sprintf("%d-%d", maxCPUs-2, maxCPUs-1)},
	}
	for _, tt := range tests {
		var set unix.CPUSet
		for _, c := range tt.cpus {
			set.Set(c)
		}
		if got := cpuList(&set); got != tt.want {
			t.Errorf("cpuList(%v): got %q, want %q", tt.cpus, got, tt.want)
		}
	}
	// Against a dumb reference on random sets: the list names exactly
	// the CPUs in the set.
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		var set unix.CPUSet
		var want []int
		for c := range maxCPUs {
			if rng.IntN(4) == 0 {
				set.Set(c)
				want = append(want, c)
			}
		}
		var got []int
		for _, r := range strings.Split(cpuList(&set), ",") {
			lo, hi, isRange := strings.Cut(r, "-")
			a, _ := strconv.Atoi(lo)
			b := a
			if isRange {
				b, _ = strconv.Atoi(hi)
			}
			for c := a; c <= b; c++ {
				got = append(got, c)
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("cpuList names %v, want %v", got, want)
		}
	}
}

// TestCPUsIn checks the one walk of a CPU set that pinning and cpuList
// share against a dumb reference (every CPU number asked in turn) on
// hand-made and random sets, dense and sparse.
func TestCPUsIn(t *testing.T) {
	ref := func(set *unix.CPUSet) []int {
		out := []int{}
		for c := range maxCPUs {
			if set.IsSet(c) {
				out = append(out, c)
			}
		}
		return out
	}
	sets := [][]int{nil, {0}, {maxCPUs - 1}, {1, 63, 64, 65, 127, 128}, {0, 2, 4, maxCPUs - 2}}
	rng := rand.New(rand.NewPCG(5, 6))
	for range 200 {
		var cpus []int
		dense := 1 + rng.IntN(64)
		for c := range maxCPUs {
			if rng.IntN(dense) == 0 {
				cpus = append(cpus, c)
			}
		}
		sets = append(sets, cpus)
	}
	for _, cpus := range sets {
		var set unix.CPUSet
		for _, c := range cpus {
			set.Set(c)
		}
		if got, want := cpusIn(&set), ref(&set); !slices.Equal(got, want) {
			t.Fatalf("cpusIn(%v) = %v, want %v", cpus, got, want)
		}
	}
}
