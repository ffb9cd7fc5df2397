package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/datahelix/datahelix/internal/bench/report"
	"github.com/datahelix/datahelix/plan"
)

// The bytes-moved trade-off (issue 27 §5): the transfer-cost gate moves a
// sample only when the work it removes exceeds its transfer time plus a
// margin, so the margin trades bytes moved against makespan. The section
// plans the same inputs (VideoPlanInput at TradeoffRanks x TradeoffBatch)
// at each margin of TradeoffMarginsUS and reports the bytes moved and the
// makespan against the planner's default margin.
const (
	TradeoffRanks = 64
	TradeoffBatch = 16
	TradeoffPlans = 40
	// TradeoffDefaultMarginUS is the runtime's margin (datahelix run
	// --margin-us; eval.GateMarginUS), the curve's reference point.
	TradeoffDefaultMarginUS = 200
	// The pick: a margin that moves at most TradeoffMaxBytes of the
	// reference's bytes for at most TradeoffMaxMakespan more makespan.
	TradeoffMaxBytes    = 0.5
	TradeoffMaxMakespan = 0.01
)

// TradeoffMarginsUS are the gate margins of the curve, µs.
var TradeoffMarginsUS = []int64{0, 200, 1000, 5000, 20000, 100000, 500000, 2000000}

// TradeoffPoint is one margin's plans: the mean fraction of the batch's
// bytes moved and the mean makespan over the reference margin's, and over
// plan.LowerBound.
type TradeoffPoint struct {
	MarginUS      int64
	BytesFrac     float64
	MakespanRatio float64 // over the reference margin's makespan, same input
	OverBound     float64 // makespan over plan.LowerBound
}

// RunTradeoff plans the same seeded inputs at every margin.
func RunTradeoff(ctx context.Context, ranks, batch, plans int, seed uint64) ([]TradeoffPoint, error) {
	var pl plan.Planner
	var p plan.Plan
	// The reference's makespan per input.
	ref := make([]float64, plans)
	out := make([]TradeoffPoint, 0, len(TradeoffMarginsUS)+1)
	for pass, margin := range append([]int64{TradeoffDefaultMarginUS}, TradeoffMarginsUS...) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		rng := rand.New(rand.NewPCG(seed, uint64(ranks)<<32|uint64(batch)))
		pt := TradeoffPoint{MarginUS: margin}
		for i := range plans {
			in := VideoPlanInput(rng, ranks, batch)
			in.Step, in.Margin = int64(i), margin
			if err := pl.Compute(in, &p); err != nil {
				return nil, fmt.Errorf("bench: trade-off input %d at margin %d µs: %w", i, margin, err)
			}
			var total int64
			for k := range in.Samples {
				total += in.Samples[k].Bytes
			}
			pt.BytesFrac += float64(p.BytesMoved) / float64(total) / float64(plans)
			pt.OverBound += float64(p.Makespan) / float64(plan.LowerBound(in)) / float64(plans)
			if pass == 0 {
				ref[i] = float64(p.Makespan)
			}
			pt.MakespanRatio += float64(p.Makespan) / ref[i] / float64(plans)
		}
		if pass > 0 {
			out = append(out, pt)
		}
	}
	return out, nil
}

// PickTradeoff returns the margin of pts that moves the fewest bytes
// among those moving at most TradeoffMaxBytes of the reference's bytes
// (refBytes) for at most TradeoffMaxMakespan more makespan; false when
// none does.
func PickTradeoff(pts []TradeoffPoint, refBytes float64) (TradeoffPoint, bool) {
	var best TradeoffPoint
	found := false
	for _, pt := range pts {
		if pt.BytesFrac <= TradeoffMaxBytes*refBytes && pt.MakespanRatio <= 1+TradeoffMaxMakespan && (!found || pt.BytesFrac < best.BytesFrac) {
			best, found = pt, true
		}
	}
	return best, found
}

// tradeoffSection reports the curve and the pick.
func tradeoffSection(ctx context.Context, env *report.SectionEnv) (*report.Section, error) {
	t0 := time.Now()
	pts, err := RunTradeoff(ctx, TradeoffRanks, TradeoffBatch, TradeoffPlans, env.Seed)
	if err != nil {
		return nil, err
	}
	var refBytes float64
	s := &report.Section{Columns: []string{"margin_us", "bytes_moved_frac", "makespan_vs_default", "makespan_over_lower_bound"}}
	for _, pt := range pts {
		if pt.MarginUS == TradeoffDefaultMarginUS {
			refBytes = pt.BytesFrac
		}
		s.Rows = append(s.Rows, []any{pt.MarginUS, pt.BytesFrac, pt.MakespanRatio, pt.OverBound})
	}
	if best, ok := PickTradeoff(pts, refBytes); ok {
		s.Headline = fmt.Sprintf("margin %d µs moves %.1f %% of the bytes (default %d µs: %.1f %%) for %+.2f %% makespan: the setting to take",
			best.MarginUS, 100*best.BytesFrac, TradeoffDefaultMarginUS, 100*refBytes, 100*(best.MakespanRatio-1))
	} else {
		s.Headline = fmt.Sprintf("no margin moves at most half the default's %.1f %% of the bytes for at most 1 %% more makespan: the default stays", 100*refBytes)
	}
	s.Note = fmt.Sprintf("%d plans of %d ranks x %d heavy-tailed video clips (bench plan's inputs) at each margin, means; took %.1f s here",
		TradeoffPlans, TradeoffRanks, TradeoffBatch, time.Since(t0).Seconds())
	return s, nil
}
