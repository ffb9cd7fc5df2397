package eval

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/datahelix/datahelix/internal/bench/workload"
	"github.com/datahelix/datahelix/internal/metrics"
	"github.com/datahelix/datahelix/internal/step"
)

// TestRunSimStopsWhenCancelled checks that a cancellation reaches
// inside the drawing and the simulation: a run of several seconds
// returns within a second of it (it ran to the end of its simulation,
// 11 s at 1024 ranks and 150 steps, and SIGTERM waited for it).
func TestRunSimStopsWhenCancelled(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a few seconds")
	}
	ws, _ := workload.SelectWorkloads("kinetics")
	for _, after := range []time.Duration{100 * time.Millisecond, 1500 * time.Millisecond} {
		ctx, cancel := context.WithCancel(context.Background())
		timer := time.AfterFunc(after, cancel)
		var cancelled time.Time
		t0 := time.Now()
		_, err := RunSim(ctx, EvalConfig{Workloads: ws, Loaders: []step.Kind{step.KindHelix}, Ranks: 128, Steps: 1500, Parallel: 1,
			Progress: func(int, int) { cancelled = time.Now() }})
		end := time.Now()
		timer.Stop()
		cancel()
		if !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled after %v: err = %v, want context.Canceled (the run took %v)", after, err, end.Sub(t0))
			continue
		}
		if !cancelled.IsZero() {
			t.Errorf("cancelled after %v: the simulation still finished", after)
		}
		if late := end.Sub(t0) - after; late > time.Second {
			t.Errorf("cancelled after %v: RunSim returned %v later, want within a second", after, late)
		}
	}
}

