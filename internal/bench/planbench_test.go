package bench

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/datahelix/datahelix/internal/planlimits"
)

func TestRunPlanBench(t *testing.T) {
	res, err := RunPlanBench(PlanBenchConfig{Ranks: 6, Batch: 8, Plans: 20, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	if res.Ranks != 6 || res.Batch != 8 || res.Samples != 48 {
		t.Errorf("shape = %d x %d = %d, want 6 x 8 = 48", res.Ranks, res.Batch, res.Samples)
	}
	if res.PlanUSP50 <= 0 || res.PlanUSP99 < res.PlanUSP50 {
		t.Errorf("plan_us p50 %v, p99 %v: want 0 < p50 <= p99", res.PlanUSP50, res.PlanUSP99)
	}
	if res.AllocsPerPlan < 0 || res.AllocsPerPlan > 5 {
		t.Errorf("allocs_per_plan = %v, want a reused planner to allocate (almost) nothing", res.AllocsPerPlan)
	}
	if r := res.MakespanOverLowerBoundP50; r < 1 || r > 1.05 {
		t.Errorf("makespan_over_lower_bound_p50 = %v, want in [1, 1.05]", r)
	}
	if f := res.BytesMovedFracP50; f < 0 || f > 1 {
		t.Errorf("bytes_moved_frac_p50 = %v, want in [0, 1]", f)
	}
	if !strings.Contains(res.String(), "6 ranks x 8 = 48 samples") {
		t.Errorf("summary %q does not name the shape", res.String())
	}
}

// TestPlanBenchJSONKeys pins the JSON object to exactly the keys the
// issue lists.
func TestPlanBenchJSONKeys(t *testing.T) {
	data, err := json.Marshal(PlanBenchResult{WallUSP50: 1})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	var got []string
	for k := range m {
		got = append(got, k)
	}
	sort.Strings(got)
	want := []string{"allocs_per_plan", "batch", "bytes_moved_frac_p50", "makespan_over_lower_bound_p50", "plan_us_p50", "plan_us_p99", "ranks", "samples"}
	if !slices.Equal(got, want) {
		t.Errorf("JSON keys = %v, want %v", got, want)
	}
}

func TestRunPlanBenchRejects(t *testing.T) {
	for _, cfg := range []PlanBenchConfig{
		{Ranks: 0, Batch: 8, Plans: 1},
		{Ranks: planlimits.Ranks + 1, Batch: 8, Plans: 1},
		{Ranks: 8, Batch: 0, Plans: 1},
		{Ranks: 8, Batch: 8, Plans: 0},
	} {
		if _, err := RunPlanBench(cfg); err == nil {
			t.Errorf("RunPlanBench(%+v) succeeded, want an error", cfg)
		}
	}
}

func TestVideoPlanInput(t *testing.T) {
	in := VideoPlanInput(rand.New(rand.NewPCG(1, 2)), 64, 32)
	if err := in.Validate(); err != nil {
		t.Fatal(err)
	}
	again := VideoPlanInput(rand.New(rand.NewPCG(1, 2)), 64, 32)
	if !reflect.DeepEqual(in, again) {
		t.Fatal("the same seed draws different inputs")
	}
	var sizes, costs []int64
	for _, s := range in.Samples {
		sizes = append(sizes, s.Bytes)
		costs = append(costs, s.Cost)
	}
	slices.Sort(sizes)
	slices.Sort(costs)
	q := func(xs []int64, f float64) int64 { return xs[int(f*float64(len(xs)-1))] }
	// Real clips: a few hundred KB to tens of MB.
	if lo, mid, hi := q(sizes, 0.05), q(sizes, 0.5), q(sizes, 0.95); lo < 50_000 || mid < 500_000 || mid > 20_000_000 || hi > 150_000_000 {
		t.Errorf("compressed sizes p5 %d, p50 %d, p95 %d bytes: want about 100 KB, a few MB, tens of MB", lo, mid, hi)
	}
	// Heavy tail: the dearest clips cost many times the median.
	if mid, top := q(costs, 0.5), q(costs, 0.99); top < 8*mid {
		t.Errorf("cost p99 %d µs is less than 8x the median %d µs: not heavy-tailed", top, mid)
	}
	for r, p := range in.Ranks {
		if p.Deadline <= p.Backlog || p.Bandwidth != benchBandwidth || p.Latency != benchLatency {
			t.Fatalf("rank %d progress %+v: want deadline after the backlog, 10 GB/s, 5 µs", r, p)
		}
	}
}
