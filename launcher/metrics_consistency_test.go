package launcher

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/datahelix/datahelix/internal/gen/gentest"
	"github.com/datahelix/datahelix/internal/metrics"
)

// jsonFigures are the figures of one loader's --json object that the
// trace determines, read by their JSON names.
type jsonFigures struct {
	Loader              string   `json:"loader"`
	Ranks               int      `json:"ranks"`
	FirstStep           int64    `json:"first_step"`
	Steps               int64    `json:"steps"`
	Misses              int      `json:"misses"`
	MissRate            float64  `json:"miss_rate"`
	GPUWaitS            float64  `json:"gpu_wait_s"`
	GPUWaitFrac         float64  `json:"gpu_wait_frac"`
	ThroughputSPS       float64  `json:"throughput_sps"`
	WallS               float64  `json:"wall_s"`
	BytesMovedPerStep   float64  `json:"bytes_moved_per_step"`
	PlanUSP50           float64  `json:"plan_us_p50"`
	AllgatherUSP50      float64  `json:"allgather_us_p50"`
	DroppedSamples      int      `json:"dropped_samples"`
	DamagedSamples      int      `json:"damaged_samples"`
	BatchesHash         string   `json:"batches_hash"`
	WarmupSteps         int64    `json:"warmup_steps"`
	SteadySteps         int64    `json:"steady_steps"`
	SteadyMissRate      *float64 `json:"steady_miss_rate"`
	SteadyGPUWaitFrac   *float64 `json:"steady_gpu_wait_frac"`
	SteadyThroughputSPS *float64 `json:"steady_throughput_sps"`
	SteadyStepMissRate  *float64 `json:"steady_step_miss_rate"`
	SteadyJobStallFrac  *float64 `json:"steady_job_stall_frac"`
}

// traceRecord is one --trace line, read by its JSON names.
type traceRecord struct {
	Loader    string `json:"loader"`
	Step      int64  `json:"step"`
	Rank      int    `json:"rank"`
	RequestUS int64  `json:"request_us"`
	ReadyUS   int64  `json:"ready_us"`
	DeliverUS int64  `json:"deliver_us"`
	WaitUS    int64  `json:"wait_us"`
	ComputeUS int64  `json:"compute_us"`
	Miss      bool   `json:"miss"`
	Samples   int    `json:"samples"`
	Dropped   int    `json:"dropped"`
	Damaged   int    `json:"damaged"`
	BytesIn   int64  `json:"bytes_in"`
	BytesOut  int64  `json:"bytes_out"`
	PlanUS    int64  `json:"plan_us"`
	GatherUS  int64  `json:"allgather_us"`
	Digest    uint64 `json:"digest,string"`
	TolUS     int64  `json:"tolerance_us"`
}

// recomputed is a loader's figures worked out from its trace lines by
// the definitions of DESIGN.md and the README, apart from the summary
// code: a miss is a batch ready more than its tolerance (1 ms, or 2 % of
// the GPU step when that is more) after the GPU asked for it,
// the GPU wait is the time from request to delivery, the wall time runs
// from the first request to the last rank's end (its last delivery plus
// that step's compute), throughput counts delivered samples.
type recomputed struct {
	firstStep, steps                   int64
	misses                             int
	missRate, waitS, waitFrac, wallS   float64
	throughput, movedPerStep           float64
	planP50, gatherP50                 float64
	dropped, damaged                   int
	hash                               string
	steadySteps                        int64
	steadyMiss, steadyWait, steadyTput float64
	stepMiss, jobStall                 float64 // the job's: a step is missed if any rank is, lasts as its slowest
}

