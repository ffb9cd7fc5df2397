package plan

import (
	"cmp"
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestRankHeapAgainstSort checks top and firstK against sorting the ranks
// by (key, rank) after random key changes.
func TestRankHeapAgainstSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	for it := range 200 {
		n := 1 + rng.IntN(50)
		key := make([]int64, n)
		for r := range key {
			key[r] = rng.Int64N(20) - 10 // many ties
		}
		var q rankHeap
		isMax := it%2 == 0
		q.reset(key, isMax)
		for range 30 {
			r := rng.IntN(n)
			key[r] = rng.Int64N(20) - 10
			q.fix(int32(r))
			want := make([]int32, n)
			for i := range want {
				want[i] = int32(i)
			}
			slices.SortFunc(want, func(a, b int32) int {
				if key[a] != key[b] {
					if isMax {
						return cmp.Compare(key[b], key[a])
					}
					return cmp.Compare(key[a], key[b])
				}
				return cmp.Compare(a, b)
			})
			k := rng.IntN(n + 2)
			got := q.firstK(k, []int32{-1})
			if got[0] != -1 || !slices.Equal(got[1:], want[:min(k, n)]) {
				t.Fatalf("n=%d max=%v firstK(%d) = %v, want [-1 %v]", n, isMax, k, got, want[:min(k, n)])
			}
			if q.top() != want[0] {
				t.Fatalf("top = %d, want %d", q.top(), want[0])
			}
		}
	}
}

// TestCrossingAgainstBig checks crossing's 128-bit arithmetic against
// math/big, including the saturating cases.
func TestCrossingAgainstBig(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 18))
	cases := [][3]int64{{0, One, One}, {-5, One, One}, {1, 1, 1}, {math.MaxInt64, maxCapacity, maxCapacity}, {1 << 62, 1, maxCapacity}}
	for range 2000 {
		cases = append(cases, [3]int64{rng.Int64N(1 << uint(1+rng.IntN(62))), 1 + rng.Int64N(maxCapacity), 1 + rng.Int64N(maxCapacity)})
	}
	for _, c := range cases {
		diff, cs, ct := c[0], c[1], c[2]
		want := int64(0)
		if diff > 0 {
			num := new(big.Int).Mul(big.NewInt(diff), big.NewInt(cs))
			num.Mul(num, big.NewInt(ct))
			q := num.Quo(num, new(big.Int).Mul(big.NewInt(One), big.NewInt(cs+ct)))
			want = math.MaxInt64
			if q.IsInt64() {
				want = q.Int64()
			}
		}
		if got := crossing(diff, cs, ct); got != want {
			t.Fatalf("crossing(%d, %d, %d) = %d, want %d", diff, cs, ct, got, want)
		}
	}
}

// TestAbsorbAgainstModel checks absorb against its definition: the
// largest extra work keeping the excess below the level.
func TestAbsorbAgainstModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 20))
	var p Planner
	p.deadline, p.backlog, p.capacity, p.work = make([]int64, 1), make([]int64, 1), make([]int64, 1), make([]int64, 1)
	for range 5000 {
		p.deadline[0], p.backlog[0] = rng.Int64N(1_000_000), rng.Int64N(1_000_000)
		p.capacity[0], p.work[0] = 1+rng.Int64N(16*One), rng.Int64N(10_000_000)
		level := rng.Int64N(3_000_000) - 1_000_000
		got := p.absorb(0, level)
		fits := func(d int64) bool { return p.work[0]+d >= 0 && p.excessWith(0, p.work[0]+d) < level }
		switch {
		case got >= 0 && (!fits(got) || fits(got+1)):
			t.Fatalf("absorb = %d with deadline %d, backlog %d, capacity %d, work %d, level %d: not the largest fitting work",
				got, p.deadline[0], p.backlog[0], p.capacity[0], p.work[0], level)
		case got < 0 && fits(0):
			t.Fatalf("absorb = %d but the current work already fits below level %d", got, level)
		}
	}
}
