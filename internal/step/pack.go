package step

import "slices"

// PackTrain packs a global batch across ranks by GPU work, the way a
// user can without datahelix (a token- or frame-aware batch sampler):
// items are every rank's samples of the step (their Train, the GPU time
// each adds to its step); PackTrain returns, for each of the n ranks, the
// indices into items of the b samples it trains, in index order.
//
// It is greedy LPT with equal counts: the samples by GPU work, largest
// first (ties by id), each to the rank with the least GPU work so far
// that holds fewer than b (ties by the lowest rank). It reads nothing but
// the items, so every rank computes the same packing. len(items) must be
// n*b.
func PackTrain(items []Item, n, b int) [][]int {
	order := make([]int, len(items))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(x, y int) int {
		a, c := &items[x], &items[y]
		switch {
		case a.Train != c.Train:
			if a.Train > c.Train {
				return -1
			}
			return 1
		case a.ID != c.ID:
			if a.ID < c.ID {
				return -1
			}
			return 1
		}
		return x - y
	})
	out := make([][]int, n)
	load := make([]int64, n)
	for _, i := range order {
		best := -1
		for r := range n {
			if len(out[r]) < b && (best < 0 || load[r] < load[best]) {
				best = r
			}
		}
		out[best] = append(out[best], i)
		load[best] += items[i].Train
	}
	for r := range out {
		slices.Sort(out[r])
	}
	return out
}
