package step

import (
	"math"
	"testing"

	"github.com/datahelix/datahelix/internal/planlimits"
	"github.com/datahelix/datahelix/plan"
)

// TestProgressOfExtremeStates checks the conversions that feed a rank's
// progress record at the edges: a queue of absurd estimates keeps a large
// backlog instead of wrapping to none, and a speed factor that is NaN,
// infinite or not positive becomes an integer the record reads sensibly
// on every architecture.
func TestProgressOfExtremeStates(t *testing.T) {
	huge := RankState{DeadlineUS: 1000, Waiting: 40_000 * planlimits.Cost, Workers: 1, Speed: plan.One}.Progress()
	normal := RankState{DeadlineUS: 1000, Waiting: 10_000, Workers: 1, Speed: plan.One}.Progress()
	if huge.Backlog <= normal.Backlog {
		t.Errorf("backlog of 40000 samples at MaxCost = %d, of 10 ms = %d: the huge queue wrapped", huge.Backlog, normal.Backlog)
	}
	for _, tt := range []struct {
		x    float64
		want int64
	}{
		{math.NaN(), 0}, {math.Inf(-1), 0}, {-3, 0}, {0, 0},
		{math.Inf(1), 1 << 50}, {1e300, 1 << 50},
		{float64(plan.One), plan.One}, {2.5 * float64(plan.One), 5 * plan.One / 2},
	} {
		if got := SpeedOf(tt.x); got != tt.want {
			t.Errorf("SpeedOf(%g) = %d, want %d", tt.x, got, tt.want)
		}
	}
}
