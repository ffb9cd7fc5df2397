package plan

import (
	"math/bits"
	"slices"
)

// LowerBound returns a lower bound on the Makespan of any assignment of
// in's samples, under the model in.Mode plans with (for ModeStatic: no
// backlog, capacity One). It is the largest of
//
//   - the largest backlog: a rank cannot finish before its queue drains;
//   - total work plus backlog over total capacity:
//     (Σ cost*One + Σ backlog*capacity) / Σ capacity, since a weighted
//     average of the finishes cannot exceed their maximum;
//   - for each rank, its backlog plus the B cheapest costs, since every
//     rank trains on exactly B samples; and for sets of k ranks (the
//     prefixes of a few orders, slowest first among them), their backlog
//     plus the k*B cheapest costs over their total capacity;
//   - for m = 1, 2, ... up to 256, the earliest time T by which the ranks
//     can finish m samples each costing at least g_m, the m-th largest
//     cost: rank r fits ⌊(T-backlog)*capacity/(g_m*One)⌋ of them. For
//     m = 1 this is the largest cost on the rank that would finish it
//     first; larger m account for several huge samples competing for the
//     few fast ranks.
//
// It ignores transfers and is exact for no plan in particular; it is the
// yardstick of the planner's quality. in must be valid.
func LowerBound(in *Input) int64 {
	n := len(in.Ranks)
	backlog := func(r int) int64 {
		if in.Mode == ModeStatic {
			return 0
		}
		return in.Ranks[r].Backlog
	}
	capacity := func(r int) int64 {
		if in.Mode == ModeStatic {
			return One
		}
		return in.Ranks[r].Capacity
	}
	costs := make([]int64, len(in.Samples))
	var total uint64
	for k := range in.Samples {
		costs[k] = in.Samples[k].Cost
		total += uint64(costs[k])
	}
	slices.Sort(costs)
	cheapest := int64(0)
	for _, c := range costs[:in.Batch] {
		cheapest += c
	}
	// numerator Σ cost*One + Σ backlog*capacity as a 128-bit hi:lo.
	hi, lo := bits.Mul64(total, One)
	var sumCap uint64
	lb := int64(0)
	for r := range n {
		l, c := backlog(r), capacity(r)
		ph, pl := bits.Mul64(uint64(l), uint64(c))
		var carry uint64
		lo, carry = bits.Add64(lo, pl, 0)
		hi += ph + carry
		sumCap += uint64(c)
		lb = max(lb, l, l+ceilDiv(cheapest*One, c))
	}
	// Σ cost*One/Σ cap ≤ B*maxCost*One and the backlog term ≤ maxTime, so
	// the quotient fits and hi < sumCap.
	q, rem := bits.Div64(hi, lo, sumCap)
	lb = max(lb, int64(q)+int64(min(rem, 1)))

	// Any k ranks hold k*B samples, so at least the k*B cheapest: over any
	// set K of ranks, Σ_K capacity*(T-backlog) >= One * (the |K|*B
	// cheapest costs). The sets tried are the prefixes of three orders:
	// slowest first, most backlog first, and largest single-rank bound
	// first.
	prefix := make([]uint64, len(costs)+1) // prefix[i]: sum of the i cheapest
	for i, c := range costs {
		prefix[i+1] = prefix[i] + uint64(c)
	}
	order := make([]int, n)
	for _, key := range []func(r int) int64{
		func(r int) int64 { return -capacity(r) },
		func(r int) int64 { return backlog(r) },
		func(r int) int64 { return backlog(r) + ceilDiv(cheapest*One, capacity(r)) },
	} {
		for r := range order {
			order[r] = r
		}
		slices.SortFunc(order, func(a, b int) int {
			ka, kb := key(a), key(b)
			if ka != kb {
				if ka > kb {
					return -1
				}
				return 1
			}
			return a - b
		})
		var bhi, blo, caps uint64 // Σ backlog*capacity (128-bit), Σ capacity
		for k, r := range order {
			l, c := backlog(r), capacity(r)
			ph, pl := bits.Mul64(uint64(l), uint64(c))
			var carry uint64
			blo, carry = bits.Add64(blo, pl, 0)
			bhi += ph + carry
			caps += uint64(c)
			wh, wl := bits.Mul64(prefix[(k+1)*in.Batch], One)
			nlo, carry := bits.Add64(wl, blo, 0)
			nhi := wh + bhi + carry
			q, rem := bits.Div64(nhi, nlo, caps)
			lb = max(lb, int64(q)+int64(min(rem, 1)))
		}
	}

	// fits reports how many samples of cost g the ranks can finish by T,
	// counting up to m.
	fits := func(T, g int64, m int) int {
		count := 0
		for r := range n {
			l, c := backlog(r), capacity(r)
			if T <= l {
				continue
			}
			h, lw := bits.Mul64(uint64(T-l), uint64(c))
			den := uint64(g) * One
			if h >= den {
				return m // more than 2^64 of them
			}
			j, _ := bits.Div64(h, lw, den)
			count += int(min(j, uint64(m)))
			if count >= m {
				return m
			}
		}
		return count
	}
	for m := 1; m <= min(256, len(costs)); m++ {
		g := costs[len(costs)-m]
		if g == 0 || fits(lb, g, m) >= m {
			continue // T_m <= lb: no better bound from m
		}
		// fits(lb) < m <= fits(hiT): the least T with fits >= m is in (lb, hiT].
		// At maxTime + 2^48 µs every rank fits 4095 samples of maxCost.
		loT, hiT := lb, int64(maxTime+int64(maxCost)*One*maxBatch)
		for hiT-loT > 1 {
			mid := loT + (hiT-loT)/2
			if fits(mid, g, m) >= m {
				hiT = mid
			} else {
				loT = mid
			}
		}
		lb = hiT
	}
	return lb
}

// ceilDiv returns ⌈a/b⌉ for a ≥ 0, b > 0.
func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }
