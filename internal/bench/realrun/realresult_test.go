package realrun

import (
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/datahelix/datahelix/internal/bench/eval"
	"github.com/datahelix/datahelix/internal/bench/workload"
	"github.com/datahelix/datahelix/internal/metrics"
	"github.com/datahelix/datahelix/internal/step"
)

func testSummaries() []metrics.Summary {
	mape := 0.12
	return []metrics.Summary{
		{Loader: "torch", Ranks: 4, Steps: 40, Batch: 16, Workers: 2, Misses: 10, MissRate: 0.0625, GPUWaitS: 3.2, GPUWaitFrac: 0.08, ThroughputSPS: 250,
			WallS: 10, BytesMovedPerStep: 0, PlanUSP50: 0, CostMAPE: &mape, BatchesHash: "00000000deadbeef"},
		{Loader: "helix", Ranks: 4, Steps: 40, Batch: 16, Workers: 2, Misses: 2, MissRate: 0.0125, GPUWaitS: 1, GPUWaitFrac: 0.025, ThroughputSPS: 270,
			WallS: 9.5, BytesMovedPerStep: 12345, PlanUSP50: 80, BatchesHash: "00000000deadbeef"},
	}
}

func TestParseRunSummaries(t *testing.T) {
	want := testSummaries()
	data, err := json.MarshalIndent(want, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseRunSummaries(data)
	if err != nil || len(got) != 2 || got[1].BytesMovedPerStep != 12345 || *got[0].CostMAPE != 0.12 || got[0].BatchesHash != "00000000deadbeef" {
		t.Fatalf("got %+v, %v", got, err)
	}
	for _, tt := range []struct{ name, data, err string }{
		{"empty list", "[]", "holds no loader"},
		{"not JSON", "loader torch", "summary"},
		{"unknown loader", `[{"loader":"pytorch","ranks":1}]`, `unknown loader "pytorch"`},
		{"oracle is a loader name", `[{"loader":"oracle","ranks":0}]`, "inconsistent"},
		{"miss rate above 1", `[{"loader":"torch","ranks":2,"miss_rate":1.5}]`, "inconsistent"},
		{"negative wait", `[{"loader":"torch","ranks":2,"gpu_wait_frac":-0.1}]`, "inconsistent"},
	} {
		if _, err := ParseRunSummaries([]byte(tt.data)); err == nil || !errors.Is(err, ErrReal) || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("%s: error %v, want an ErrReal error containing %q", tt.name, err, tt.err)
		}
	}
}

// traceOf writes records as datahelix run's --trace does.
func traceOf(t testing.TB, loader string, recs []metrics.StepRecord) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	for _, r := range recs {
		if err := enc.Encode(traceLine{Loader: loader, StepRecord: r}); err != nil {
			t.Fatal(err)
		}
	}
	return b.String()
}

// testRecords are 2 ranks x steps records: 100 ms steps, rank 1 waits
// 30 ms (a miss) on the steps listed in late.
func testRecords(steps int, late ...int) []metrics.StepRecord {
	var out []metrics.StepRecord
	for s := range steps {
		for r := range 2 {
			rec := metrics.StepRecord{Step: int64(s), Rank: r, RequestUS: 1000 + int64(s)*100_000, ComputeUS: 70_000, Samples: 4, Hash: uint64(s*2 + r)}
			if r == 1 && slices.Contains(late, s) {
				rec.WaitUS, rec.Miss = 30_000, true
			}
			rec.DeliverUS = rec.RequestUS + rec.WaitUS
			out = append(out, rec)
		}
	}
	return out
}

func TestParseRunTrace(t *testing.T) {
	torch, helix := testRecords(5, 1), testRecords(3)
	got, err := ParseRunTrace(strings.NewReader(traceOf(t, "torch", torch) + "\n" + traceOf(t, "helix", helix)))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got["torch"], torch) || !slices.Equal(got["helix"], helix) || len(got) != 2 {
		t.Errorf("got %d loaders, torch %d records, helix %d; want the records written", len(got), len(got["torch"]), len(got["helix"]))
	}
	for _, tt := range []struct{ name, data, err string }{
		{"bad JSON on line 2", traceOf(t, "torch", torch[:1]) + "{\"loader\":\n", "line 2"},
		{"unknown loader", `{"loader":"x","step":0,"rank":0}`, `unknown loader "x"`},
		{"negative step", `{"loader":"helix","step":-1,"rank":0}`, "step -1"},
		{"digest not a string", `{"loader":"helix","step":0,"rank":0,"digest":5}`, "line 1"},
		{"line too long", `{"loader":"helix","x":"` + strings.Repeat("a", maxTraceLine) + `"}`, "line 1"},
	} {
		if _, err := ParseRunTrace(strings.NewReader(tt.data)); err == nil || !errors.Is(err, ErrReal) || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("%s: error %v, want an ErrReal error containing %q", tt.name, err, tt.err)
		}
	}
}

