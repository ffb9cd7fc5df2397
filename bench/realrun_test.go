package bench

import (
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/datahelix/datahelix/decode"
	"github.com/datahelix/datahelix/gpu"
	"github.com/datahelix/datahelix/spmd"
)

func TestGPUFlagsRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 500 {
		d := func() time.Duration { return time.Duration(rng.Int64N(int64(2 * time.Second))) }
		m := gpu.Model{Base: d(), PerSample: d() / 16, PerFrame: d() / 128, PerToken: d() / 10000}
		if i == 0 {
			m = gpu.Model{}
		}
		flags, got := gpuFlags(m)
		if len(flags) != 8 {
			t.Fatalf("flags %v", flags)
		}
		if again := modelFromFlags(flags); again != got {
			t.Fatalf("flags %v parse to %+v and %+v", flags, again, got)
		}
		for _, p := range [][2]time.Duration{{m.Base, got.Base}, {m.PerSample, got.PerSample}, {m.PerFrame, got.PerFrame}, {m.PerToken, got.PerToken}} {
			if diff := p[0] - p[1]; diff < -time.Microsecond || diff > time.Microsecond {
				t.Fatalf("model %+v: flags %v give %+v, more than 1 µs off", m, flags, got)
			}
		}
	}
}

func TestRefOfID(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 1000 {
		ref := spmd.SampleRef{Shard: rng.IntN(1 << 24), Index: rng.IntN(1 << 24)}
		if got := refOfID(ref.ID(rng.IntN(1 << 15))); got != ref {
			t.Fatalf("refOfID(%v.ID) = %v", ref, got)
		}
	}
}

