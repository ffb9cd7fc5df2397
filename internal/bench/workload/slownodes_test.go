package workload

import (
	"strings"
	"testing"
)

func TestSlowNodeWarning(t *testing.T) {
	w := func(slow ...int) *Workload {
		return &Workload{Name: "w", Cluster: Cluster{RanksPerNode: 4, SlowNodes: slow, CPUSlowdown: 2}}
	}
	tests := []struct {
		name  string
		w     *Workload
		ranks int
		real  bool
		want  string // "" for no warning; else in the line
	}{
		{"no slow node", w(), 2, false, ""},
		{"inside", w(1), 8, false, ""},
		{"partly filled node", w(1), 5, false, ""},
		// A node outside the world is warned of whatever the slowdown
		// (with cpu_slowdown 1 it was accepted silently).
		{"slowdown 1, outside", &Workload{Name: "w", Cluster: Cluster{RanksPerNode: 4, SlowNodes: []int{9}, CPUSlowdown: 1}}, 8, false,
			"workload w: slow node 9 lies outside the simulated world (8 ranks, 4 per node: nodes 0-1); with cpu_slowdown 1 no node is slow anyway"},
		{"slowdown 1, inside", &Workload{Name: "w", Cluster: Cluster{RanksPerNode: 4, SlowNodes: []int{1}, CPUSlowdown: 1}}, 8, false, ""},
		{"slowdown 1, real", &Workload{Name: "w", Cluster: Cluster{RanksPerNode: 4, SlowNodes: []int{9}, CPUSlowdown: 1}}, 8, true, ""},
		{"hetero at 4", w(1), 4, false, "slow node 1 lies outside the simulated world (4 ranks, 4 per node: node 0): no rank is slow, so it runs as a uniform cluster (--ranks 5 or more includes node 1)"},
		{"hetero at 2", w(1), 2, false, "(2 ranks, 4 per node: node 0): no rank is slow"},
		{"all outside", w(99, 3), 8, false, "slow nodes 99, 3 lie outside the simulated world (8 ranks, 4 per node: nodes 0-1): no rank is slow, so it runs as a uniform cluster (--ranks 13 or more includes node 3)"},
		{"some outside", w(0, 99), 8, false, "workload w: slow node 99 lies outside the simulated world (8 ranks, 4 per node: nodes 0-1) and slow no rank"},
		{"real", w(1), 8, true, "not emulated in real runs"},
	}
	for _, tt := range tests {
		got := SlowNodeWarning(tt.w, tt.ranks, tt.real)
		if tt.want == "" && got != "" || tt.want != "" && !strings.Contains(got, tt.want) {
			t.Errorf("%s: got %q, want %q", tt.name, got, tt.want)
		}
		if strings.Contains(got, "\n") {
			t.Errorf("%s: %q is more than one line", tt.name, got)
		}
	}
	// The warning agrees with the slowdowns the simulator uses: no
	// warning of a node outside exactly when every listed node slows a rank.
	for ranks := 1; ranks <= 20; ranks++ {
		for _, slow := range [][]int{{0}, {1}, {2}, {4}, {1, 3}} {
			wl := w(slow...)
			slowRanks := map[int]bool{}
			for r, s := range wl.Slowdowns(ranks) {
				if s != 1 {
					slowRanks[r/4] = true
				}
			}
			if warned, missing := SlowNodeWarning(wl, ranks, false) != "", len(slowRanks) < len(slow); warned != missing {
				t.Errorf("slow nodes %v at %d ranks: warning %v, nodes without a slow rank %v", slow, ranks, warned, missing)
			}
		}
	}
}
