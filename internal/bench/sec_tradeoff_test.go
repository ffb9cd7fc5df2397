package bench

import (
	"context"
	"math"
	"reflect"
	"testing"
)

func TestPickTradeoff(t *testing.T) {
	pts := []TradeoffPoint{
		{MarginUS: 200, BytesFrac: 0.4, MakespanRatio: 1},
		{MarginUS: 1000, BytesFrac: 0.25, MakespanRatio: 1.02}, // half the bytes, too slow
		{MarginUS: 5000, BytesFrac: 0.19, MakespanRatio: 1.009},
		{MarginUS: 9000, BytesFrac: 0.21, MakespanRatio: 1.001},
	}
	got, ok := PickTradeoff(pts, 0.4)
	if !ok || got.MarginUS != 5000 {
		t.Errorf("PickTradeoff = %+v, %v; want margin 5000 (the fewest bytes within 1 %% makespan)", got, ok)
	}
	if _, ok := PickTradeoff(pts[:2], 0.4); ok {
		t.Error("PickTradeoff found a setting where none moves half the bytes within 1 % makespan")
	}
}

// TestTradeoffCurve checks the curve on fixed seeds: it is deterministic,
// the reference margin's makespan ratio is 1, and a far larger margin
// moves fewer bytes for no shorter makespan.
func TestTradeoffCurve(t *testing.T) {
	a, err := RunTradeoff(context.Background(), 16, 8, 10, 7)
	if err != nil {
		t.Fatal(err)
	}
	b, err := RunTradeoff(context.Background(), 16, 8, 10, 7)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Error("two curves with one seed differ")
	}
	if len(a) != len(TradeoffMarginsUS) {
		t.Fatalf("%d points for %d margins", len(a), len(TradeoffMarginsUS))
	}
	first, last := a[0], a[len(a)-1]
	for _, pt := range a {
		if pt.MarginUS == TradeoffDefaultMarginUS && math.Abs(pt.MakespanRatio-1) > 1e-12 {
			t.Errorf("the reference margin's makespan ratio is %v, want 1", pt.MakespanRatio)
		}
	}
	if !(last.BytesFrac < first.BytesFrac) || last.MakespanRatio < 1 {
		t.Errorf("margin %d µs: bytes %.3f, makespan x%.3f; margin %d µs: bytes %.3f: want fewer bytes for no less makespan",
			last.MarginUS, last.BytesFrac, last.MakespanRatio, first.MarginUS, first.BytesFrac)
	}
}
