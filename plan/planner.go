package plan

import (
	"math"
	"math/bits"
	"slices"
)

// partners is how many ranks of each kind improveWorst tries as the
// other side of an exchange (least excess, cheapest sample, found by scan
// lately), and how many scan evaluates.
const partners = 4

// rescueTries bounds the exchanges rescue spends on one late rank before
// it gives up on the rank and undoes them.
const rescueTries = 8

// effort caps the exchanges balance makes per sample of the input. Inputs
// drawn from real workloads stop far below it (a few hundred exchanges
// for 32,768 samples); it bounds the time spent on adversarial ones, such
// as capacities spread 6x with backlogs larger than a batch, where every
// sample wants to move and each exchange gains little.
const effort = 1

// Planner computes plans, keeping its scratch memory between calls so
// that planning every step allocates nothing once the sizes settle. The
// zero value is ready to use. A Planner is not safe for concurrent use.
type Planner struct {
	in *Input // during Compute only
	// nodes reports whether the input's ranks are on more than one node:
	// only then do partners and exchanges look at nodes.
	nodes bool

	// The model the mode plans with, per rank.
	deadline, backlog, capacity []int64
	work                        []int64 // summed cost of the rank's samples, µs of reference CPU
	excess                      []int64 // finish - deadline

	cost []int64 // cost[k] is Samples[k].Cost, dense for the inner loops
	size []int64 // size[k] is Samples[k].Bytes, likewise
	// costsOf is the input whose costs and sizes Compute's checks copied
	// into cost and size, during Compute only.
	costsOf *Input
	// ownerMul and ownerShift divide a sample index by the batch size
	// (see owner).
	ownerMul   uint64
	ownerShift uint

	// slots[r*B : (r+1)*B] are rank r's samples, kept in decode order.
	slots []int32
	// where[k] is the rank sample k is assigned to.
	where []int32

	hi, lo    rankHeap // worst rank on top; rank with most slack on top
	cheap     rankHeap // rank holding the cheapest sample on top
	minCost   []int64  // cost of each rank's cheapest sample
	kicked    []bool   // per sample: relocated by kick already
	late      int      // ranks with excess > 0
	room      int64    // summed roomOf of all ranks
	bytes     int64    // bytes away from their owners
	ids       []uint32 // validation scratch
	cands     []int32  // partner scratch
	recent    []int32  // partners scan found lately, most recent first
	top       []int32  // scan scratch: best-bounded partners
	topUB     []int64  // and their bounds
	lateRanks []int32  // rescue scratch
	exchanges []Exchange
	keys      [64]uint64 // sortDecode scratch

	// evenTrain: GPU work per rank, heaviest and lightest on top, and a
	// pair search's scratch.
	train            []int64
	trainHi, trainLo rankHeap
	byTrain          []uint64
}

// Compute plans one batch with a fresh Planner. Use a Planner to reuse
// memory across steps.
func Compute(in *Input) (*Plan, error) {
	var p Planner
	out := new(Plan)
	if err := p.Compute(in, out); err != nil {
		return nil, err
	}
	return out, nil
}

// Compute validates in and writes its plan into out, reusing out's slices.
// An invalid input gives an error wrapping ErrInput and leaves out
// unspecified. The result depends only on in: no clock, no randomness, no
// goroutines, no map iteration, integer arithmetic only.
func (p *Planner) Compute(in *Input, out *Plan) error {
	var err error
	if p.ids, err = in.validateInto(p.ids, &p.cost, &p.size); err != nil {
		return err
	}
	p.costsOf = in
	p.compute(in, out)
	return nil
}

// compute plans the valid input in into out.
func (p *Planner) compute(in *Input, out *Plan) {
	p.in = in
	defer func() { p.in, p.costsOf = nil, nil }()
	p.nodes = slices.ContainsFunc(in.Ranks, func(r Progress) bool { return r.Node != in.Ranks[0].Node })
	p.setup()
	if in.Mode != ModeLocal {
		p.rescue()
		p.balance()
		p.slack()
		if in.Mode != ModeStatic && !in.NoTrain {
			p.evenTrain()
		}
	}
	p.emit(out)
}

// setup loads the mode's model and puts every sample with its owner.
func (p *Planner) setup() {
	in := p.in
	n, b := len(in.Ranks), in.Batch
	p.deadline, p.backlog, p.capacity = grow(p.deadline, n), grow(p.backlog, n), grow(p.capacity, n)
	p.work, p.excess = grow(p.work, n), grow(p.excess, n)
	for r := range in.Ranks {
		if in.Mode == ModeStatic {
			p.deadline[r], p.backlog[r], p.capacity[r] = 0, 0, One
		} else {
			pr := &in.Ranks[r]
			p.deadline[r], p.backlog[r], p.capacity[r] = pr.Deadline, pr.Backlog, pr.Capacity
		}
	}
	p.slots, p.where = grow(p.slots, n*b), grow(p.where, n*b)
	if p.costsOf != in { // else validateInto copied them
		p.cost, p.size = grow(p.cost, n*b), grow(p.size, n*b)
		for k := range in.Samples {
			p.cost[k], p.size[k] = in.Samples[k].Cost, in.Samples[k].Bytes
		}
	}
	p.ownerShift, p.ownerMul = ownerDivisor(b)
	p.kicked = grow(p.kicked, n*b)
	clear(p.kicked)
	p.late, p.room = 0, 0
	for r := range n {
		w := int64(0)
		for k := r * b; k < (r+1)*b; k++ {
			p.slots[k], p.where[k] = int32(k), int32(r)
			w += p.cost[k]
		}
		p.work[r] = w
		p.excess[r] = p.excessWith(int32(r), w)
		if p.excess[r] > 0 {
			p.late++
		}
		p.room += p.roomOf(int32(r))
		p.sortDecode(p.slots[r*b : (r+1)*b])
	}
	p.minCost = grow(p.minCost, n)
	for r := range n {
		p.minCost[r] = p.cost[p.slots[(r+1)*b-1]]
	}
	p.hi.reset(p.excess, true)
	p.lo.reset(p.excess, false)
	p.cheap.reset(p.minCost, false)
	p.exchanges = p.exchanges[:0]
	p.recent = p.recent[:0]
	p.bytes = 0
}

