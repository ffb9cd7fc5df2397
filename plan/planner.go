package plan

import (
	"math"
	"math/bits"
	"slices"
)

// partners is how many of the ranks with the least excess the search tries
// as the other side of an exchange with the worst rank, best first; if
// none admits an exchange, it tries as many of the ranks holding the
// cheapest samples (what a rank stuck with one huge sample needs).
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

	// The model the mode plans with, per rank.
	deadline, backlog, capacity []int64
	work                        []int64 // summed cost of the rank's samples, µs of reference CPU
	excess                      []int64 // finish - deadline

	cost []int64 // cost[k] is Samples[k].Cost, dense for the inner loops

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
	lateRanks []int32  // phase-2 scratch
	exchanges []Exchange
	keys      [64]uint64 // sortDecode scratch
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
	if p.ids, err = in.validate(p.ids); err != nil {
		return err
	}
	p.in = in
	defer func() { p.in = nil }()
	p.setup()
	if in.Mode != ModeLocal {
		p.rescue()
		p.balance()
	}
	p.emit(out)
	return nil
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
	p.cost = grow(p.cost, n*b)
	p.kicked = grow(p.kicked, n*b)
	clear(p.kicked)
	for k := range in.Samples {
		p.cost[k] = in.Samples[k].Cost
	}
	p.late, p.room = 0, 0
	for r := range n {
		w := int64(0)
		for k := r * b; k < (r+1)*b; k++ {
			p.slots[k], p.where[k] = int32(k), int32(r)
			w += in.Samples[k].Cost
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
		p.minCost[r] = in.Samples[p.slots[(r+1)*b-1]].Cost
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
	sx, sy := &p.in.Samples[x], &p.in.Samples[y]
	switch {
	case sx.Cost != sy.Cost:
		if sx.Cost > sy.Cost {
			return -1
		}
		return 1
	case sx.ID != sy.ID:
		if sx.ID < sy.ID {
			return -1
		}
		return 1
	}
	return int(x - y)
}

// sortDecode sorts a rank's slots into decode order. For the batch sizes
// of training it insertion-sorts packed keys — cost descending, then
// position — held in a local array, then restores the id order inside
// runs of equal cost; beyond, it uses the library's sort.
func (p *Planner) sortDecode(r []int32) {
	if len(r) > len(p.keys) {
		slices.SortFunc(r, p.cmpDecode)
		return
	}
	keys := p.keys[:len(r)]
	for i, k := range r {
		keys[i] = uint64(MaxCost-p.cost[k])<<12 | uint64(i) // cost <= MaxCost, i < 4096
	}
	for i := 1; i < len(keys); i++ {
		for j := i; j > 0 && keys[j] < keys[j-1]; j-- {
			keys[j], keys[j-1] = keys[j-1], keys[j]
		}
	}
	var src [64]int32
	copy(src[:], r)
	for i, key := range keys {
		r[i] = src[key&(1<<12-1)]
	}
	for i := 1; i < len(r); i++ { // equal costs: ids ascending
		for j := i; j > 0 && p.cost[r[j]] == p.cost[r[j-1]] && p.cmpDecode(r[j], r[j-1]) < 0; j-- {
			r[j], r[j-1] = r[j-1], r[j]
		}
	}
}

// excessWith is rank r's predicted finish minus its deadline if its
// samples summed to work µs of reference CPU.
func (p *Planner) excessWith(r int32, work int64) int64 {
	c := p.capacity[r]
	return p.backlog[r] + (work*One+c-1)/c - p.deadline[r]
}

// balance is the pre-balance: while some rank is late, it takes the
// latest one and makes the best admissible exchange with a partner (see
// improveWorst), until no rank is late or the latest admits no exchange.
// Exchanges made after the objective last improved (ones that helped a
// rank while another stayed as late) only cost bytes, so they are undone.
func (p *Planner) balance() {
	limit := effort*len(p.where) + 16
	bestLate, bestMax, bestBytes, keep := p.late, max(p.excess[p.hi.top()], 0), p.bytes, len(p.exchanges)
	kicks := 0
	for range limit {
		if p.excess[p.hi.top()] <= 0 {
			break
		}
		if !p.improveWorst() {
			if kicks == maxKicks || p.in.Mode.gated() || !p.kick() {
				break
			}
			kicks++
		}
		if m := max(p.excess[p.hi.top()], 0); p.late < bestLate || p.late == bestLate && (m < bestMax || m == bestMax && p.bytes < bestBytes) {
			bestLate, bestMax, bestBytes, keep = p.late, m, p.bytes, len(p.exchanges)
		}
	}
	for len(p.exchanges) > keep {
		p.undo(p.exchanges[len(p.exchanges)-1])
		p.exchanges = p.exchanges[:len(p.exchanges)-1]
	}
}

// maxKicks bounds the relocations (see kick) per plan.
const maxKicks = 8

// kick relocates the largest sample g of the latest rank s, when s is
// stuck, to the rank that would finish g soonest, in exchange for that
// rank's largest sample. A single exchange cannot do this when g dwarfs
// the other samples: the host is left holding its own work and g, and
// only the exchanges that follow unload it. So a kick may make things
// worse for a while; balance keeps the best state it saw and undoes the
// rest. A kicked sample stays where it was kicked to, or the next
// exchange would often send it straight back. Kicks are made only where
// transfers are free (not under ModeHelix): a kick has no gain of its own
// to set against the gate.
func (p *Planner) kick() bool {
	b := p.in.Batch
	s := p.hi.top()
	g := p.slots[int(s)*b]
	if p.kicked[g] {
		return false
	}
	cg := p.cost[g]
	host, best := int32(-1), p.excess[s]
	for r := range int32(len(p.work)) {
		if r == s {
			continue
		}
		if e := p.excessWith(r, cg); e < best {
			host, best = r, e
		}
	}
	if host < 0 {
		return false
	}
	j := p.slots[int(host)*b]
	d := cg - p.cost[j]
	if d <= 0 {
		return false
	}
	x := candidate{s: s, t: host, es: p.excessWith(s, p.work[s]-d), et: p.excessWith(host, p.work[host]+d)}
	x.late = max(x.es, x.et, 0)
	x.gain = p.excess[s] - x.late
	c1, _ := p.transfer(g, s, host)
	c2, _ := p.transfer(j, host, s)
	x.cost = c1 + c2
	x.bytes = p.bytesDelta(g, s, host) + p.bytesDelta(j, host, s)
	p.kicked[g] = true
	p.apply(x)
	return true
}

// improveWorst makes an admissible exchange between the latest rank s and
// a partner, and reports whether it made one. It tries, in order and
// taking the first partner that admits one: the ranks with the least
// excess, the ranks holding the cheapest samples, and the partners that
// scan found recently; then it scans every rank.
func (p *Planner) improveWorst() bool {
	s := p.hi.top()
	p.cands = p.lo.firstK(partners, p.cands[:0])
	p.cands = p.cheap.firstK(partners, p.cands)
	p.cands = append(p.cands, p.recent...)
	for i, t := range p.cands {
		if t == s || p.excess[t] >= p.excess[s] || slices.Contains(p.cands[:i], t) {
			continue
		}
		if x, ok := p.best(s, t); ok {
			p.apply(x)
			return true
		}
	}
	x, ok := p.scan(s)
	if !ok {
		return false
	}
	p.apply(x)
	p.remember(x.t)
	return true
}

// scan ranks every rank as a partner of s by the most work it could take
// from s — the least of what it can absorb below s's excess and the spread
// between s's dearest sample and its own cheapest — and returns the
// preferred exchange with the partners ranked first. O(N) arithmetic
// plus a few exchange searches.
func (p *Planner) scan(s int32) (candidate, bool) {
	b := p.in.Batch
	level := p.excess[s]
	dearest := p.cost[p.slots[int(s)*b]]
	// p.top holds up to partners ranks, by bound descending then rank.
	p.top, p.topUB = p.top[:0], p.topUB[:0]
	for t := range int32(len(p.work)) {
		if t == s || p.excess[t] >= level {
			continue
		}
		ub := min(p.absorb(t, level), dearest-p.minCost[t])
		if ub <= 0 || len(p.top) == partners && ub <= p.topUB[partners-1] {
			continue
		}
		i := len(p.top)
		if i < partners {
			p.top, p.topUB = append(p.top, t), append(p.topUB, ub)
		} else {
			i--
		}
		for ; i > 0 && p.topUB[i-1] < ub; i-- {
			p.top[i], p.topUB[i] = p.top[i-1], p.topUB[i-1]
		}
		p.top[i], p.topUB[i] = t, ub
	}
	var top candidate
	found := false
	for _, t := range p.top {
		if x, ok := p.best(s, t); ok && (!found || p.better(&x, &top)) {
			top, found = x, true
		}
	}
	return top, found
}

// remember puts t at the front of the recent partners, keeping at most
// partners of them.
func (p *Planner) remember(t int32) {
	if i := slices.Index(p.recent, t); i >= 0 {
		p.recent = slices.Delete(p.recent, i, i+1)
	}
	if len(p.recent) == partners {
		p.recent = p.recent[:partners-1]
	}
	p.recent = slices.Insert(p.recent, 0, t)
}

// rescue brings late ranks back on time where other ranks' slack allows,
// least late first, because the objective counts late ranks before it
// weighs lateness; balance then lowers the lateness of the rest. A late
// rank makes exchanges with the ranks with the most slack, each lowering
// its lateness and leaving the partner on time, until it is on time; if it
// cannot get there within rescueTries exchanges they are undone, since
// they would spend slack and bytes without removing a late rank.
func (p *Planner) rescue() {
	if p.late == 0 || p.excess[p.lo.top()] >= 0 {
		return
	}
	p.lateRanks = p.lateRanks[:0]
	for r, e := range p.excess {
		if e > 0 {
			p.lateRanks = append(p.lateRanks, int32(r))
		}
	}
	slices.SortFunc(p.lateRanks, func(a, b int32) int {
		if ea, eb := p.excess[a], p.excess[b]; ea != eb {
			if ea < eb {
				return -1
			}
			return 1
		}
		return int(a - b)
	})
	for _, s := range p.lateRanks {
		if p.room <= 0 {
			return // no slack left anywhere
		}
		if -p.absorb(s, 1) > p.room {
			continue // the others' slack cannot take what s must shed
		}
		mark := len(p.exchanges)
		for range rescueTries {
			if p.excess[s] <= 0 || !p.helpLate(s) {
				break
			}
		}
		for p.excess[s] > 0 && len(p.exchanges) > mark {
			p.undo(p.exchanges[len(p.exchanges)-1])
			p.exchanges = p.exchanges[:len(p.exchanges)-1]
		}
	}
}

// roomOf is the reference work rank r can still take before it is late,
// 0 if it is late: its share of p.room.
func (p *Planner) roomOf(r int32) int64 {
	if p.excess[r] > 0 {
		return 0
	}
	return p.absorb(r, 1)
}

// helpLate makes the best admissible exchange between the late rank s and
// one of the ranks with the most slack, and reports whether it made one.
func (p *Planner) helpLate(s int32) bool {
	p.cands = p.lo.firstK(partners, p.cands[:0])
	for _, t := range p.cands {
		if p.excess[t] >= 0 {
			break
		}
		if x, ok := p.best(s, t); ok {
			p.apply(x)
			return true
		}
	}
	return false
}

// candidate is a possible exchange between rank s (giving sample
// slots[s*B+si]) and rank t (giving slots[t*B+ti]).
type candidate struct {
	s, t   int32
	si, ti int // positions in the ranks' slot ranges
	es, et int64
	d      int64 // reference work moved from s to t
	late   int64 // max(es, et, 0): the pair's lateness after the exchange
	gain   int64
	cost   int64 // transfer time delta
	bytes  int64 // bytes-away-from-owner delta
}

// better reports whether x is preferred to y: less lateness, then fewer
// bytes moved, then the smaller sample ids.
func (p *Planner) better(x, y *candidate) bool {
	if x.late != y.late {
		return x.late < y.late
	}
	if x.bytes != y.bytes {
		return x.bytes < y.bytes
	}
	b := p.in.Batch
	xa, ya := p.in.Samples[p.slots[int(x.s)*b+x.si]].ID, p.in.Samples[p.slots[int(y.s)*b+y.si]].ID
	if xa != ya {
		return xa < ya
	}
	return p.in.Samples[p.slots[int(x.t)*b+x.ti]].ID < p.in.Samples[p.slots[int(y.t)*b+y.ti]].ID
}

// best finds the preferred admissible exchange between the late rank s
// and a rank t with less excess. An exchange is admissible if it lowers
// the pair's lateness (which is s's), does not make a rank late, and
// under ModeHelix passes the
// transfer-cost gate: if a sample lands away from its owner, the
// lateness gained must exceed the transfer time added plus the margin.
//
// Moving d = cost(i) - cost(j) µs of reference work from s to t lowers
// s's excess and raises t's; the pair's larger excess is least near the
// crossing D (see crossing), or, if t is on time and would be late there,
// at t's room (the d that fills t up to its deadline). Both slot ranges are sorted by decreasing
// cost, so as cost(i) falls the partner sample with d nearest D moves to
// cheaper samples of t: one pointer sweep finds, for every sample of s,
// the two samples of t on either side of D, and only those are
// evaluated. While the best candidate leaves the pair late, a candidate
// farther from D on the same side cannot beat it and is skipped; once one
// brings the pair on time, only candidates moving fewer bytes can. O(B)
// comparisons, few divisions.
func (p *Planner) best(s, t int32) (candidate, bool) {
	lateS := p.excess[s]
	if lateS <= 0 || p.excess[t] >= lateS {
		return candidate{}, false
	}
	b := p.in.Batch
	as, at := p.slots[int(s)*b:int(s+1)*b], p.slots[int(t)*b:int(t+1)*b]
	cost := p.cost
	ws, wt := p.work[s], p.work[t]
	lateBefore := 1 + btoi(p.excess[t] > 0)
	minT := cost[at[b-1]]
	// t must stay below s's lateness: it absorbs at most maxD.
	maxD := p.absorb(t, lateS)
	if maxD <= 0 || cost[as[0]] <= minT {
		return candidate{}, false
	}
	dstar := crossing(lateS-p.excess[t], p.capacity[s], p.capacity[t])
	if p.excess[t] <= 0 {
		// t must stay on time while s is late: it absorbs at most its slack.
		dstar = min(dstar, p.absorb(t, 1))
	}
	var top candidate
	found := false
	// The admissible d nearest dstar found so far below and above it.
	below, above := int64(0), int64(math.MaxInt64)
	j := 0
	for i := range b {
		ci := cost[as[i]]
		onTime := found && top.late == 0
		if reach := ci - minT; reach <= 0 || !onTime && reach < below {
			break // later samples of s are cheaper still: no nearer d
		}
		for j < b && ci-cost[at[j]] <= dstar {
			j++
		}
		// at[j-1] gives the largest d <= dstar, at[j] the smallest d > dstar.
		for jj := max(j-1, 0); jj <= j && jj < b; jj++ {
			d := ci - cost[at[jj]]
			if d <= 0 || d > maxD || !onTime && (d < below || d > above) || p.kicked[as[i]] || p.kicked[at[jj]] {
				continue
			}
			bytes := p.bytesDelta(as[i], s, t) + p.bytesDelta(at[jj], t, s)
			if onTime && bytes > top.bytes {
				continue
			}
			x := candidate{s: s, t: t, si: i, ti: jj, d: d, es: p.excessWith(s, ws-d), et: p.excessWith(t, wt+d), bytes: bytes}
			x.late = max(x.es, x.et, 0)
			if x.late >= lateS {
				continue
			}
			lateAfter := btoi(x.es > 0) + btoi(x.et > 0)
			if lateAfter > lateBefore {
				continue
			}
			x.gain = lateS - x.late
			c1, away1 := p.transfer(as[i], s, t)
			c2, away2 := p.transfer(at[jj], t, s)
			x.cost = c1 + c2
			if (away1 || away2) && p.in.Mode.gated() && x.gain <= x.cost+p.in.Margin {
				continue
			}
			if d <= dstar {
				below = d
			} else {
				above = d
			}
			if !found || p.better(&x, &top) {
				top, found = x, true
				onTime = top.late == 0
			}
		}
	}
	return top, found
}

// absorb returns how much more reference work rank r can take and keep
// its excess below level: ⌊(level-1+deadline-backlog)*capacity/One⌋ -
// work, negative if none.
func (p *Planner) absorb(r int32, level int64) int64 {
	avail := level - 1 + p.deadline[r] - p.backlog[r]
	if avail < 0 {
		return -1
	}
	h, l := bits.Mul64(uint64(avail), uint64(p.capacity[r]))
	if h >= One {
		return math.MaxInt64 // more than any batch holds
	}
	q, _ := bits.Div64(h, l, One)
	return int64(min(q, math.MaxInt64)) - p.work[r]
}

// crossing returns ⌊diff*cs*ct / (One*(cs+ct))⌋: the reference work
// moved from a rank of capacity cs to one of capacity ct, diff µs of
// excess apart, that equalizes their excesses if rounding is ignored. It
// uses 128-bit intermediates and saturates at MaxInt64.
func crossing(diff, cs, ct int64) int64 {
	if diff <= 0 {
		return 0
	}
	h1, l1 := bits.Mul64(uint64(diff), uint64(cs)) // < 2^95
	h2, l2 := bits.Mul64(l1, uint64(ct))
	h2 += h1 * uint64(ct) // h1 < 2^31, ct <= 2^32: no overflow
	den := uint64(One) * uint64(cs+ct)
	if h2 >= den {
		return math.MaxInt64
	}
	q, _ := bits.Div64(h2, l2, den)
	return int64(min(q, math.MaxInt64))
}

// transfer returns the change in predicted transfer time when sample k
// moves from rank from to rank to, and whether k lands away from its
// owner. A sample away from its owner costs the larger latency plus its
// bytes at the smaller bandwidth of the two ranks. Latency is charged per
// sample, although the runtime sends one message per pair of ranks: the
// gate errs on the side of not moving.
func (p *Planner) transfer(k, from, to int32) (time int64, away bool) {
	owner := k / int32(p.in.Batch)
	at := func(r int32) int64 {
		if r == owner {
			return 0
		}
		po, pr := &p.in.Ranks[owner], &p.in.Ranks[r]
		bw := min(po.Bandwidth, pr.Bandwidth)
		return max(po.Latency, pr.Latency) + (p.in.Samples[k].Bytes*One+bw-1)/bw
	}
	return at(to) - at(from), to != owner
}

// bytesDelta returns the change in bytes away from owners when sample k
// moves from rank from to rank to.
func (p *Planner) bytesDelta(k, from, to int32) int64 {
	owner := k / int32(p.in.Batch)
	switch owner {
	case to:
		return -p.in.Samples[k].Bytes
	case from:
		return p.in.Samples[k].Bytes
	}
	return 0
}

// apply makes exchange x and restores every ordering it touches.
func (p *Planner) apply(x candidate) {
	b := p.in.Batch
	i, j := p.slots[int(x.s)*b+x.si], p.slots[int(x.t)*b+x.ti]
	p.move(x.s, x.si, x.t, x.ti, x.es, x.et)
	p.bytes += x.bytes
	p.exchanges = append(p.exchanges, Exchange{A: i, B: j, From: x.s, To: x.t, Gain: x.gain, Cost: x.cost})
}

// undo reverts exchange x, the last one made.
func (p *Planner) undo(x Exchange) {
	b := p.in.Batch
	ai := slices.Index(p.slots[int(x.To)*b:int(x.To+1)*b], x.A)
	bi := slices.Index(p.slots[int(x.From)*b:int(x.From+1)*b], x.B)
	d := p.in.Samples[x.A].Cost - p.in.Samples[x.B].Cost
	p.bytes += p.bytesDelta(x.A, x.To, x.From) + p.bytesDelta(x.B, x.From, x.To)
	p.move(x.To, ai, x.From, bi, p.excessWith(x.To, p.work[x.To]-d), p.excessWith(x.From, p.work[x.From]+d))
}

// move swaps the sample at position si of rank s with the one at
// position ti of rank t, giving the ranks the new excesses es and et.
func (p *Planner) move(s int32, si int, t int32, ti int, es, et int64) {
	b := p.in.Batch
	as, at := p.slots[int(s)*b:int(s+1)*b], p.slots[int(t)*b:int(t+1)*b]
	i, j := as[si], at[ti]
	d := p.in.Samples[i].Cost - p.in.Samples[j].Cost
	p.late -= btoi(p.excess[s] > 0) + btoi(p.excess[t] > 0)
	p.room -= p.roomOf(s) + p.roomOf(t)
	p.work[s] -= d
	p.work[t] += d
	p.excess[s], p.excess[t] = es, et
	p.late += btoi(es > 0) + btoi(et > 0)
	p.room += p.roomOf(s) + p.roomOf(t)
	p.where[i], p.where[j] = t, s
	as[si], at[ti] = j, i
	p.resort(as, si)
	p.resort(at, ti)
	p.hi.fix(s)
	p.hi.fix(t)
	p.lo.fix(s)
	p.lo.fix(t)
	p.minCost[s], p.minCost[t] = p.in.Samples[as[b-1]].Cost, p.in.Samples[at[b-1]].Cost
	p.cheap.fix(s)
	p.cheap.fix(t)
}

// resort moves the sample at position i of the sorted range r to its place.
func (p *Planner) resort(r []int32, i int) {
	for i > 0 && p.cmpDecode(r[i], r[i-1]) < 0 {
		r[i], r[i-1] = r[i-1], r[i]
		i--
	}
	for i+1 < len(r) && p.cmpDecode(r[i+1], r[i]) < 0 {
		r[i], r[i+1] = r[i+1], r[i]
		i++
	}
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
	out.buildMoves(in)
	out.Hash = out.hash()
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
