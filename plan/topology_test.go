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

// TestMovesStayOnTheNodeFirst: rank 3 must shed one heavy clip, and
// rank 2 on its node and ranks 0 and 1 on the other can each take it at
// the same price (a network as fast as memory) with the same outcome.
// Ranks 0 and 1 come first in rank order, which breaks ties between equal
// partners, but the exchange within the node goes first.
func TestMovesStayOnTheNodeFirst(t *testing.T) {
	in := &Input{Params: Params{Mode: ModeHelix, Margin: 100}, Step: 3, Batch: 2}
	for r := range 4 {
		in.Ranks = append(in.Ranks, Progress{Deadline: 80_000, Capacity: One, Bandwidth: 1000 * One, Latency: 5,
			Node: int64(r / 2), NodeBandwidth: 1000 * One, NodeLatency: 5})
		for i := range 2 {
			c := int64(1_000)
			if r == 3 {
				c = 60_000
			}
			in.Samples = append(in.Samples, Sample{ID: uint64(r*2 + i), Owner: r, Bytes: 100_000, Cost: c})
		}
	}
	var p Planner
	var out Plan
	if err := p.Compute(in, &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Moves) == 0 {
		t.Fatal("no move: the scenario does not make rank 3 late")
	}
	for _, mv := range out.Moves {
		if in.Ranks[mv.Src].Node != in.Ranks[mv.Dst].Node {
			t.Errorf("move %d -> %d crosses the network, while rank 2 on rank 3's node could take it (moves %+v)", mv.Src, mv.Dst, out.Moves)
		}
	}
}