// cmpDecode orders samples for decoding: larger cost first, then smaller
// id, then smaller index, a total order.
func (p *Planner) cmpDecode(x, y int32) int {
	if cx, cy := p.cost[x], p.cost[y]; cx != cy {
		if cx > cy {
			return -1
		}
		return 1
	}
	sx, sy := &p.in.Samples[x], &p.in.Samples[y]
	switch {
	case sx.ID != sy.ID:
		if sx.ID < sy.ID {
			return -1
		}
		return 1
	}
	return int(x - y)
}

// sortDecode sorts a rank's slots into decode order. For the batch sizes
// of training it sorts packed keys — cost descending, then position —
// held in a local array with a sorting network, then restores the id
// order inside runs of equal cost; beyond, it uses the library's sort.
func (p *Planner) sortDecode(r []int32) {
	if len(r) > len(p.keys) {
		slices.SortFunc(r, p.cmpDecode)
		return
	}
	// The network of the next power of two; the padding keys, all ones,
	// sort after every real key.
	net := decodeNets[bits.Len(uint(len(r)-1))]
	keys := &p.keys
	for i, k := range r {
		keys[i] = uint64(maxCost-p.cost[k])<<12 | uint64(i) // cost <= maxCost, i < 4096
	}
	for i := len(r); i < 1<<bits.Len(uint(len(r)-1)); i++ {
		keys[i] = math.MaxUint64
	}
	for _, c := range net {
		x, y := keys[c[0]&63], keys[c[1]&63]
		keys[c[0]&63], keys[c[1]&63] = min(x, y), max(x, y)
	}
	var src [64]int32
	copy(src[:], r)
	for i := range r {
		r[i] = src[keys[i]&(1<<12-1)]
	}
	for i := 1; i < len(r); i++ { // equal costs: ids ascending
		for j := i; j > 0 && p.cost[r[j]] == p.cost[r[j-1]] && p.cmpDecode(r[j], r[j-1]) < 0; j-- {
			r[j], r[j-1] = r[j-1], r[j]
		}
	}
}

// decodeNets[m] is Batcher's odd-even merge sort of 2^m keys as a list
// of compare-exchanges (lower index gets the smaller key), for
// sortDecode: branch-free, where an insertion sort mispredicts about one
// branch per move.
var decodeNets = func() (nets [7][][2]uint8) {
	for m := range nets {
		n := 1 << m
		for p := 1; p < n; p <<= 1 {
			for k := p; k >= 1; k >>= 1 {
				for j := k % p; j+k < n; j += 2 * k {
					for i := 0; i < min(k, n-j-k); i++ {
						if (i+j)/(2*p) == (i+j+k)/(2*p) {
							nets[m] = append(nets[m], [2]uint8{uint8(i + j), uint8(i + j + k)})
						}
					}
				}
			}
		}
	}
	return nets
}()

// owner returns the rank that owns sample k, k / Batch, without a
// division: ⌊k*m / 2^s⌋ with s = 28 + ⌈log2 B⌉ and m = ⌈2^s / B⌉ is
// exact for every k < 2^28 (Granlund and Montgomery), and the input
// limits keep k below maxRanks*maxBatch = 2^28; k*m < 2^57.
func (p *Planner) owner(k int32) int32 {
	return int32(uint64(k) * p.ownerMul >> p.ownerShift)
}

// ownerDivisor returns s and m of owner for batch size b.
func ownerDivisor(b int) (s uint, m uint64) {
	s = 28 + uint(bits.Len(uint(b-1)))
	return s, (1<<s + uint64(b) - 1) / uint64(b)
}

// excessWith is rank r's predicted finish minus its deadline if its
// samples summed to work µs of reference CPU.
func (p *Planner) excessWith(r int32, work int64) int64 {
	c := p.capacity[r]
	return p.backlog[r] + (work*One+c-1)/c - p.deadline[r]
}

// emit writes the plan.
func (p *Planner) emit(out *Plan) {
	in := p.in
	n, b := len(in.Ranks), in.Batch
	out.Step, out.Mode, out.Ranks, out.Batch = in.Step, in.Mode, n, b
	out.Assign = append(out.Assign[:0], p.where...)
	out.Order = append(out.Order[:0], p.slots...)
	out.Finish, out.Lateness = grow(out.Finish, n), grow(out.Lateness, n)
	out.LateRanks, out.MaxLateness = 0, 0
	out.MaxExcess, out.Makespan = p.excess[0], 0
	for r := range n {
		e := p.excess[r]
		out.Finish[r] = e + p.deadline[r]
		out.Lateness[r] = max(e, 0)
		if e > 0 {
			out.LateRanks++
		}
		out.MaxLateness = max(out.MaxLateness, out.Lateness[r])
		out.MaxExcess = max(out.MaxExcess, e)
		out.Makespan = max(out.Makespan, out.Finish[r])
	}
	out.Exchanges = append(out.Exchanges[:0], p.exchanges...)
	out.buildMoves(p.size)
	out.Hash = out.hash()
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