func TestRunScaleSmall(t *testing.T) {
	r, err := RunScale(context.Background(), ScaleConfig{Workload: "kinetics", Loader: step.KindHelix, Ranks: 32, Batch: 4, Steps: 12}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Ranks != 32 || r.Batch != 4 || r.Steps != 12 || r.Loader != "helix" {
		t.Errorf("ran %+v", r)
	}
	if r.PlanUSP50 <= 0 || r.PlanUSP99 < r.PlanUSP50 || r.PlanUSMax < r.PlanUSP99 || r.ElapsedS <= 0 {
		t.Errorf("plan times p50 %v p99 %v max %v, elapsed %v", r.PlanUSP50, r.PlanUSP99, r.PlanUSMax, r.ElapsedS)
	}
}

var (
	scaleFlag  = flag.Bool("scale", false, "run the 8192-rank scale configuration (about a minute)")
	scaleRanks = flag.Int("scale-ranks", DefaultScale.Ranks, "world size of the -scale run")
)

// TestScaleGoal runs the scale configuration with -scale: 8192
// ranks, B=16, 100 steps. It reports the time; the 120 s and 20 ms goals
// are judged in the report, not here (the machine is shared).
func TestScaleGoal(t *testing.T) {
	if !*scaleFlag {
		t.Skip("the 8192-rank run takes about a minute: go test ./internal/bench/eval -run TestScaleGoal -scale -v")
	}
	cfg := DefaultScale
	cfg.Ranks = *scaleRanks
	r, err := RunScale(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("scale: %+v", *r)
}

// TestRuleLetsTheOracleKeepUp checks what the provisioning rule promises:
// with preparation throughput 1.2x what an ideal loader's GPUs consume,
// the ideal loader hardly stalls. The oracle (perfect costs, free
// transfers) must miss under 1 % of its steps after its warm-up on any
// workload, at the published 8 ranks.
func TestRuleLetsTheOracleKeepUp(t *testing.T) {
	ws, err := workload.SelectWorkloads("all")
	if err != nil {
		t.Fatal(err)
	}
	ev, err := RunSim(context.Background(), EvalConfig{Workloads: ws, Loaders: []step.Kind{step.KindOracle},
		Ranks: 8, Steps: 120, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(ev.Results) != len(ws) {
		t.Fatalf("%d results for %d workloads", len(ev.Results), len(ws))
	}
	// In the WebDataset layout a step's global batch is drawn from the
	// shards the streams hold, so its cost varies around the mean the rule
	// provisions for: the oracle may miss a rare step, never 1 % of them
	// (below what the report counts as something to reduce).
	for _, r := range ev.Results {
		if r.SteadyStepMissRate >= 0.01 {
			t.Errorf("%s: the oracle misses %.2f %% of its steps after warm-up (stall %.2f %% of wall): the rule under-provisions it",
				r.Workload, 100*r.SteadyStepMissRate, 100*r.SteadyJobStallFrac)
		}
	}
}

func TestPlural(t *testing.T) {
	for _, tt := range []struct {
		n    int
		want string
	}{{0, "0 ranks"}, {1, "1 rank"}, {2, "2 ranks"}, {1024, "1024 ranks"}} {
		if got := plural(tt.n, "rank"); got != tt.want {
			t.Errorf("plural(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
}

// TestRunSimRefusesSameName checks that a library caller that builds the
// workload list itself is refused two workloads of one name, as
// workload.SelectWorkloads refuses them.
func TestRunSimRefusesSameName(t *testing.T) {
	w, _ := workload.SelectWorkloads("kinetics")
	_, err := RunSim(context.Background(), EvalConfig{Workloads: []*workload.Workload{w[0], w[0]}, Ranks: 2, Steps: 2})
	if err == nil || !strings.Contains(err.Error(), "two workloads named kinetics") {
		t.Errorf("RunSim with kinetics twice: got %v, want it refused", err)
	}
}

// TestSetSteady: a result takes metrics.SteadyState's job-level and
// warm-up figures from hand-made records, and writes the steady ones as
// null when the run had no step after its warm-up.
func TestSetSteady(t *testing.T) {
	// Two ranks, three steps of 10 ms GPU each, the first the warm-up.
	// Step 1: rank 1 waits 4 ms and misses; step 2: both on time.
	recs := []metrics.StepRecord{
		{Step: 0, Rank: 0, RequestUS: 0, DeliverUS: 5000, WaitUS: 5000, GPUUS: 10000, Samples: 2, Miss: true},
		{Step: 0, Rank: 1, RequestUS: 0, DeliverUS: 6000, WaitUS: 6000, GPUUS: 10000, Samples: 2, Miss: true},
		{Step: 1, Rank: 0, RequestUS: 16000, DeliverUS: 16000, GPUUS: 10000, Samples: 2},
		{Step: 1, Rank: 1, RequestUS: 16000, DeliverUS: 20000, WaitUS: 4000, GPUUS: 10000, Samples: 2, Miss: true},
		{Step: 2, Rank: 0, RequestUS: 30000, DeliverUS: 30000, GPUUS: 10000, Samples: 2},
		{Step: 2, Rank: 1, RequestUS: 30000, DeliverUS: 30000, GPUUS: 10000, Samples: 2},
	}
	var r Result
	r.SetSteady(metrics.SteadyState(recs, 1, 40000))
	want := Result{SteadySteps: 2, SteadyStepMissRate: 0.5, SteadyJobStallFrac: 4000.0 / 24000, SteadyThroughputSPS: 8 / 0.024,
		SteadyEfficiency: (8 / 0.024) / 400, SteadyMissRate: 0.25, SteadyGPUWaitFrac: 4000.0 / (2 * 24000), TimeToFirstBatchS: 0.006, WarmupStallS: 0.006}
	if math.Abs(r.SteadyEfficiency-want.SteadyEfficiency) > 1e-9 || math.Abs(r.SteadyThroughputSPS-want.SteadyThroughputSPS) > 1e-9 {
		t.Errorf("efficiency %v, throughput %v; want %v, %v", r.SteadyEfficiency, r.SteadyThroughputSPS, want.SteadyEfficiency, want.SteadyThroughputSPS)
	}
	r.SteadyEfficiency, r.SteadyThroughputSPS = want.SteadyEfficiency, want.SteadyThroughputSPS
	if r != want {
		t.Errorf("SetSteady gave %+v\nwant %+v", r, want)
	}
	var none Result
	none.SetSteady(metrics.SteadyState(recs[:2], 1, 16000))
	data, err := json.Marshal(none)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"steady_step_miss_rate", "steady_job_stall_frac", "steady_efficiency", "steady_throughput_sps"} {
		if v, ok := doc[k]; !ok || v != nil {
			t.Errorf("%s = %v (present %v), want null without steady steps", k, v, ok)
		}
	}
	if doc["time_to_first_batch_s"] != 0.006 || doc["warmup_stall_s"] != 0.006 {
		t.Errorf("warm-up figures %v, %v; want 0.006 each", doc["time_to_first_batch_s"], doc["warmup_stall_s"])
	}
}

// TestSetupMeasuresSkew checks that a run measures the load
// autocorrelation behind the skew label, and that at the labels' own
// setting (8 ranks, 2,000 steps, seed 1) it gives the file's label.
func TestSetupMeasuresSkew(t *testing.T) {
	ws, err := workload.SelectWorkloads("kinetics,video_image_mix")
	if err != nil {
		t.Fatal(err)
	}
	ev, err := RunSim(context.Background(), EvalConfig{Workloads: ws, Loaders: []step.Kind{step.KindTorch},
		Ranks: workload.SkewRanks, Steps: workload.SkewSteps, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range ev.Setups {
		if got := workload.SkewLabel(s.LoadAutocorr); got != ws[i].Skew {
			t.Errorf("%s: autocorrelation %.3f gives %s, the file says %s", s.Workload, s.LoadAutocorr, got, ws[i].Skew)
		}
	}
}
