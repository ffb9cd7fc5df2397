package plan

import (
	"math"
	"math/bits"
	"slices"
)

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
	net    int64 // delta of the samples away from their owner's node
	// For an exchange of evenTrain: the GPU work moved from s to t and
	// the GPU time the pair's slower rank saves.
	moved, trainGain int64
}

// better reports whether x is preferred to y: less lateness, then fewer
// samples away from their owner's node (a move within a node before one
// across the network), then fewer bytes moved, then the smaller sample
// ids.
func (p *Planner) better(x, y *candidate) bool {
	if x.late != y.late {
		return x.late < y.late
	}
	if x.net != y.net {
		return x.net < y.net
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
// under ModeHelix passes the transfer-cost gate: if a sample lands away
// from its owner, the lateness gained must exceed the transfer time added
// plus the margin.
//
// Moving d = cost(i) - cost(j) µs of reference work from s to t lowers
// s's excess and raises t's; the pair's larger excess is least near the
// crossing D (see crossing), or, if t is on time and would be late there,
// at t's room (the d that fills t up to its deadline). Both slot ranges
// are sorted by decreasing cost, so as cost(i) falls the partner sample
// with d nearest D moves to cheaper samples of t: one pointer sweep
// finds, for every sample of s, the two samples of t on either side of D,
// and only those are evaluated. While the best candidate leaves the pair late, a candidate
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
			if p.nodes {
				x.net = p.netDelta(as[i], s, t) + p.netDelta(at[jj], t, s)
			}
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
// work. Negative, it is the work r must shed to get below level; if even
// no work at all would leave r above level, it is math.MinInt64/2.
func (p *Planner) absorb(r int32, level int64) int64 {
	avail := level - 1 + p.deadline[r] - p.backlog[r]
	if avail < 0 {
		return math.MinInt64 / 2
	}
	h, l := bits.Mul64(uint64(avail), uint64(p.capacity[r]))
	if h >= One {
		return math.MaxInt64 // more than any batch holds
	}
	q := h<<(64-oneBits) | l>>oneBits // h:l / One, One = 2^oneBits
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
// bytes at the smaller bandwidth of the two ranks, on the path between
// them (memory within a node, the network across). Latency is charged per
// sample, although the runtime sends one message per pair of ranks: the
// gate errs on the side of not moving.
func (p *Planner) transfer(k, from, to int32) (time int64, away bool) {
	owner := p.owner(k)
	return p.arrivalFrom(k, owner, to) - p.arrivalFrom(k, owner, from), to != owner
}

// arrival is the predicted transfer time of sample k from its owner to
// rank r: 0 at the owner.
func (p *Planner) arrival(k, r int32) int64 {
	return p.arrivalFrom(k, p.owner(k), r)
}

// arrivalFrom is arrival for sample k of rank owner.
func (p *Planner) arrivalFrom(k, owner, r int32) int64 {
	if r == owner {
		return 0
	}
	bw, lat := p.in.Ranks[owner].path(&p.in.Ranks[r])
	return lat + (p.size[k]*One+bw-1)/bw
}

// netDelta returns the change in the samples away from their owner's
// node when sample k moves from rank from to rank to: 0 on one node.
func (p *Planner) netDelta(k, from, to int32) int64 {
	owner := &p.in.Ranks[p.owner(k)]
	return int64(btoi(owner.Node != p.in.Ranks[to].Node) - btoi(owner.Node != p.in.Ranks[from].Node))
}

// bytesDelta returns the change in bytes away from owners when sample k
// moves from rank from to rank to.
func (p *Planner) bytesDelta(k, from, to int32) int64 {
	switch p.owner(k) {
	case to:
		return -p.size[k]
	case from:
		return p.size[k]
	}
	return 0
}

// apply makes exchange x and restores every ordering it touches.
func (p *Planner) apply(x candidate) {
	b := p.in.Batch
	i, j := p.slots[int(x.s)*b+x.si], p.slots[int(x.t)*b+x.ti]
	p.move(x.s, x.si, x.t, x.ti, x.es, x.et)
	p.bytes += x.bytes
	p.exchanges = append(p.exchanges, Exchange{A: i, B: j, From: x.s, To: x.t, Gain: x.gain, Cost: x.cost, TrainGain: x.trainGain})
}

// undo reverts exchange x, the last one made.
func (p *Planner) undo(x Exchange) {
	b := p.in.Batch
	ai := slices.Index(p.slots[int(x.To)*b:int(x.To+1)*b], x.A)
	bi := slices.Index(p.slots[int(x.From)*b:int(x.From+1)*b], x.B)
	d := p.cost[x.A] - p.cost[x.B]
	p.bytes += p.bytesDelta(x.A, x.To, x.From) + p.bytesDelta(x.B, x.From, x.To)
	p.move(x.To, ai, x.From, bi, p.excessWith(x.To, p.work[x.To]-d), p.excessWith(x.From, p.work[x.From]+d))
}

// move swaps the sample at position si of rank s with the one at
// position ti of rank t, giving the ranks the new excesses es and et.
func (p *Planner) move(s int32, si int, t int32, ti int, es, et int64) {
	b := p.in.Batch
	as, at := p.slots[int(s)*b:int(s+1)*b], p.slots[int(t)*b:int(t+1)*b]
	i, j := as[si], at[ti]
	d := p.cost[i] - p.cost[j]
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
	p.hi.fixPair(s, t)
	p.lo.fixPair(s, t)
	p.minCost[s], p.minCost[t] = p.cost[as[b-1]], p.cost[at[b-1]]
	p.cheap.fixPair(s, t)
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