// recompute works out the figures of one loader's trace lines recs, run
// over ranks ranks up to step end (exclusive) with warm-up warmup.
func recompute(t *testing.T, recs []traceRecord, ranks int, end, warmup int64) recomputed {
	t.Helper()
	var r recomputed
	if len(recs) == 0 {
		t.Fatal("no trace lines")
	}
	r.firstStep = recs[0].Step
	for _, x := range recs {
		r.firstStep = min(r.firstStep, x.Step)
	}
	r.steps = end - r.firstStep
	// One line per rank per step, each rank's in step order.
	next := make([]int64, ranks)
	for i := range next {
		next[i] = r.firstStep
	}
	last := make([]traceRecord, ranks)
	start := recs[0].RequestUS
	for _, x := range recs {
		if x.Rank < 0 || x.Rank >= ranks || x.Step != next[x.Rank] {
			t.Fatalf("trace line of rank %d step %d out of order (rank's next step %v)", x.Rank, x.Step, next)
		}
		next[x.Rank]++
		last[x.Rank] = x
		start = min(start, x.RequestUS)
	}
	for rank, n := range next {
		if n != end {
			t.Fatalf("rank %d has trace lines up to step %d, want up to %d", rank, n-1, end-1)
		}
	}
	stop := int64(0)
	for _, x := range last {
		stop = max(stop, x.DeliverUS+x.ComputeUS)
	}
	wall := float64(stop - start)
	r.wallS = wall / 1e6
	var wait, moved, in int64
	samples := 0
	var plans, gathers []int64
	perStep := map[int64]uint64{}
	steadyFrom := r.firstStep + warmup
	steadyStart := int64(math.MaxInt64)
	var steadyWait int64
	steadyMisses, steadySamples := 0, 0
	stepMissed, stepWait := map[int64]bool{}, map[int64]int64{}
	for _, x := range recs {
		w := x.DeliverUS - x.RequestUS
		late := x.ReadyUS-x.RequestUS > x.TolUS
		if x.TolUS < 1000 {
			t.Errorf("%s rank %d step %d: tolerance %d µs, less than 1 ms", x.Loader, x.Rank, x.Step, x.TolUS)
		}
		if x.WaitUS != w || x.Miss != late {
			t.Errorf("%s rank %d step %d: wait_us %d, miss %v; request %d, ready %d, deliver %d give %d, %v",
				x.Loader, x.Rank, x.Step, x.WaitUS, x.Miss, x.RequestUS, x.ReadyUS, x.DeliverUS, w, late)
		}
		wait += w
		samples += x.Samples
		moved += x.BytesOut
		in += x.BytesIn
		r.dropped += x.Dropped
		r.damaged += x.Damaged
		if late {
			r.misses++
		}
		if x.Rank == 0 && (x.PlanUS > 0 || x.GatherUS > 0) {
			plans, gathers = append(plans, x.PlanUS), append(gathers, x.GatherUS)
		}
		perStep[x.Step] += x.Digest
		if x.Step >= steadyFrom {
			steadyWait += w
			steadySamples += x.Samples
			if late {
				steadyMisses++
			}
			if x.Step == steadyFrom {
				steadyStart = min(steadyStart, x.RequestUS)
			}
			stepMissed[x.Step] = stepMissed[x.Step] || late
			stepWait[x.Step] = max(stepWait[x.Step], w)
		}
	}
	if in != moved {
		t.Errorf("%s: %d bytes received, %d sent", recs[0].Loader, in, moved)
	}
	rankSteps := float64(int64(ranks) * r.steps)
	r.missRate = float64(r.misses) / rankSteps
	r.waitS = float64(wait) / 1e6
	r.waitFrac = float64(wait) / (float64(ranks) * wall)
	r.throughput = float64(samples) / r.wallS
	r.movedPerStep = float64(moved) / float64(r.steps)
	// The p50 of rank 0's planned steps: the middle value, the upper one
	// of an even count.
	middle := func(v []int64) float64 {
		if len(v) == 0 {
			return 0
		}
		slices.Sort(v)
		return float64(v[len(v)/2])
	}
	r.planP50, r.gatherP50 = middle(plans), middle(gathers)
	h := uint64(0xcbf29ce484222325)
	for s := r.firstStep; s < end; s++ {
		h = metrics.Mix64(h ^ metrics.Mix64(uint64(s)) ^ perStep[s])
	}
	r.hash = fmt.Sprintf("%016x", h)
	if r.steadySteps = max(end-steadyFrom, 0); r.steadySteps > 0 {
		span := float64(stop - steadyStart)
		r.steadyMiss = float64(steadyMisses) / float64(int64(ranks)*r.steadySteps)
		r.steadyWait = float64(steadyWait) / (float64(ranks) * span)
		r.steadyTput = float64(steadySamples) / (span / 1e6)
		var missed, stall int64
		for st, m := range stepMissed {
			if m {
				missed++
			}
			stall += stepWait[st]
		}
		r.stepMiss = float64(missed) / float64(r.steadySteps)
		r.jobStall = float64(stall) / span
	}
	return r
}