func FuzzParseRunOutputs(f *testing.F) {
	data, _ := json.Marshal(testSummaries())
	f.Add(data)
	f.Add([]byte(traceOf(f, "local", testRecords(2, 0))))
	f.Add([]byte(`[{"loader":"helix","ranks":1,"miss_rate":NaN}]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if sums, err := ParseRunSummaries(data); err == nil {
			for _, s := range sums {
				if s.Ranks < 1 || !(s.MissRate >= 0 && s.MissRate <= 1) || !(s.GPUWaitFrac >= 0) {
					t.Fatalf("accepted %+v", s)
				}
			}
		} else if !errors.Is(err, ErrReal) {
			t.Fatalf("error %v does not wrap ErrReal", err)
		}
		if recs, err := ParseRunTrace(strings.NewReader(string(data))); err == nil {
			for l, rs := range recs {
				if _, err := step.ParseKind(l); err != nil {
					t.Fatalf("accepted loader %q", l)
				}
				for _, r := range rs {
					if r.Step < 0 || r.Rank < 0 {
						t.Fatalf("accepted %+v", r)
					}
				}
			}
		} else if !errors.Is(err, ErrReal) {
			t.Fatalf("error %v does not wrap ErrReal", err)
		}
	})
}

func TestRealResults(t *testing.T) {
	w := &workload.Workload{Name: "k", Skew: workload.Skewed}
	sums := testSummaries()
	// Torch: 10 steps, late on steps 1 and 8; with a horizon of 4 the
	// steady part is steps 4..9: one miss of 12 records, 30 ms of wait
	// over 2 ranks x (wall end - step 4's request).
	recs := map[string][]metrics.StepRecord{"torch": testRecords(10, 1, 8)}
	sums[0].WallS = 1.0
	stats := map[string]JobStats{"torch": {Wall: 3 * time.Second}, "helix": {Wall: 2 * time.Second}}
	got, err := realResults(w, sums, recs, 4, 4, stats)
	if err != nil || len(got) != 2 {
		t.Fatalf("got %+v, %v", got, err)
	}
	r := got[0]
	if r.Mode != "real" || r.Workload != "k" || r.Loader != "torch" || r.Ranks != 4 || r.MissRate != 0.0625 || r.GPUWaitFrac != 0.08 ||
		r.ThroughputSPS != 250 || r.BatchesHash != "00000000deadbeef" || r.Skew != workload.Skewed || r.ElapsedS != 3 {
		t.Errorf("torch result %+v does not carry the summary", r)
	}
	wallEnd := 1000 + 1_000_000.0
	start := 1000 + 4*100_000.0
	if want := 1.0 / 12; math.Abs(r.SteadyMissRate-want) > 1e-12 {
		t.Errorf("steady miss rate %v, want %v", r.SteadyMissRate, want)
	}
	if want := 30_000 / (2 * (wallEnd - start)); math.Abs(r.SteadyGPUWaitFrac-want) > 1e-12 {
		t.Errorf("steady wait %v, want %v", r.SteadyGPUWaitFrac, want)
	}
	if r.SteadySteps != 6 || !r.HasSteady() {
		t.Errorf("torch: %d steady steps, want 6 (steps 4..9)", r.SteadySteps)
	}
	if got[1].SteadyMissRate != 0 || got[1].ElapsedS != 2 || got[1].HasSteady() {
		t.Errorf("helix without records: %+v, want no steady figures", got[1])
	}
	sums[1].Ranks = 3
	if _, err := realResults(w, sums, recs, 4, 4, stats); err == nil {
		t.Error("a summary of 3 ranks in a 4-rank run was accepted")
	}
}

func TestMeanResult(t *testing.T) {
	a := eval.Result{Workload: "k", Loader: "torch", MissRate: 0.1, GPUWaitFrac: 0.2, ThroughputSPS: 100, Misses: 3, WallS: 10, BatchesHash: "h"}
	b := eval.Result{Workload: "k", Loader: "torch", MissRate: 0.3, GPUWaitFrac: 0.1, ThroughputSPS: 200, Misses: 8, WallS: 12, BatchesHash: "h"}
	m, err := meanResult([]eval.Result{a, b})
	if err != nil || math.Abs(m.MissRate-0.2) > 1e-12 || math.Abs(m.GPUWaitFrac-0.15) > 1e-12 || m.ThroughputSPS != 150 || m.Misses != 6 || m.WallS != 11 || m.BatchesHash != "h" {
		t.Errorf("mean %+v, %v", m, err)
	}
	if m, err := meanResult([]eval.Result{a}); err != nil || m != a {
		t.Errorf("one run: %+v, %v", m, err)
	}
	b.BatchesHash = "other"
	if _, err := meanResult([]eval.Result{a, b}); err == nil || !errors.Is(err, ErrReal) {
		t.Errorf("runs of different batches averaged: %v", err)
	}
	if _, err := meanResult(nil); err == nil {
		t.Error("no runs averaged")
	}
}
