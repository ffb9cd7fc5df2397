package plan

import "slices"

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
// exchange would often send it straight back. The mark survives an undo:
// harmless to balance, and evenTrain, the phase after it, leaves marked
// samples where they are. Kicks are made only where
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
	// The first partner, the rank with the least excess, usually admits
	// an exchange: on one node it comes first in the list, so it is
	// tried before the list is built. (best changes nothing when it
	// finds none, so trying it twice changes nothing either.)
	tried := int32(-1)
	if !p.nodes {
		if t := p.lo.top(); t != s && p.excess[t] < p.excess[s] {
			if x, ok := p.best(s, t); ok {
				p.apply(x)
				return true
			}
			tried = t
		}
	}
	p.cands = p.lo.firstK(partners, p.cands[:0])
	p.cands = p.cheap.firstK(partners, p.cands)
	p.cands = append(p.cands, p.recent...)
	p.sameNodeFirst(s)
	for i, t := range p.cands {
		if t == s || p.excess[t] >= p.excess[s] || slices.Contains(p.cands[:i], t) || i == 0 && t == tried {
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

// sameNodeFirst moves the candidate partners on s's node ahead of the
// others, keeping each group's order: an exchange within a node is tried
// before one across the network. On one node it changes nothing.
func (p *Planner) sameNodeFirst(s int32) {
	if !p.nodes {
		return
	}
	node := p.in.Ranks[s].Node
	slices.SortStableFunc(p.cands, func(a, b int32) int {
		return btoi(p.in.Ranks[b].Node == node) - btoi(p.in.Ranks[a].Node == node)
	})
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
// its lateness, until it is on time; if it cannot get there within
// rescueTries exchanges, or a partner became late instead, they are
// undone, since they would spend slack and bytes without removing a late
// rank.
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
		mark, late := len(p.exchanges), p.late
		for range rescueTries {
			if p.excess[s] <= 0 || !p.helpLate(s) {
				break
			}
		}
		// Undone too when s is on time but a partner became late in its
		// place: the exchanges lower the larger excess of the two ranks,
		// which lets the partner end up late by less than s was, and the
		// objective, counting late ranks before lateness, would pay bytes
		// for nothing (fuzzed: rank 2 late by 48.5 ms handed a 656 ms
		// sample to rank 0, which became late by 32.1 ms).
		for (p.excess[s] > 0 || p.late >= late) && len(p.exchanges) > mark {
			p.undo(p.exchanges[len(p.exchanges)-1])
			p.exchanges = p.exchanges[:len(p.exchanges)-1]
		}
	}
}

// roomOf is the reference work rank r can still take before it is late,
// 0 if it is late, at most roomCap: its share of p.room.
func (p *Planner) roomOf(r int32) int64 {
	if p.excess[r] > 0 {
		return 0
	}
	return min(p.absorb(r, 1), roomCap)
}

// roomCap bounds one rank's share of p.room so that the sum cannot wrap:
// a rank's room reaches 2^57 at the input limits (a 12-day deadline at
// 65,536 CPUs), and 128 such ranks overflowed int64, while maxRanks
// ranks of roomCap sum to 2^60. The cap changes no decision: rescue
// compares p.room with what a late rank must shed, which is at most its
// work, at most maxBatch*maxCost, so a rank holding roomCap alone covers
// it with or without the cap. (A late rank whose backlog is past its
// deadline sheds the absorb sentinel, which no room covers: no exchange
// can make it on time, and rescue would undo every one it tried.)
const roomCap = maxBatch * maxCost

// helpLate makes the best admissible exchange between the late rank s and
// one of the ranks with the most slack, and reports whether it made one.
func (p *Planner) helpLate(s int32) bool {
	// As in improveWorst, the first partner is tried before the list is
	// built.
	tried := int32(-1)
	if !p.nodes {
		if t := p.lo.top(); p.excess[t] < 0 {
			if x, ok := p.best(s, t); ok {
				p.apply(x)
				return true
			}
			tried = t
		}
	}
	p.cands = p.lo.firstK(partners, p.cands[:0])
	p.sameNodeFirst(s)
	for i, t := range p.cands {
		if p.excess[t] >= 0 || i == 0 && t == tried {
			continue
		}
		if x, ok := p.best(s, t); ok {
			p.apply(x)
			return true
		}
	}
	return false
}

// slack keeps lowering the largest excess once every rank is on time.
// Lateness, as in scheduling theory, is finish minus deadline and may be
// negative; the smallest maximum lateness is then the largest margin by
// which the last rank meets its deadline. That margin is what absorbs the
// errors of the predictions (cost estimates, and a fluid model of a rank's
// workers that ignores how samples pack onto them), so a plan that stops
// as soon as every rank is predicted on time leaves ranks on the edge and
// late in practice. Every exchange still lowers the larger excess of the
// two ranks, so no rank becomes late, and under ModeHelix still passes the
// gate: the margin it adds must exceed the transfer time plus
// Params.Margin.
//
// It reuses balance by shifting every deadline earlier by the same amount,
// enough that every rank stays late by at least 1 µs whatever work it
// holds (a rank's excess is at least its backlog minus its deadline): the
// order of the excesses, and so every exchange balance compares, is
// unchanged, the late-rank count stays N, and balance minimizes the
// largest excess.
func (p *Planner) slack() {
	if p.late != 0 || len(p.excess) < 2 {
		return
	}
	floor := p.backlog[0] - p.deadline[0]
	for r := range p.excess {
		floor = min(floor, p.backlog[r]-p.deadline[r])
	}
	delta := 1 - floor
	p.shift(delta)
	p.balance()
	p.shift(-delta)
}

// shift moves every deadline delta µs earlier (later if negative),
// adjusting the excesses and the late and room counts. A uniform shift
// keeps every heap's order; the heaps' copies of the keys are refreshed.
func (p *Planner) shift(delta int64) {
	p.late, p.room = 0, 0
	for r := range p.excess {
		p.deadline[r] -= delta
		p.excess[r] += delta
		if p.excess[r] > 0 {
			p.late++
		}
		p.room += p.roomOf(int32(r))
	}
	p.hi.rekey()
	p.lo.rekey()
}
