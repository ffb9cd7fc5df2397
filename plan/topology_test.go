package plan

import "testing"

// twoNodes is 4 ranks, 2 on each of 2 nodes, where rank 0 holds a step's
// worth of heavy clips and a near deadline and the other ranks have
// nothing but cheap samples: balancing pays, if moving the clips does.
// The network between the nodes moves netBW bytes/µs; memory within a
// node 1000.
func twoNodes(netBW int64) *Input {
	in := &Input{Params: Params{Mode: ModeHelix, Margin: 500}, Step: 1, Batch: 4}
	for r := range 4 {
		in.Ranks = append(in.Ranks, Progress{Deadline: 100_000, Capacity: One, Bandwidth: 1000 * One, Latency: 5,
			Node: int64(r / 2), NodeBandwidth: netBW * One, NodeLatency: 50})
		for i := range 4 {
			s := Sample{ID: uint64(r*4 + i), Owner: r, Bytes: 200_000, Cost: 2_000}
			if r == 0 {
				s.Cost = 60_000
			}
			in.Samples = append(in.Samples, s)
		}
	}
	return in
}

// TestSlowNetworkKeepsMovesOnTheNode: the late rank's clips go to the
// rank on its own node; across a network that takes 200 ms a clip they
// would arrive after the deadline they were moved to meet, so none
// crosses. Over a fast network they do, since one other rank cannot take
// enough.
func TestSlowNetworkKeepsMovesOnTheNode(t *testing.T) {
	var p Planner
	var out Plan
	for _, c := range []struct {
		name  string
		netBW int64
		cross bool
	}{
		{"1 byte/µs between the nodes", 1, false},
		{"1000 bytes/µs between the nodes", 1000, true},
	} {
		in := twoNodes(c.netBW)
		if err := p.Compute(in, &out); err != nil {
			t.Fatal(err)
		}
		onNode, across := 0, 0
		for _, mv := range out.Moves {
			if in.Ranks[mv.Src].Node == in.Ranks[mv.Dst].Node {
				onNode += len(mv.Samples)
			} else {
				across += len(mv.Samples)
			}
		}
		if onNode == 0 {
			t.Errorf("%s: no sample moved within the node (moves %+v)", c.name, out.Moves)
		}
		if (across > 0) != c.cross {
			t.Errorf("%s: %d samples crossed the network, want crossing %v (moves %+v)", c.name, across, c.cross, out.Moves)
		}
	}
}
