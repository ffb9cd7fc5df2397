package plan

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestMakespanNearLowerBound checks the quality goal on heavy-tailed
// inputs larger than brute force can reach: with free transfers
// (ModeOracle) and every deadline 0, so that max lateness is the makespan
// and every rank counts as late, the median makespan is within 5 % of
// LowerBound when capacities differ by up to 1.5x and backlogs by up to
// half a second, and no input is beyond 1.25x. When capacities differ
// 17x, most samples must change rank and the search stops at its effort
// cap: the stated bound there is a median within 1.5x.
func TestMakespanNearLowerBound(t *testing.T) {
	shapes := [][2]int{{4, 8}, {16, 8}, {64, 16}, {256, 32}}
	if !testing.Short() {
		shapes = append(shapes, [2]int{1024, 16})
	}
	var pl Planner
	var p Plan
	for _, nb := range shapes {
		n, b := nb[0], nb[1]
		rng := rand.New(rand.NewPCG(uint64(n), uint64(b)))
		for _, c := range []struct {
			sigma, spread    float64
			wantP50, wantMax float64
		}{{0.6, 1.5, 1.05, 1.25}, {1.2, 1.5, 1.05, 1.25}, {0.6, 17, 1.5, 2}} {
			var ratios []float64
			for range 15 {
				in := genInput(rng, n, b, genOpts{mode: ModeOracle, heavy: true, sigma: c.sigma, progress: true, capSpread: c.spread})
				for r := range in.Ranks {
					in.Ranks[r].Deadline = 0
				}
				if err := pl.Compute(in, &p); err != nil {
					t.Fatal(err)
				}
				lb := LowerBound(in)
				if p.Makespan < lb {
					t.Fatalf("N=%d B=%d: makespan %d below the lower bound %d", n, b, p.Makespan, lb)
				}
				ratios = append(ratios, float64(p.Makespan)/float64(lb))
			}
			slices.Sort(ratios)
			p50, worst := ratios[len(ratios)/2], ratios[len(ratios)-1]
			t.Logf("N=%d B=%d σ=%.1f capacity spread %.1fx: makespan/lower bound p50 %.4f, max %.4f", n, b, c.sigma, c.spread, p50, worst)
			if p50 > c.wantP50 || worst > c.wantMax {
				t.Errorf("N=%d B=%d σ=%.1f capacity spread %.1fx: makespan/lower bound p50 %.4f, max %.4f; want <= %.2f, <= %.2f",
					n, b, c.sigma, c.spread, p50, worst, c.wantP50, c.wantMax)
			}
		}
	}
}
