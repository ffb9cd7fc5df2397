package sim

import (
	"cmp"
	"math/bits"
	"slices"
)

// workScale is the fixed-point scale of a shared group's remaining work:
// a core shared by n threads advances each by workScale/n per µs.
const workScale = 1 << 16

// cpuGroup is a set of cores that the workers of some ranks share. A
// group whose cores outnumber its workers, with no other process
// competing, gives each worker a core of its own; a shared one runs each
// of its busy workers at num/den of a core.
type cpuGroup struct {
	cores    int64
	shared   bool
	last     int64 // when the running tasks' rem was brought up to date
	running  []*simTask
	num, den int64
}

// share sets the group's rate on its own: its cores divided equally
// among its busy workers, at most a core each.
func (g *cpuGroup) share() {
	n := int64(len(g.running))
	g.num, g.den = min(g.cores, n), max(n, 1)
}

// maxOthers bounds CPUShare.Others (1024 threads) so that the other
// threads' core time stays within 64 bits over a year of virtual time.
const maxOthers = 1024 * OtherUnit

// otherThreads are other processes' threads moving between the cores of
// every group: the groups' rates then depend on each other.
type otherThreads struct {
	n      int64 // OtherUnit units
	groups []*cpuGroup
	// num/den is each thread's share of a core now; last is when cpu,
	// their core time in µs times OtherUnit, was brought up to date.
	num, den, last, cpu int64
	// before holds the groups' rates while reshare changes them.
	before [][2]int64
}

// update brings the other threads' core time up to now.
func (o *otherThreads) update(now int64) {
	if now > o.last {
		o.cpu += mulDiv((now-o.last)*o.n, o.num, o.den)
	}
	o.last = now
}

// share sets every group's rate and the other threads' by max-min fair
// sharing of all the cores: the level L every thread runs at, but the
// workers of a group that cannot give them L (cores/busy < L), which
// share its cores; L solves n L + sum of min(busy L, cores) = all cores,
// or is 1 when everything fits. Rationals in OtherUnit units keep it
// exact.
func (o *otherThreads) share() {
	var total, busy int64 // cores; pinned threads
	var open []*cpuGroup  // groups with busy workers, by cores/busy
	for _, g := range o.groups {
		total += g.cores
		if n := int64(len(g.running)); n > 0 {
			busy += min(n, g.cores)
			open = append(open, g)
		}
	}
	if o.n+busy*OtherUnit <= total*OtherUnit {
		o.num, o.den = 1, 1
		for _, g := range o.groups {
			g.share()
		}
		return
	}
	slices.SortStableFunc(open, func(a, b *cpuGroup) int {
		x, y := a.cores*int64(len(b.running)), b.cores*int64(len(a.running))
		return cmp.Compare(x, y)
	})
	// Saturate the groups of least cores per worker while they cannot
	// reach the level of the rest.
	num, den := total*OtherUnit, o.n
	for _, g := range open {
		den += int64(len(g.running)) * OtherUnit
	}
	for _, g := range open {
		n := int64(len(g.running))
		g.num, g.den = g.cores, n
		// cores/n < num/den: the group is saturated below the level.
		if !(g.cores*den < n*num) {
			break
		}
		num -= g.cores * OtherUnit
		den -= n * OtherUnit
	}
	o.num, o.den = num, max(den, 1)
	for _, g := range open {
		if n := int64(len(g.running)); !(g.cores*o.den < n*o.num) {
			g.num, g.den = o.num, o.den
		}
	}
}

// update brings the remaining work of the group's running tasks up to
// the engine's clock.
func (g *cpuGroup) update(now int64) {
	if len(g.running) > 0 && now > g.last {
		done := mulDiv((now-g.last)*workScale, g.num, g.den)
		for _, t := range g.running {
			t.rem = max(t.rem-done, 0)
		}
	}
	g.last = now
}

// mulDiv is a*b/c, rounded down, for a, b >= 0 and c > 0 whose quotient
// fits in an int64, through a 128-bit product.
func mulDiv(a, b, c int64) int64 {
	q, _ := mulDivRem(a, b, c)
	return q
}

// mulDivUp is mulDiv rounded up.
func mulDivUp(a, b, c int64) int64 {
	q, r := mulDivRem(a, b, c)
	if r > 0 {
		q++
	}
	return q
}

func mulDivRem(a, b, c int64) (q, r int64) {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	uq, ur := bits.Div64(hi, lo, uint64(c))
	return int64(uq), int64(ur)
}

// rankGroups returns each rank's core group under cfg (a group of its
// own with a core per worker, or cfg.CPUs's), every group, and whether
// any group is shared.
func rankGroups(cfg *Config) (perRank, all []*cpuGroup, shared bool) {
	perRank = make([]*cpuGroup, cfg.Ranks)
	if cfg.CPUs == nil {
		for r := range perRank {
			perRank[r] = &cpuGroup{cores: int64(cfg.Workers)}
		}
		return perRank, perRank, false
	}
	gs := make([]*cpuGroup, len(cfg.CPUs.Cores))
	workers := make([]int, len(gs))
	for _, g := range cfg.CPUs.Group {
		workers[g] += cfg.Workers
	}
	for g := range gs {
		gs[g] = &cpuGroup{cores: int64(cfg.CPUs.Cores[g]), shared: workers[g] > cfg.CPUs.Cores[g]}
		gs[g].shared = gs[g].shared || cfg.CPUs.Others > 0
		shared = shared || gs[g].shared
	}
	for r, g := range cfg.CPUs.Group {
		perRank[r] = gs[g]
	}
	return perRank, gs, shared
}