// readRun reads a run's --json and --trace files: the loaders' figures
// and each loader's trace lines.
func readRun(t *testing.T, jsonPath, tracePath string) ([]jsonFigures, map[string][]traceRecord) {
	t.Helper()
	raw, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var figs []jsonFigures
	if err := json.Unmarshal(raw, &figs); err != nil {
		t.Fatalf("--json: %v", err)
	}
	f, err := os.Open(tracePath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lines := map[string][]traceRecord{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var x traceRecord
		if err := json.Unmarshal(sc.Bytes(), &x); err != nil {
			t.Fatalf("--trace line %q: %v", sc.Text(), err)
		}
		lines[x.Loader] = append(lines[x.Loader], x)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return figs, lines
}

// checkFigures compares a run's --json figures, and the table's rows
// printed from them, with those recomputed from its --trace.
func checkFigures(t *testing.T, name string, figs []jsonFigures, lines map[string][]traceRecord, table string, end, warmup int64) {
	t.Helper()
	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(a)) }
	for _, s := range figs {
		r := recompute(t, lines[s.Loader], s.Ranks, end, warmup)
		at := fmt.Sprintf("%s, loader %s", name, s.Loader)
		ints := []struct {
			what       string
			json, want int64
		}{
			{"first_step", s.FirstStep, r.firstStep}, {"steps", s.Steps, r.steps}, {"misses", int64(s.Misses), int64(r.misses)},
			{"dropped_samples", int64(s.DroppedSamples), int64(r.dropped)}, {"damaged_samples", int64(s.DamagedSamples), int64(r.damaged)},
			{"warmup_steps", s.WarmupSteps, warmup}, {"steady_steps", s.SteadySteps, r.steadySteps},
		}
		for _, c := range ints {
			if c.json != c.want {
				t.Errorf("%s: %s %d in --json, %d from the trace", at, c.what, c.json, c.want)
			}
		}
		floats := []struct {
			what       string
			json, want float64
		}{
			{"miss_rate", s.MissRate, r.missRate}, {"gpu_wait_s", s.GPUWaitS, r.waitS}, {"gpu_wait_frac", s.GPUWaitFrac, r.waitFrac},
			{"wall_s", s.WallS, r.wallS}, {"throughput_sps", s.ThroughputSPS, r.throughput},
			{"bytes_moved_per_step", s.BytesMovedPerStep, r.movedPerStep},
			{"plan_us_p50", s.PlanUSP50, r.planP50}, {"allgather_us_p50", s.AllgatherUSP50, r.gatherP50},
		}
		steady := []*float64{s.SteadyMissRate, s.SteadyGPUWaitFrac, s.SteadyThroughputSPS, s.SteadyStepMissRate, s.SteadyJobStallFrac}
		if r.steadySteps == 0 {
			if slices.ContainsFunc(steady, func(f *float64) bool { return f != nil }) {
				t.Errorf("%s: steady_ figures %v with no step after the warm-up, want null", at, steady)
			}
		} else if slices.Contains(steady, nil) {
			t.Errorf("%s: a steady_ figure is null with %d steps after the warm-up", at, r.steadySteps)
		} else {
			floats = append(floats, []struct {
				what       string
				json, want float64
			}{{"steady_miss_rate", *s.SteadyMissRate, r.steadyMiss}, {"steady_gpu_wait_frac", *s.SteadyGPUWaitFrac, r.steadyWait},
				{"steady_throughput_sps", *s.SteadyThroughputSPS, r.steadyTput},
				{"steady_step_miss_rate", *s.SteadyStepMissRate, r.stepMiss}, {"steady_job_stall_frac", *s.SteadyJobStallFrac, r.jobStall}}...)
		}
		for _, c := range floats {
			if !near(c.json, c.want) {
				t.Errorf("%s: %s %v in --json, %v from the trace", at, c.what, c.json, c.want)
			}
		}
		if s.BatchesHash != r.hash {
			t.Errorf("%s: batches_hash %s in --json, %s from the trace", at, s.BatchesHash, r.hash)
		}
		// The table prints the same figures: percentages of the JSON's
		// fractions, and the GPU wait per rank.
		for _, cell := range []string{
			fmt.Sprintf("%d (%.1f%%)", r.misses, 100*r.missRate),
			fmt.Sprintf("%.2fs (%.1f%%)", r.waitS/float64(s.Ranks), 100*r.waitFrac),
			fmt.Sprintf("%.1f samples/s", r.throughput), fmt.Sprintf("%.2fs", r.wallS), r.hash,
		} {
			if !strings.Contains(table, " "+cell) {
				t.Errorf("%s: the table has no cell %q:\n%s", at, cell, table)
			}
		}
	}
}

