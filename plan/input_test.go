package plan

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func smallInput() *Input {
	in := &Input{Params: Params{Mode: ModeHelix, Margin: 10}, Step: 3, Batch: 2}
	for r := range 3 {
		in.Ranks = append(in.Ranks, Progress{Deadline: 1000, Backlog: 10, Capacity: One, Bandwidth: One, Latency: 1})
		for i := range 2 {
			in.Samples = append(in.Samples, Sample{ID: uint64(10*r + i), Owner: r, Bytes: 100, Cost: int64(100 * (r + 1))})
		}
	}
	return in
}

// TestComputeRejects checks that zero capacity and negative or
// overflowing values are errors naming the culprit, never panics.
func TestComputeRejects(t *testing.T) {
	for _, c := range []struct {
		name   string
		mutate func(*Input)
		want   string
	}{
		{"zero capacity", func(in *Input) { in.Ranks[1].Capacity = 0 }, "rank 1: capacity 0"},
		{"negative capacity", func(in *Input) { in.Ranks[2].Capacity = -One }, "rank 2: capacity"},
		{"overflowing capacity", func(in *Input) { in.Ranks[0].Capacity = math.MaxInt64 }, "rank 0: capacity"},
		{"zero bandwidth", func(in *Input) { in.Ranks[0].Bandwidth = 0 }, "rank 0: bandwidth 0"},
		{"negative deadline", func(in *Input) { in.Ranks[0].Deadline = -1 }, "deadline -1"},
		{"overflowing deadline", func(in *Input) { in.Ranks[0].Deadline = math.MaxInt64 }, "deadline"},
		{"negative backlog", func(in *Input) { in.Ranks[2].Backlog = -3 }, "rank 2: backlog -3"},
		{"negative latency", func(in *Input) { in.Ranks[2].Latency = -3 }, "latency -3"},
		{"negative cost", func(in *Input) { in.Samples[4].Cost = -1 }, "sample 4 (id 20, rank 2): cost -1"},
		{"overflowing cost", func(in *Input) { in.Samples[0].Cost = math.MaxInt64 }, "sample 0 (id 0, rank 0): cost"},
		{"negative bytes", func(in *Input) { in.Samples[3].Bytes = -1 }, "sample 3 (id 11, rank 1): size -1"},
		{"overflowing bytes", func(in *Input) { in.Samples[3].Bytes = maxBytes + 1 }, "size 17179869185"},
		{"duplicate id", func(in *Input) { in.Samples[5].ID = 10 }, "id 10 appears twice"},
		{"wrong owner", func(in *Input) { in.Samples[2].Owner = 0 }, "sample 2 (id 10) has owner 0, want 1"},
		{"too few samples", func(in *Input) { in.Samples = in.Samples[:5] }, "5 samples, want"},
		{"no ranks", func(in *Input) { in.Ranks, in.Samples = nil, nil }, "0 ranks"},
		{"zero batch", func(in *Input) { in.Batch = 0 }, "batch 0"},
		{"huge batch", func(in *Input) { in.Batch = maxBatch + 1 }, "batch 4097"},
		{"negative step", func(in *Input) { in.Step = -1 }, "step -1"},
		{"negative margin", func(in *Input) { in.Margin = -1 }, "margin -1"},
		{"unknown mode", func(in *Input) { in.Mode = 77 }, "unknown mode 77"},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := smallInput()
			c.mutate(in)
			p, err := Compute(in)
			if !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), c.want) || p != nil {
				t.Fatalf("got plan %v, error %v; want ErrInput mentioning %q", p != nil, err, c.want)
			}
		})
	}
}

// TestExtremeValuesPlan checks that inputs at every limit plan without
// overflow.
func TestExtremeValuesPlan(t *testing.T) {
	for _, c := range []struct {
		name string
		set  func(*Input)
	}{
		{"max everything", func(in *Input) {
			for r := range in.Ranks {
				in.Ranks[r] = Progress{Deadline: maxTime, Backlog: maxTime, Capacity: maxCapacity, Bandwidth: maxBandwidth, Latency: maxLatency}
			}
			for k := range in.Samples {
				in.Samples[k].Cost, in.Samples[k].Bytes = maxCost, maxBytes
			}
		}},
		{"slowest ranks, dearest samples", func(in *Input) {
			for r := range in.Ranks {
				in.Ranks[r] = Progress{Capacity: 1, Bandwidth: 1, Latency: maxLatency, Backlog: maxTime}
			}
			for k := range in.Samples {
				in.Samples[k].Cost, in.Samples[k].Bytes = maxCost-int64(k), maxBytes
			}
		}},
		{"one rank", func(in *Input) {
			in.Ranks, in.Samples = in.Ranks[:1], in.Samples[:2]
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := smallInput()
			c.set(in)
			for _, mode := range []Mode{ModeHelix, ModeHelixNoGate, ModeStatic, ModeOracle, ModeLocal} {
				in.Mode = mode
				p, err := Compute(in)
				if err != nil {
					t.Fatal(err)
				}
				checkPlan(t, in, p)
				if lb := LowerBound(in); lb > p.Makespan || lb < 0 {
					t.Fatalf("mode %s: lower bound %d, makespan %d", mode, lb, p.Makespan)
				}
			}
		})
	}
}

func TestParseMode(t *testing.T) {
	for m := range numModes {
		got, err := parseMode(m.String())
		if err != nil || got != m {
			t.Errorf("ParseMode(%q) = %v, %v, want %v", m.String(), got, err, m)
		}
	}
	if _, err := parseMode("torch"); !errors.Is(err, ErrInput) {
		t.Errorf("ParseMode(torch) error = %v, want ErrInput", err)
	}
	if got := Mode(9).String(); got != "mode(9)" {
		t.Errorf("Mode(9).String() = %q, want mode(9)", got)
	}
}

// TestRoomDoesNotWrap plans one late rank among many idle ones whose
// deadlines and capacities are at the limits: each idle rank can take
// about 2^56 µs of reference work, and 256 of them used to wrap the
// planner's summed room negative, so rescue gave up on the late rank.
func TestRoomDoesNotWrap(t *testing.T) {
	const n, b = 256, 2
	in := &Input{Params: Params{Mode: ModeHelix}, Batch: b}
	for r := range n {
		pr := Progress{Deadline: maxTime, Capacity: maxCapacity, Bandwidth: maxBandwidth}
		if r == 0 {
			pr = Progress{Deadline: 1000, Capacity: One, Bandwidth: maxBandwidth}
		}
		in.Ranks = append(in.Ranks, pr)
		for i := range b {
			cost := int64(10)
			if r == 0 {
				cost = 5000 // rank 0 needs 10 ms of its 1 ms
			}
			in.Samples = append(in.Samples, Sample{ID: uint64(b*r + i), Owner: r, Bytes: 1, Cost: cost})
		}
	}
	if _, err := in.validate(nil); err != nil {
		t.Fatal(err)
	}
	var p Planner
	p.in = in
	p.setup()
	if p.excess[0] <= 0 || p.late != 1 {
		t.Fatalf("rank 0 excess %d, %d late ranks; want rank 0 alone late", p.excess[0], p.late)
	}
	if need := -p.absorb(0, 1); p.room < need {
		t.Fatalf("summed room %d of %d idle ranks, less than the %d rank 0 must shed", p.room, n-1, need)
	}
	p.rescue()
	if p.excess[0] > 0 {
		t.Errorf("rescue left rank 0 late by %d µs", p.excess[0])
	}
}
