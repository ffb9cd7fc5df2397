package plan

import "slices"

// trainSlack: evenTrain stops once the most loaded GPU is within 1/256
// (0.4 %) of the mean; the exchanges after that cost more planning time
// than the step time they save.
const trainSlack = 256

// evenTrain is the last phase, once every rank is on time: it evens out
// the GPU work (Sample.Train) the ranks will train on. Training runs in
// lockstep, so a step lasts as long as its slowest GPU; the planner
// chooses which rank trains which sample, and a rank left with the
// batch's heaviest samples (a shard of 8-frame clips next to one of single
// images, long documents next to short ones) holds every GPU back.
//
// The rank with the most GPU work, taken from a heap, makes the best
// admissible exchange with one of the partners ranks that have the
// least. An exchange is admissible if it moves GPU work t = train(i) -
// train(j) with 0 < t < the pair's gap, so the larger of the two loads
// falls, and if it leaves both ranks' excess — plus, under ModeHelix, the
// transfer time of the sample each receives from away — at or below the
// level max(E, min(E/2, -Params.Margin)), where E <= 0 is the plan's
// largest excess when the phase starts. So no rank becomes late and the
// maximum lateness stays 0. The phase spends bytes and slack: a rank may
// be raised to half the latest rank's slack (E/2), and never closer to
// its deadline than the gate's margin unless the latest rank already was
// (then to E), in every mode that runs it. These exchanges carry no
// lateness gain (Exchange.Gain 0, Exchange.TrainGain the GPU time saved)
// and are not subject to the lateness gate; the transfer time counts in
// the level instead. (Keeping E exactly would forbid every transfer where
// the slack phase had evened the excesses out, which is where it
// succeeds. Spending the slack down to the margin gained the same
// throughput in the simulator, with more risk under wrong estimates.)
// The best exchange brings t nearest half the gap, then moves the fewest
// bytes, then the smallest ids. Each exchange lowers the sum of squared
// loads, so the phase ends; it stops when the heaviest rank admits no
// exchange, when it is within 1/trainSlack of the mean load, or after one
// exchange per sample.
//
// A pair's search sorts t's samples by GPU work once and looks, for each
// sample of s, at the two samples of t on either side of the ideal:
// O(B log B).
func (p *Planner) evenTrain() {
	if p.late != 0 || len(p.excess) < 2 {
		return
	}
	in := p.in
	n, b := len(in.Ranks), in.Batch
	p.train = grow(p.train, n)
	// The mean load, without overflow: a rank's load is at most
	// maxBatch*maxTrain = 2^52, but N of them may not fit in an int64.
	var mean, rem int64
	some := false
	for r := range n {
		t := int64(0)
		for _, k := range p.slots[r*b : (r+1)*b] {
			t += in.Samples[k].Train
		}
		p.train[r] = t
		mean += t / int64(n)
		rem += t % int64(n)
		some = some || t > 0
	}
	if !some {
		return // no GPU times: nothing to even out
	}
	mean += rem / int64(n)
	// Close enough: the heaviest rank within 1/trainSlack of the mean.
	enough := mean + mean/trainSlack
	worst := p.excess[p.hi.top()]
	level := max(worst, min(worst/2, -p.in.Margin))
	p.trainHi.reset(p.train, true)
	p.trainLo.reset(p.train, false)
	for range len(p.where) + 16 {
		s := p.trainHi.top()
		if p.train[s] <= enough {
			return
		}
		p.cands = p.trainLo.firstK(partners, p.cands[:0])
		made := false
		for _, t := range p.cands {
			if p.train[t] >= p.train[s] {
				break
			}
			if x, ok := p.bestTrain(s, t, level); ok {
				p.apply(x)
				p.train[s] -= x.moved
				p.train[t] += x.moved
				p.trainHi.fixPair(s, t)
				p.trainLo.fixPair(s, t)
				made = true
				break
			}
		}
		if !made {
			return
		}
	}
}

// bestTrain finds the preferred admissible exchange (see evenTrain)
// moving GPU work from rank s to the less loaded rank t.
func (p *Planner) bestTrain(s, t int32, level int64) (candidate, bool) {
	in := p.in
	b := in.Batch
	as, at := p.slots[int(s)*b:int(s+1)*b], p.slots[int(t)*b:int(t+1)*b]
	gap := p.train[s] - p.train[t]
	// byTrain holds t's samples as GPU work << 12 | position, ascending:
	// by GPU work, then position in t's decode order (a total order).
	// Train <= maxTrain = 2^40 and position < maxBatch = 2^12.
	p.byTrain = grow(p.byTrain, b)
	for i, k := range at {
		p.byTrain[i] = uint64(in.Samples[k].Train)<<12 | uint64(i)
	}
	slices.Sort(p.byTrain)
	var top candidate
	var topDist int64
	found := false
	for i := range b {
		ti := in.Samples[as[i]].Train
		if ti == 0 || p.kicked[as[i]] {
			continue
		}
		// The samples of t whose GPU work is nearest ti - gap/2: the
		// last below and the first at or above.
		want := ti - gap/2
		at0 := b
		if want <= 0 {
			at0 = 0
		} else if key := uint64(want) << 12; key <= p.byTrain[b-1] {
			at0, _ = slices.BinarySearch(p.byTrain, key)
		}
		for jj := max(at0-1, 0); jj <= at0 && jj < b; jj++ {
			j := int(p.byTrain[jj] & (1<<12 - 1))
			moved := ti - in.Samples[at[j]].Train
			if moved <= 0 || moved >= gap || p.kicked[at[j]] {
				continue
			}
			dist := moved - gap/2
			if dist < 0 {
				dist = -dist
			}
			if found && dist > topDist {
				continue // cannot be preferred: skip the arithmetic
			}
			d := p.cost[as[i]] - p.cost[at[j]]
			x := candidate{s: s, t: t, si: i, ti: j, d: d, es: p.excessWith(s, p.work[s]-d), et: p.excessWith(t, p.work[t]+d)}
			// Under the gate each rank must also wait for the bytes of
			// the sample it receives from away.
			in1, in2 := int64(0), int64(0)
			if in.Mode.gated() {
				in1, in2 = p.arrival(as[i], t), p.arrival(at[j], s)
			}
			if x.et+in1 > level || x.es+in2 > level {
				continue
			}
			c1, _ := p.transfer(as[i], s, t)
			c2, _ := p.transfer(at[j], t, s)
			x.late = max(x.es, x.et, 0)
			x.cost = c1 + c2
			x.bytes = p.bytesDelta(as[i], s, t) + p.bytesDelta(at[j], t, s)
			x.moved = moved
			x.trainGain = p.train[s] - max(p.train[s]-moved, p.train[t]+moved)
			if !found || dist < topDist || dist == topDist && p.better(&x, &top) {
				top, topDist, found = x, dist, true
			}
		}
	}
	return top, found
}