// TestRunFiguresAgreeWithTrace runs a short 4-rank job on a dataset with
// an undecodable sample per rank, saving a checkpoint, then resumes it,
// and checks that every figure of --json and of the table agrees with the
// same figure worked out from --trace (recompute): the warm-up boundary,
// the resumed run's first step and its batches hash, which must be the
// first run's over the same steps.
func TestRunFiguresAgreeWithTrace(t *testing.T) {
	data := t.TempDir()
	shards, err := filepath.Glob(filepath.Join(gentest.Tiny(t), "*.tar"))
	if err != nil || len(shards) != 8 {
		t.Fatalf("tiny dataset: %d shards (%v), want 8", len(shards), err)
	}
	for _, p := range shards {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		writeTestFile(t, filepath.Join(data, filepath.Base(p)), b)
	}
	undecodableShards(t, data, 4) // one bad sample in each rank's 9
	const steps, every, horizon = 12, 6, 3
	dir, ck := t.TempDir(), t.TempDir()
	args := func(run string, extra ...string) []string {
		return fastRun(data, append([]string{"--ranks", "4", "--steps", strconv.Itoa(steps), "--horizon", strconv.Itoa(horizon),
			"--loader", "torch,helix", "--checkpoint-dir", ck, "--checkpoint-every", strconv.Itoa(every),
			"--json", filepath.Join(dir, run+".json"), "--trace", filepath.Join(dir, run+".jsonl")}, extra...)...)
	}
	code, table, stderr := runMain(args("first")...)
	if code != 0 {
		t.Fatalf("first run: exit %d\n%s", code, stderr)
	}
	figs, lines := readRun(t, filepath.Join(dir, "first.json"), filepath.Join(dir, "first.jsonl"))
	checkFigures(t, "first run", figs, lines, table, steps, horizon)
	if figs[0].DroppedSamples == 0 {
		t.Errorf("first run: no sample dropped, want the undecodable ones counted")
	}

	code, table, stderr = runMain(args("resumed", "--resume")...)
	if code != 0 {
		t.Fatalf("resumed run: exit %d\n%s", code, stderr)
	}
	resumed, rlines := readRun(t, filepath.Join(dir, "resumed.json"), filepath.Join(dir, "resumed.jsonl"))
	checkFigures(t, "resumed run", resumed, rlines, table, steps, horizon)
	for i, s := range resumed {
		if s.FirstStep != every {
			t.Errorf("resumed run, loader %s: first_step %d, want %d", s.Loader, s.FirstStep, every)
		}
		// The first run's trace over the resumed steps gives the resumed
		// run's batches hash and dropped samples.
		var tail []traceRecord
		for _, x := range lines[figs[i].Loader] {
			if x.Step >= every {
				tail = append(tail, x)
			}
		}
		if want := recompute(t, tail, s.Ranks, steps, horizon); s.BatchesHash != want.hash || s.DroppedSamples != want.dropped {
			t.Errorf("resumed run, loader %s: batches hash %s, %d dropped; the first run's over steps %d-%d: %s, %d",
				s.Loader, s.BatchesHash, s.DroppedSamples, every, steps-1, want.hash, want.dropped)
		}
	}
}