func testSummaries() []spmd.Summary {
	mape := 0.12
	return []spmd.Summary{
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
func traceOf(t testing.TB, loader string, recs []spmd.StepRecord) string {
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
func testRecords(steps int, late ...int) []spmd.StepRecord {
	var out []spmd.StepRecord
	for s := range steps {
		for r := range 2 {
			rec := spmd.StepRecord{Step: int64(s), Rank: r, RequestUS: 1000 + int64(s)*100_000, ComputeUS: 70_000, Samples: 4, Hash: uint64(s*2 + r)}
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
				if _, err := spmd.ParseKind(l); err != nil {
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
	w := &Workload{Name: "k", Skew: Skewed}
	sums := testSummaries()
	// Torch: 10 steps, late on steps 1 and 8; with a horizon of 4 the
	// steady part is steps 4..9: one miss of 12 records, 30 ms of wait
	// over 2 ranks x (wall end - step 4's request).
	recs := map[string][]spmd.StepRecord{"torch": testRecords(10, 1, 8)}
	sums[0].WallS = 1.0
	stats := map[string]JobStats{"torch": {Wall: 3 * time.Second}, "helix": {Wall: 2 * time.Second}}
	got, err := realResults(w, sums, recs, 4, 4, stats)
	if err != nil || len(got) != 2 {
		t.Fatalf("got %+v, %v", got, err)
	}
	r := got[0]
	if r.Mode != "real" || r.Workload != "k" || r.Loader != "torch" || r.Ranks != 4 || r.MissRate != 0.0625 || r.GPUWaitFrac != 0.08 ||
		r.ThroughputSPS != 250 || r.BatchesHash != "00000000deadbeef" || r.Skew != Skewed || r.ElapsedS != 3 {
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

// fixedSource serves batches[step][rank].
func fixedSource(batches [][][]spmd.SimSample) sampleSource {
	return func(step int64, rank int) []spmd.SimSample { return batches[step][rank] }
}

func TestSplitWorkRatioAndImbalance(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	const steps, ranks, b = 12, 3, 4
	batches := make([][][]spmd.SimSample, steps)
	for s := range batches {
		batches[s] = make([][]spmd.SimSample, ranks)
		for r := range ranks {
			for range b {
				x := spmd.SimSample{Cost: 1 + rng.Int64N(1000)}
				if rng.IntN(3) == 0 {
					x.Parts = []int64{x.Cost, x.Cost / 2}
				}
				batches[s][r] = append(batches[s][r], x)
			}
		}
	}
	// Dumb references.
	var whole, split float64
	for _, st := range batches {
		for _, xs := range st {
			for _, x := range xs {
				whole += float64(x.Cost)
				if len(x.Parts) > 1 {
					split += float64(x.Parts[0] + x.Parts[1])
				} else {
					split += float64(x.Cost)
				}
			}
		}
	}
	if got, want := splitWorkRatio(fixedSource(batches), ranks, steps), split/whole; math.Abs(got-want) > 1e-12 {
		t.Errorf("splitWorkRatio = %v, want %v", got, want)
	}
	for _, h := range []int{1, 4, 5, 12, 40} {
		hh := max(min(h, steps), 1)
		nw := max(steps/hh, 1)
		total := 0.0
		for win := range nw {
			load := make([]float64, ranks)
			for s := win * hh; s < (win+1)*hh; s++ {
				for r := range ranks {
					for _, x := range batches[s][r] {
						load[r] += float64(x.Cost)
					}
				}
			}
			total += slices.Max(load)/((load[0]+load[1]+load[2])/ranks) - 1
		}
		if got, want := streamImbalance(fixedSource(batches), ranks, steps, h), total/float64(nw); math.Abs(got-want) > 1e-12 {
			t.Errorf("horizon %d: streamImbalance = %v, want %v", h, got, want)
		}
	}
}

func TestMeasuredSamples(t *testing.T) {
	ref := spmd.SampleRef{Shard: 1, Index: 2}
	x := spmd.SimSample{ID: ref.ID(3), Cost: 1000, Est: 900, Parts: []int64{600, 600}, PartsEst: []int64{540, 540}, Frames: 8}
	y := spmd.SimSample{ID: spmd.SampleRef{Shard: 0, Index: 0}.ID(0), Cost: 50, Est: 60, Frames: 1}
	j := &realJob{samples: &DatasetSamples{batches: [][][]spmd.SimSample{{{x, y}}}},
		cost: &measuredCosts{US: [][]int64{{70}, {1, 2, 500}}}}
	got := j.measuredSamples(0, 0)
	if got[0].Cost != 500 || got[0].Est != 900 || !slices.Equal(got[0].Parts, []int64{300, 300}) || !slices.Equal(got[0].PartsEst, x.PartsEst) {
		t.Errorf("split clip: got %+v, want cost 500, parts 300+300, estimates unchanged", got[0])
	}
	if got[1].Cost != 70 || got[1].Est != 60 || got[1].Parts != nil {
		t.Errorf("image: got %+v, want cost 70, estimate 60", got[1])
	}
	if j.samples.Samples(0, 0)[0].Cost != 1000 {
		t.Error("measuredSamples changed the dataset's own samples")
	}
}

func TestParseProcStat(t *testing.T) {
	stat := "cpu  100 5 30 9000 7 1 2 3 40 0\ncpu0 50 2 15 4500 3 0 1 1 0 0\nintr 1 2 3\n"
	if got, ok := parseProcStat([]byte(stat)); !ok || got != (100+5+30+1+2+3)*10*time.Millisecond {
		t.Errorf("got %v, %v; want 1.41 s", got, ok)
	}
	for _, bad := range []string{"", "cpu 1 2 3\n", "intr 1 2 3 4 5 6 7 8 9\n", "cpu a b c d e f g h i\n", "cpu 1 1 1 1 1 1 1 99999999999999999999 1\n",
		// Each fits a uint64, the sum's Duration does not (it came out negative).
		"cpu 1000000000000 0 0 0 0 0 0 0\n", "cpu 600000000000 0 600000000000 0 0 0 0 0\n"} {
		if _, ok := parseProcStat([]byte(bad)); ok {
			t.Errorf("%q accepted", bad)
		}
	}
	if got, ok := parseProcStat([]byte("cpu 900000000000 0 0 0 0 0 0 0\n")); !ok || got != 9e18 {
		t.Errorf("the largest sum that fits: got %v, %v", got, ok)
	}
	if _, ok := machineBusy(); !ok {
		t.Skip("no /proc/stat here")
	}
}

func TestEnsureRealDataset(t *testing.T) {
	if testing.Short() {
		t.Skip("generates a dataset (fast: text only)")
	}
	re := RealEnv{CacheDir: t.TempDir(), Scale: RealScale{ShardsPerRank: 3, SamplesPerShard: 2}.withDefaults(), Log: nil}
	re.Log = os.Stderr
	w := &Workload{Name: "twotexts", Sources: []Source{{Preset: "text", Weight: 2}, {Preset: "text", Weight: 1}}}
	rd, err := ensureRealDataset(t.Context(), re, w, 2, 7)
	if err != nil {
		t.Fatal(err)
	}
	if rd.Shards != 6 || rd.Samples != 12 || rd.Sources["text"] != 6 {
		t.Errorf("dataset %+v", rd)
	}
	order := sourceOrder(w.Sources, 6)
	next := map[int]int{}
	for k, s := range order {
		target, err := os.Readlink(filepath.Join(rd.Dir, "shard-"+strings.Repeat("0", 5)+string(rune('0'+k))+".tar"))
		if err != nil {
			t.Fatal(err)
		}
		gc := realSourceConfig(w.Sources[s], map[int]int{0: 4, 1: 2}[s], re.Scale, 7+uint64(s))
		if want := filepath.Join(realSourceDir(re.CacheDir, gc), "text-00000"+string(rune('0'+next[s]))+".tar"); target != want {
			t.Errorf("shard %d -> %s, want %s (source %d)", k, target, want, s)
		}
		next[s]++
	}
	ds, err := decode.OpenDataset(rd.Dir, filepath.Join(re.CacheDir, "index"))
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	if ds.Len() != 12 {
		t.Errorf("dataset holds %d samples, want 12", ds.Len())
	}
	mc, err := measureDataset(t.Context(), ds, 8, 224, 2)
	if err != nil || mc.Failed != 0 || !(mc.MeanUS >= 1) || len(mc.US) != 6 || len(mc.US[5]) != 2 {
		t.Errorf("measured %+v, %v", mc, err)
	}
	// A second call finds it.
	if again, err := ensureRealDataset(t.Context(), re, w, 2, 7); err != nil || again.Dir != rd.Dir {
		t.Errorf("second call: %+v, %v", again, err)
	}
	// Two evaluations of one process making the links at once both get
	// them: a scratch directory named by process id alone was removed by
	// the second while the first filled it.
	if err := os.RemoveAll(rd.Dir); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() { _, errs[i] = ensureRealDataset(t.Context(), re, w, 2, 7) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("concurrent call %d: %v", i, err)
		}
	}
	if links, err := filepath.Glob(filepath.Join(rd.Dir, "shard-*.tar")); err != nil || len(links) != 6 {
		t.Errorf("after concurrent calls: %d links, %v; want 6", len(links), err)
	}
	if scratch, _ := filepath.Glob(rd.Dir + ".tmp-*"); len(scratch) != 0 {
		t.Errorf("scratch directories left: %v", scratch)
	}
}

func TestExtendValidation(t *testing.T) {
	r := func(l string, wait, miss float64, hash string) Result {
		return Result{Workload: "k", Loader: l, Ranks: 4, GPUWaitFrac: wait, MissRate: miss, BatchesHash: hash}
	}
	real := []Result{r("torch", 0.20, 0.30, "a"), r("helix", 0.10, 0.05, "b")}
	sim := []Result{r("torch", 0.10, 0.10, "a"), r("helix", 0.10, 0.05, "x")}
	meas := []Result{r("torch", 0.22, 0.25, "a"), r("helix", 0.30, 0.05, "b")}
	avail := []Result{r("torch", 0.21, 0.31, "a"), r("helix", 0.11, 0.06, "b")}
	s := ValidationSection(sim, real)
	extendValidation(s, real, sim, map[[2]string][3]float64{{"k", "torch"}: {0.5, 1.3, 12000}, {"k", "helix"}: {-1, 0, 9000}},
		validationDiagnostic{"measured", "on the costs measured here", meas},
		validationDiagnostic{"unscaled", "on the model's costs unscaled", avail},
		validationDiagnostic{"process", "fitted to the whole process's CPU time", avail[:1]})
	if len(s.Rows) != 2 {
		t.Fatalf("%d rows", len(s.Rows))
	}
	want := [][]any{
		{false, true, 0.5, 1.3, int64(12000), 0.22, 0.25, true, 0.21, 0.31, true, 0.21, 0.31, true},
		{true, false, "-", "-", int64(9000), 0.30, 0.05, false, 0.11, 0.06, true, "-", "-", "-"},
	}
	for i, row := range s.Rows {
		if len(row) != len(s.Columns) {
			t.Fatalf("row %d: %d cells for %d columns", i, len(row), len(s.Columns))
		}
		got := append([]any{row[9]}, row[10:]...)
		for k := range want[i] {
			if got[k] != want[i][k] {
				t.Errorf("row %d (%s): column %d = %v, want %v", i, row[1], k, got[k], want[i][k])
			}
		}
	}
	if !strings.Contains(s.Headline, "1 of 2 simulated runs agree") || !strings.Contains(s.Headline, "measured here 1 of 2") || !strings.Contains(s.Headline, "model's costs unscaled 2 of 2") ||
		!strings.Contains(s.Headline, "whole process's CPU time 1 of 2") {
		t.Errorf("headline %q", s.Headline)
	}
}

func TestAllreduceGaps(t *testing.T) {
	rec := func(step int64, rank int, request, deliver, gpu int64) spmd.StepRecord {
		return spmd.StepRecord{Step: step, Rank: rank, RequestUS: request, DeliverUS: deliver, GPUUS: gpu}
	}
	// Two ranks, own clocks. Step 0: rank 0 computes 100-200 and asks
	// again at 230 (gap 30); rank 1 computes 150-260, the slowest, and
	// asks at 265 (gap 5): the allreduce took 5. Step 1: gaps 7 and 40.
	// Step 2 is the last: no next request.
	recs := []spmd.StepRecord{
		rec(0, 0, 0, 100, 100), rec(0, 1, 0, 150, 110),
		rec(1, 0, 230, 230, 100), rec(1, 1, 265, 265, 100),
		rec(2, 0, 337, 337, 100), rec(2, 1, 405, 405, 100),
	}
	if got, want := allreduceGaps(recs), []int64{5, 7}; !slices.Equal(got, want) {
		t.Errorf("gaps %v, want %v", got, want)
	}
	// Runs without a modelled GPU time give nothing.
	for i := range recs {
		recs[i].GPUUS = 0
	}
	if got := allreduceGaps(recs); len(got) != 0 {
		t.Errorf("gaps without GPU times: %v", got)
	}
	j := &realJob{records: map[string][][]spmd.StepRecord{
		"torch": {{rec(0, 0, 0, 10, 10), rec(1, 0, 50, 50, 10)}, {rec(0, 0, 0, 10, 10), rec(1, 0, 60, 60, 10)}},
		"helix": {{rec(0, 0, 0, 10, 10), rec(1, 0, 30, 30, 10)}}}}
	if got := j.allreduceUS(); got != 30 {
		t.Errorf("allreduce %d µs, want the median 30 of 30, 40 and 10 (every run)", got)
	}
	if got := allreduceOf(j.records["torch"][1]); got != 40 {
		t.Errorf("allreduce of one run %d µs, want 40", got)
	}
}

func TestMedian(t *testing.T) {
	for _, tt := range []struct {
		xs   []int64
		want int64
	}{{[]int64{5}, 5}, {[]int64{9, 1}, 5}, {[]int64{3, 100, 1}, 3}, {[]int64{4, 1, 3, 2}, 2}, {[]int64{7, 7, 7}, 7}} {
		if got := median(slices.Clone(tt.xs)); got != tt.want {
			t.Errorf("median(%v) = %d, want %d", tt.xs, got, tt.want)
		}
	}
}

func TestMeanResult(t *testing.T) {
	a := Result{Workload: "k", Loader: "torch", MissRate: 0.1, GPUWaitFrac: 0.2, ThroughputSPS: 100, Misses: 3, WallS: 10, BatchesHash: "h"}
	b := Result{Workload: "k", Loader: "torch", MissRate: 0.3, GPUWaitFrac: 0.1, ThroughputSPS: 200, Misses: 8, WallS: 12, BatchesHash: "h"}
	m, err := meanResult([]Result{a, b})
	if err != nil || math.Abs(m.MissRate-0.2) > 1e-12 || math.Abs(m.GPUWaitFrac-0.15) > 1e-12 || m.ThroughputSPS != 150 || m.Misses != 6 || m.WallS != 11 || m.BatchesHash != "h" {
		t.Errorf("mean %+v, %v", m, err)
	}
	if m, err := meanResult([]Result{a}); err != nil || m != a {
		t.Errorf("one run: %+v, %v", m, err)
	}
	b.BatchesHash = "other"
	if _, err := meanResult([]Result{a, b}); err == nil || !errors.Is(err, ErrReal) {
		t.Errorf("runs of different batches averaged: %v", err)
	}
	if _, err := meanResult(nil); err == nil {
		t.Error("no runs averaged")
	}
}

func TestAddRealSpread(t *testing.T) {
	s := &Section{Columns: []string{"workload", "loader"}, Rows: [][]any{{"k", "torch"}, {"k", "helix"}}}
	addRealSpread(s, map[[2]string][]Result{{"k", "torch"}: {{GPUWaitFrac: 0.1, MissRate: 0.2}, {GPUWaitFrac: 0.3, MissRate: 0.25}}},
		map[[2]string][]Result{{"k", "torch"}: {{GPUWaitFrac: 0.15, MissRate: 0.125}, {GPUWaitFrac: 0.25, MissRate: 0.5}}})
	if want := []any{"k", "torch", "0.1 0.3", "0.2 0.25"}; !slices.Equal(s.Rows[0][:4], want) || math.Abs(s.Rows[0][4].(float64)-1) > 1e-12 ||
		!slices.Equal(s.Rows[0][5:], []any{"0.15 0.25", "0.125 0.5"}) {
		t.Errorf("row 0 = %v, want %v, a spread of 1 and the simulated runs", s.Rows[0], want)
	}
	if want := []any{"k", "helix", "-", "-", "-", "-", "-"}; !slices.Equal(s.Rows[1], want) {
		t.Errorf("row 1 = %v, want %v", s.Rows[1], want)
	}
	if !strings.Contains(s.Headline, "differ by up to 100 %") {
		t.Errorf("headline %q", s.Headline)
	}
}

func TestNodeShare(t *testing.T) {
	const u = spmd.OtherUnit
	for _, tc := range []struct {
		ranks, cores int
		others       float64
		want         spmd.CPUShare
	}{
		// More ranks than cores: pinned round-robin, a core per group.
		{4, 2, 0, spmd.CPUShare{Group: []int{0, 1, 0, 1}, Cores: []int{1, 1}}},
		{3, 2, 0, spmd.CPUShare{Group: []int{0, 1, 0}, Cores: []int{1, 1}}},
		// Other processes' threads, free to move between the cores.
		{4, 2, 1, spmd.CPUShare{Group: []int{0, 1, 0, 1}, Cores: []int{1, 1}, Others: u}},
		// Not pinned: every rank shares every core, with the others.
		{2, 2, 0, spmd.CPUShare{Group: []int{0, 0}, Cores: []int{2}}},
		{2, 8, 0, spmd.CPUShare{Group: []int{0, 0}, Cores: []int{8}}},
		{2, 2, 0.75, spmd.CPUShare{Group: []int{0, 0}, Cores: []int{2}, Others: 3 * u / 4}},
	} {
		got := nodeShare(tc.ranks, tc.cores, tc.others)
		if !slices.Equal(got.Group, tc.want.Group) || !slices.Equal(got.Cores, tc.want.Cores) || got.Others != tc.want.Others {
			t.Errorf("nodeShare(%d, %d, %v) = %+v, want %+v", tc.ranks, tc.cores, tc.others, *got, tc.want)
		}
	}
}

func TestRunSlowdown(t *testing.T) {
	st := func(cpu, wall time.Duration, others float64) JobStats {
		return JobStats{CPU: cpu, Wall: wall, OthersCores: others}
	}
	j := &realJob{ranks: 4, workers: 2, cores: 2, steps: 10, batch: 5, oversub: 4, cost: &measuredCosts{MeanUS: 1000},
		stats: map[string][]JobStats{
			// 4 ranks x 10 steps x 5 samples x 1 ms = 0.2 s of decode per run.
			"torch": {st(300*time.Millisecond, time.Second, 0.5), st(500*time.Millisecond, time.Second, 1.5)},
			"helix": {st(200*time.Millisecond, time.Second, -1)},
		}}
	if got := j.cpuOverWorkOf(spmd.KindTorch); math.Abs(got-2) > 1e-12 {
		t.Errorf("torch CPU over work %v, want 2", got)
	}
	if got := j.cpuOverWork(); math.Abs(got-1000.0/600) > 1e-12 {
		t.Errorf("CPU over work %v, want %v", got, 1000.0/600)
	}
	// Torch: others took 1 of the 2 cores on average (the simulator
	// shares the cores among the threads itself), 2x CPU.
	if got := j.runSlowdown(spmd.KindTorch); math.Abs(got-4) > 1e-12 {
		t.Errorf("torch slowdown %v, want 4", got)
	}
	// Helix: others unknown, 1x CPU.
	if got := j.runSlowdown(spmd.KindHelix); math.Abs(got-1) > 1e-12 {
		t.Errorf("helix slowdown %v, want 1", got)
	}
	if got := j.othersCores(spmd.KindLocal); got != -1 {
		t.Errorf("others of a loader that did not run: %v", got)
	}
}

// checkAsRun re-simulates j on the machine simulateAsRun chose for run
// rep and checks that every rank spends the CPU time its real rank
// recorded, over the run and up to its first delivery, and that the
// other processes take the cores the run's stats say they took.
func checkAsRun(t *testing.T, j *realJob, k spmd.Kind, src sampleSource, process bool, rep int, total, first []int64) {
	t.Helper()
	_, m, err := j.simulateAsRun(k, src, false, process, rep)
	if err != nil {
		t.Fatal(err)
	}
	sd, start := m.slowdown, m.start
	_, res, err := j.simulate(k, src, m)
	if err != nil {
		t.Fatal(err)
	}
	if sts := j.stats[k.String()]; rep < len(sts) && sts[rep].OthersCores > 0 {
		// Within 2 % of the cores.
		want, got := sts[rep].OthersCores, float64(res.OthersUS)/float64(res.WallUS)
		if math.Abs(got-want) > 0.02*float64(j.cores) {
			t.Errorf("%s: others took %.3f cores as %.2f threads, want the run's %.3f", k, got, m.others, want)
		}
	}
	for r := range total {
		var got0 int64
		for _, rec := range res.Records {
			if rec.Step == 0 && rec.Rank == r {
				got0 = rec.CPUUS
			}
		}
		if math.Abs(float64(res.WorkUS[r])/float64(total[r])-1) > 0.05 || math.Abs(float64(got0)/float64(first[r])-1) > 0.05 {
			t.Errorf("%s rank %d: CPU %d µs, %d by its first delivery (slowdown %.2f, start-up %d µs); want the real %d and %d",
				k, r, res.WorkUS[r], got0, sd[r], start[r], total[r], first[r])
		}
	}
}

// cpuRecords are step records of ranks that spent total[r] µs of CPU,
// first[r] of it by their first delivery and the rest evenly.
func cpuRecords(steps int, total, first []int64) []spmd.StepRecord {
	var recs []spmd.StepRecord
	for s := range int64(steps) {
		for r := range total {
			c := first[r]
			if s > 0 {
				c = (total[r] - first[r]) / int64(steps-1)
			}
			recs = append(recs, spmd.StepRecord{Step: s, Rank: r, CPUUS: c})
		}
	}
	return recs
}

// TestSimulateAsRun: each simulated rank spends the CPU time its real
// rank recorded, in all and by its first delivery, through a slowdown and
// start-up work. Two ranks pinned to one core, one worker each; rank 0's
// samples cost 4 ms, rank 1's 1 ms, over 6 steps: 24 and 6 ms of work.
// The real ranks spent 60 and 21 ms, 18 and 7 of it by their first
// delivery: more than their first decodes, as real start-ups do.
func TestSimulateAsRun(t *testing.T) {
	const steps = 6
	batches := make([][][]spmd.SimSample, steps)
	for s := range batches {
		batches[s] = [][]spmd.SimSample{
			{{ID: uint64(10*s + 0), Bytes: 100, Cost: 4000, Est: 4000, Frames: 1}},
			{{ID: uint64(10*s + 1), Bytes: 100, Cost: 1000, Est: 1000, Frames: 1}},
		}
	}
	total, first := []int64{60_000, 21_000}, []int64{18_000, 7_000}
	j := &realJob{w: &Workload{Name: "w"}, ranks: 2, cores: 1, workers: 1, batch: 1, steps: steps, horizon: 2, frames: 1, size: 8,
		model: gpu.Model{Base: 10 * time.Millisecond}, cost: &measuredCosts{MeanUS: 2500},
		records: map[string][][]spmd.StepRecord{"local": {cpuRecords(steps, total, first)}}}
	checkAsRun(t, j, spmd.KindLocal, fixedSource(batches), false, 0, total, first)
	// A second run that spent more: simulated as it ran, and the mean is
	// the runs' mean.
	total2, first2 := []int64{90_000, 30_000}, []int64{30_000, 9_000}
	j.records["local"] = append(j.records["local"], cpuRecords(steps, total2, first2))
	checkAsRun(t, j, spmd.KindLocal, fixedSource(batches), false, 1, total2, first2)
	m, runs, ms, err := j.simulateAsRuns(spmd.KindLocal, fixedSource(batches), false, false)
	if err != nil || len(runs) != 2 || len(ms) != 2 || ms[1].slowdown[0] <= ms[0].slowdown[0] || runs[1].GPUWaitS <= runs[0].GPUWaitS ||
		math.Abs(m.GPUWaitS-(runs[0].GPUWaitS+runs[1].GPUWaitS)/2) > 1e-9 {
		t.Errorf("two runs: mean %+v, runs %+v, machines %+v (%v); want the second slower and their mean", m, runs, ms, err)
	}
	// The misses with the CPU times scaled: more CPU, more misses; the
	// machines are left as they were.
	before := slices.Clone(ms[1].slowdown)
	lo, err1 := j.missesScaled(spmd.KindLocal, fixedSource(batches), ms, 0.5)
	hi, err2 := j.missesScaled(spmd.KindLocal, fixedSource(batches), ms, 3)
	if err1 != nil || err2 != nil || hi <= lo || hi <= m.MissRate || !slices.Equal(ms[1].slowdown, before) {
		t.Errorf("misses at 0.5x and 3x the CPU: %v and %v (fitted %v; %v, %v), slowdowns %v then %v", lo, hi, m.MissRate, err1, err2, before, ms[1].slowdown)
	}
	// Other processes took half the core during the second run: the
	// ranks still spend their CPU time, and wait longer for it.
	j.stats = map[string][]JobStats{"local": {{OthersCores: 0.001}, {OthersCores: 0.5}}}
	checkAsRun(t, j, spmd.KindLocal, fixedSource(batches), false, 1, total2, first2)
	// Others too few to simulate (under one OtherUnit) leave the CPU
	// times refined.
	checkAsRun(t, j, spmd.KindLocal, fixedSource(batches), false, 0, total, first)
	if shared, _, err := j.simulateAsRun(spmd.KindLocal, fixedSource(batches), false, false, 1); err != nil || shared.GPUWaitS <= runs[1].GPUWaitS {
		t.Errorf("with others: wait %v s, without %v s (%v); want longer", shared.GPUWaitS, runs[1].GPUWaitS, err)
	}
	// Records with the decode workers' CPU time: fitted to the process's
	// by the first delivery and the workers' after it; process fits
	// to the process's throughout.
	j.stats = nil
	dec := cpuRecords(steps, total2, first2)
	for i := range dec {
		if dec[i].Step > 0 {
			dec[i].DecodeCPUUS = dec[i].CPUUS / 2
		}
	}
	j.records["local"] = [][]spmd.StepRecord{dec}
	half := []int64{first2[0] + (total2[0]-first2[0])/2, first2[1] + (total2[1]-first2[1])/2}
	checkAsRun(t, j, spmd.KindLocal, fixedSource(batches), false, 0, half, first2)
	checkAsRun(t, j, spmd.KindLocal, fixedSource(batches), true, 0, total2, first2)
	j.records["local"] = [][]spmd.StepRecord{cpuRecords(steps, total, first), cpuRecords(steps, total2, first2)}
	// A rank without CPU records: every rank takes the job's factor
	// (no stats: 1) and no start-up work.
	j.stats = nil
	for i, r := range j.records["local"][0] {
		if r.Rank == 1 {
			j.records["local"][0][i].CPUUS = 0
		}
	}
	if _, m, err := j.simulateAsRun(spmd.KindLocal, fixedSource(batches), false, false, 0); err != nil || !slices.Equal(m.slowdown, []float64{1, 1}) || m.start != nil {
		t.Errorf("without per-rank CPU: slowdowns %v, start-up %v (%v), want [1 1] and none", m.slowdown, m.start, err)
	}
}

// TestCPUByRank: a rank's CPU time is its process's by its first
// delivery and its decode workers' after it, or its process's throughout
// when asked or when no record has a decode time.
func TestCPUByRank(t *testing.T) {
	rec := func(step int64, rank int, cpu, dec int64) spmd.StepRecord {
		return spmd.StepRecord{Step: step, Rank: rank, CPUUS: cpu, DecodeCPUUS: dec}
	}
	withDecode := []spmd.StepRecord{rec(0, 0, 100, 40), rec(0, 1, 50, 0), rec(1, 0, 30, 20), rec(1, 1, 25, 0), rec(2, 1, 70, 60), rec(2, 7, 1000, 1000)}
	noDecode := []spmd.StepRecord{rec(0, 0, 100, 0), rec(1, 0, 30, 0), rec(1, 1, 25, 0)}
	for _, c := range []struct {
		name               string
		recs               []spmd.StepRecord
		process            bool
		wantTotal, wantOne []int64
	}{
		{"decode", withDecode, false, []int64{120, 110}, []int64{100, 50}},
		{"process", withDecode, true, []int64{130, 145}, []int64{100, 50}},
		{"no decode times", noDecode, false, []int64{130, 25}, []int64{100, 0}},
	} {
		total, first := cpuByRank(c.recs, 2, c.process)
		if !slices.Equal(total, c.wantTotal) || !slices.Equal(first, c.wantOne) {
			t.Errorf("%s: total %v, first %v; want %v, %v", c.name, total, first, c.wantTotal, c.wantOne)
		}
	}
	if total, _ := rankCPU(noDecode[:2], 2, false); total != nil {
		t.Errorf("a rank without records: %v, want nil", total)
	}
}

// TestSimulateAsRunPlanned: helix moves work away from the ranks it sees
// slowed, so one division by the full-speed work would miss the real CPU
// time; refined, the slowdowns and start-up works give each simulated
// rank the CPU time its real rank recorded, within 5 %.
func TestSimulateAsRunPlanned(t *testing.T) {
	const steps, ranks, b = 12, 4, 4
	rng := rand.New(rand.NewPCG(3, 4))
	batches := make([][][]spmd.SimSample, steps)
	for s := range batches {
		batches[s] = make([][]spmd.SimSample, ranks)
		for r := range ranks {
			for i := range b {
				c := int64(1000 + rng.IntN(3000))
				if r == 0 {
					c *= 4
				}
				batches[s][r] = append(batches[s][r], spmd.SimSample{ID: uint64(s<<16 | r<<8 | i), Bytes: 1000, Cost: c, Est: c, Frames: 1})
			}
		}
	}
	total := []int64{180_000, 90_000, 60_000, 130_000}
	first := []int64{60_000, 30_000, 20_000, 40_000}
	j := &realJob{w: &Workload{Name: "w"}, ranks: ranks, cores: 2, workers: 2, batch: b, steps: steps, horizon: 4, frames: 1, size: 8,
		model: gpu.Model{Base: 20 * time.Millisecond}, cost: &measuredCosts{MeanUS: 2500},
		records: map[string][][]spmd.StepRecord{"helix": {cpuRecords(steps, total, first)}}}
	checkAsRun(t, j, spmd.KindHelix, fixedSource(batches), false, 0, total, first)
	// With other processes taking 0.4 of the two cores.
	j.stats = map[string][]JobStats{"helix": {{OthersCores: 0.4}}}
	checkAsRun(t, j, spmd.KindHelix, fixedSource(batches), false, 0, total, first)
}

func TestAddMachines(t *testing.T) {
	s := &Section{Columns: []string{"workload", "loader"}, Rows: [][]any{{"k", "torch"}, {"k", "helix"}}}
	addMachines(s, map[[2]string][]simMachine{{"k", "torch"}: {{slowdown: []float64{1.5, 2.25}}, {slowdown: []float64{1, 3}, others: 0.75}}})
	if s.Rows[0][2] != "1.50 2.25 / 1.00 3.00" || s.Rows[0][3] != "0.00 / 0.75" || s.Rows[1][2] != "-" || s.Rows[1][3] != "-" {
		t.Errorf("rows %v", s.Rows)
	}
}

func TestDecodeShare(t *testing.T) {
	a := []spmd.StepRecord{{CPUUS: 1000, DecodeCPUUS: 600}, {CPUUS: 500, DecodeCPUUS: 300}}
	b := []spmd.StepRecord{{CPUUS: 500, DecodeCPUUS: 100}}
	if got := decodeShare(a, b); math.Abs(got-0.5) > 1e-12 {
		t.Errorf("share %v, want 1000/2000", got)
	}
	if got := decodeShare([]spmd.StepRecord{{CPUUS: 1000}}); got != 0 {
		t.Errorf("share without decode records %v, want 0", got)
	}
	s := &Section{Columns: []string{"workload", "loader"}, Rows: [][]any{{"k", "torch"}, {"k", "helix"}}}
	addColumn(s, "decode_cpu_share", map[[2]string]any{{"k", "torch"}: 0.5})
	if s.Columns[2] != "decode_cpu_share" || s.Rows[0][2] != 0.5 || s.Rows[1][2] != "-" {
		t.Errorf("section %v %v", s.Columns, s.Rows)
	}
}

func TestCostText(t *testing.T) {
	tests := []struct {
		us   float64
		want string
	}{
		{0, "0 µs"},
		{42.4, "42 µs"},
		{999.4, "999 µs"},
		{999.5, "1.0 ms"},
		{1000, "1.0 ms"},
		{47798.3, "47.8 ms"},
	}
	for _, tt := range tests {
		if got := costText(tt.us); got != tt.want {
			t.Errorf("costText(%v) = %q, want %q", tt.us, got, tt.want)
		}
	}
}
