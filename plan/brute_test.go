package plan

import (
	"math/rand/v2"
	"testing"
)

// bruteForce returns, by enumerating every assignment that gives each
// rank exactly B samples, the best lexicographic objective and the least
// makespan.
func bruteForce(in *Input) (best objective, minMakespan int64) {
	n, b := len(in.Ranks), in.Batch
	assign := make([]int32, n*b)
	count := make([]int, n)
	found := false
	var rec func(k int)
	rec = func(k int) {
		if k == len(assign) {
			o := evaluate(in, assign)
			if !found || o.less(best) {
				best = o
			}
			if !found || o.makespan < minMakespan {
				minMakespan = o.makespan
			}
			found = true
			return
		}
		for r := range n {
			if count[r] < b {
				count[r]++
				assign[k] = int32(r)
				rec(k + 1)
				count[r]--
			}
		}
	}
	rec(0)
	return best, minMakespan
}

// TestAgainstBruteForce compares the planner with the optimum of the
// lexicographic objective on every small instance family it draws (N <= 3,
// B <= 3). The stated bound, checked on every instance:
//
//   - with as many late ranks as the optimum, the max lateness is within
//     one sample's time (largest cost on the slowest rank) of it;
//   - with more late ranks than the optimum, the max lateness is no
//     larger: the planner never raises the larger lateness of a pair to
//     save a late rank (the gate's "and of the maximum finish" rule), while
//     the optimum may pile work on a rank that is late anyway;
//   - at least 95 % of instances are optimal in (late ranks, max lateness);
//   - when the optimum has every rank on time, the plan's largest
//     (negative) lateness is within one sample's time of the optimum's:
//     the planner keeps balancing for slack (see slack).
func TestAgainstBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	iters := 1500
	if testing.Short() {
		iters = 300
	}
	for _, mode := range []Mode{ModeOracle, ModeHelixNoGate, ModeStatic} {
		optimal, traded, behind, slackOptimal := 0, 0, 0, 0
		for it := range iters {
			n, b := 1+rng.IntN(3), 1+rng.IntN(3)
			o := genOpts{mode: mode, maxCost: 1 + rng.Int64N(100), progress: rng.IntN(2) == 0, deadline: rng.Int64N(200)}
			in := genInput(rng, n, b, o)
			if !o.progress {
				for r := range in.Ranks {
					in.Ranks[r].Capacity = One
				}
			}
			p, err := Compute(in)
			if err != nil {
				t.Fatal(err)
			}
			want, minMakespan := bruteForce(in)
			if lb := LowerBound(in); lb > minMakespan {
				t.Fatalf("%s instance %d: LowerBound %d exceeds the least makespan %d", mode, it, lb, minMakespan)
			}
			slack := int64(0) // one sample's time on the slowest rank
			for r := range in.Ranks {
				_, _, c := model(in, r)
				for _, s := range in.Samples {
					slack = max(slack, (s.Cost*One+c-1)/c)
				}
			}
			switch {
			case p.LateRanks < want.late || p.LateRanks == want.late && p.MaxLateness < want.maxLate:
				t.Fatalf("%s instance %d: plan {late %d, max lateness %d} beats the brute-force optimum %v", mode, it, p.LateRanks, p.MaxLateness, want)
			case p.LateRanks == want.late && p.MaxLateness == want.maxLate:
				optimal++
				if want.late == 0 && p.MaxExcess-want.maxExcess > slack {
					t.Errorf("%s instance %d: every rank on time with max excess %d µs, optimum %d µs: want within one sample's %d µs",
						mode, it, p.MaxExcess, want.maxExcess, slack)
				}
				if want.late == 0 && p.MaxExcess == want.maxExcess {
					slackOptimal++
				}
			case p.LateRanks > want.late:
				traded++
				if p.MaxLateness > want.maxLate {
					t.Errorf("%s instance %d: plan {late %d, max lateness %d}, optimum %v: more late ranks and more lateness", mode, it, p.LateRanks, p.MaxLateness, want)
				}
			default:
				behind++
				if p.MaxLateness-want.maxLate > slack {
					t.Errorf("%s instance %d: max lateness %d µs, optimum %d µs: got %d, want within one sample's %d µs", mode, it, p.MaxLateness, want.maxLate, p.MaxLateness-want.maxLate, slack)
				}
			}
		}
		t.Logf("%s: %d instances: %d optimal (%d of them on time with the least max excess), %d traded a late rank for less lateness, %d behind by at most one sample",
			mode, iters, optimal, slackOptimal, traded, behind)
		if optimal*100 < 95*iters {
			t.Errorf("%s: %d of %d instances optimal, want at least 95 %%", mode, optimal, iters)
		}
	}
}
