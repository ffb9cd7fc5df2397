package sim

import (
	"context"
	"errors"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/datahelix/datahelix/gpu"
	"github.com/datahelix/datahelix/internal/metrics"
	"github.com/datahelix/datahelix/internal/planlimits"
	"github.com/datahelix/datahelix/internal/step"
	"github.com/datahelix/datahelix/plan"
)

// tinyWorkload is one rank, batch 2, 4 steps: batch 0 holds a 30 ms and a
// 10 ms sample, the others two 5 ms samples. Costs are exact.
func tinyWorkload(step int64, rank int) []Sample {
	costs := [][]int64{{30000, 10000}, {5000, 5000}, {5000, 5000}, {5000, 5000}}[step]
	out := make([]Sample, len(costs))
	for i, c := range costs {
		out[i] = Sample{ID: uint64(step*10 + int64(i)), Bytes: 1000, Cost: c, Est: c}
	}
	return out
}

func tinyConfig(k step.Kind) Config {
	return Config{Loader: k, Ranks: 1, Batch: 2, Steps: 4, Workers: 2,
		GPU: gpu.Model{Base: 10 * time.Millisecond}, Samples: tinyWorkload}
}

type want struct {
	ready, deliver, wait int64 // ms
}

func checkTimeline(t *testing.T, res *Result, wants []want, wallMS int64) {
	t.Helper()
	for i, w := range wants {
		r := res.Records[i]
		got := want{r.ReadyUS / 1000, r.DeliverUS / 1000, r.WaitUS / 1000}
		if got != w {
			t.Errorf("step %d: (ready, deliver, wait) = %v ms, want %v", i, got, w)
		}
	}
	if res.WallUS/1000 != wallMS {
		t.Errorf("wall = %d ms, want %d", res.WallUS/1000, wallMS)
	}
}

// TestSimTorchTimeline checks PyTorch semantics against a timeline
// computed by hand. Two workers, prefetch 2: batches 0 and 2 go to worker
// 0, 1 and 3 to worker 1, each worker decodes its batch's samples one
// after the other. Worker 0: batch 0 = 30+10 ms → ready at 40, batch 2 at
// 50. Worker 1: batch 1 at 10, batch 3 at 20. The GPU (10 ms per step)
// waits 40 ms for batch 0, then never again: steps end at 50, 60, 70, 80.
func TestSimTorchTimeline(t *testing.T) {
	res, err := Run(tinyConfig(step.KindTorch))
	if err != nil {
		t.Fatal(err)
	}
	checkTimeline(t, res, []want{{40, 40, 40}, {10, 50, 0}, {50, 60, 0}, {20, 70, 0}}, 80)
	if res.Summary.Misses != 1 {
		t.Errorf("misses = %d, want 1", res.Summary.Misses)
	}
}

// TestSimLocalTimeline: the same workload under EDF. Both workers take
// batch 0 (30 and 10 ms) → ready at 30. Worker 1 is free at 10 and takes
// batch 1 (10-15, 15-20), then batch 2 (20-25, 25-30); at 30 both take
// batch 3 → ready at 35. The GPU waits 30 ms once; wall 70 ms.
func TestSimLocalTimeline(t *testing.T) {
	res, err := Run(tinyConfig(step.KindLocal))
	if err != nil {
		t.Fatal(err)
	}
	checkTimeline(t, res, []want{{30, 30, 30}, {20, 40, 0}, {30, 50, 0}, {35, 60, 0}}, 70)
}

// skewedConfig simulates loader k on 4 ranks of the skewed workload
// (rank 0's clips 4x heavier) for steps steps, on a 1 GB/s network.
func skewedConfig(k step.Kind, steps int) Config {
	return Config{Loader: k, Ranks: 4, Batch: 4, Steps: steps, Workers: 2,
		GPU: gpu.Model{Base: 45 * time.Millisecond}, Bandwidth: 1000 * plan.One, LatencyUS: 20,
		Samples: skewed(4, 40000)}
}

// skewed builds a workload where rank 0's shards hold long clips and the
// others short ones, correlated over time as with source-homogeneous
// shards.
func skewed(ranks int, heavy int64) func(step int64, rank int) []Sample {
	return func(step int64, rank int) []Sample {
		rng := rand.New(rand.NewPCG(uint64(step), uint64(rank)))
		out := make([]Sample, 4)
		for i := range out {
			c := int64(8000 + rng.IntN(4000))
			if rank == 0 {
				c = heavy + int64(rng.IntN(int(heavy/4)))
			}
			est := c * int64(90+rng.IntN(20)) / 100 // ±10 % model error
			out[i] = Sample{ID: uint64(step)<<20 | uint64(rank)<<8 | uint64(i), Bytes: 200_000, Cost: c, Est: est, Frames: 8, Mem: 1 << 20}
		}
		return out
	}
}

// TestSimHelixBeatsBaselinesOnSkew asserts on miss counts of
// deterministic simulated-GPU runs: with one rank's shards 4x heavier,
// helix misses fewer deadlines than torch and local.
func TestSimHelixBeatsBaselinesOnSkew(t *testing.T) {
	run := func(k step.Kind) metrics.Summary {
		res, err := Run(skewedConfig(k, 60))
		if err != nil {
			t.Fatal(err)
		}
		return res.Summary
	}
	torch, local, helix := run(step.KindTorch), run(step.KindLocal), run(step.KindHelix)
	t.Logf("misses torch %d local %d helix %d; wait frac %.3f %.3f %.3f", torch.Misses, local.Misses, helix.Misses,
		torch.GPUWaitFrac, local.GPUWaitFrac, helix.GPUWaitFrac)
	if !(helix.Misses < local.Misses && helix.Misses < torch.Misses) {
		t.Errorf("helix misses %d, want fewer than local %d and torch %d", helix.Misses, local.Misses, torch.Misses)
	}
	if helix.BatchesHash != torch.BatchesHash || local.BatchesHash != torch.BatchesHash {
		t.Errorf("batches hash differs between loaders: torch %s local %s helix %s", torch.BatchesHash, local.BatchesHash, helix.BatchesHash)
	}
	again := run(step.KindHelix)
	if again != helix {
		t.Errorf("simulation not deterministic:\n%+v\n%+v", helix, again)
	}
}

// TestSimHelixMatchesLocalOnUniform: with i.i.d. samples per rank there is
// nothing to balance; helix must not do worse than local.
func TestSimHelixMatchesLocalOnUniform(t *testing.T) {
	uniform := func(step int64, rank int) []Sample {
		out := make([]Sample, 4)
		for i := range out {
			out[i] = Sample{ID: uint64(step)<<20 | uint64(rank)<<8 | uint64(i), Bytes: 100_000, Cost: 10000, Est: 10000, Frames: 1}
		}
		return out
	}
	run := func(k step.Kind) metrics.Summary {
		res, err := Run(Config{Loader: k, Ranks: 4, Batch: 4, Steps: 40, Workers: 2,
			GPU: gpu.Model{Base: 25 * time.Millisecond}, Samples: uniform})
		if err != nil {
			t.Fatal(err)
		}
		return res.Summary
	}
	local, helix := run(step.KindLocal), run(step.KindHelix)
	if helix.Misses != local.Misses || helix.BytesMovedPerStep != 0 {
		t.Errorf("uniform: helix misses %d (moved %.0f B/step), local %d; want equal and nothing moved",
			helix.Misses, helix.BytesMovedPerStep, local.Misses)
	}
}

// TestSimulateContext checks that a cancellation reaches inside a
// simulation: cancelled while step 5 is planned, a 400-step run stops
// there with the context's error (Simulate alone ran every step). Not
// cancelled, SimulateContext gives Simulate's result exactly.
func TestSimulateContext(t *testing.T) {
	cfg := skewedConfig(step.KindHelix, 400)
	want, err := Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	got, err := RunContext(context.Background(), cfg)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("SimulateContext not cancelled: err %v, result equal to Simulate's: %v", err, err == nil && reflect.DeepEqual(got, want))
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	last := int64(-1)
	cfg.OnPlan = func(step, at int64, in *plan.Input, p *plan.Plan) {
		last = step
		if step == 5 {
			cancel()
		}
	}
	if _, err := RunContext(ctx, cfg); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled at step 5: err = %v, want context.Canceled", err)
	}
	if last > 6 {
		t.Errorf("cancelled at step 5, the simulation still planned step %d", last)
	}
}

// TestSimRefusesNetworkOutOfRange checks that a bandwidth or latency the
// planner would clamp, or a negative one, is refused rather than
// simulated as another network (a negative bandwidth was taken for
// 1 GB/s).
func TestSimRefusesNetworkOutOfRange(t *testing.T) {
	for _, tt := range []struct {
		bw, lat int64
		want    string
	}{
		{-1, 0, "bandwidth -1"},
		{planlimits.Bandwidth + 1, 0, "bandwidth"},
		{plan.One, -1, "latency -1"},
		{plan.One, planlimits.Latency + 1, "latency"},
	} {
		cfg := tinyConfig(step.KindHelix)
		cfg.Bandwidth, cfg.LatencyUS = tt.bw, tt.lat
		if _, err := Run(cfg); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("bandwidth %d, latency %d: err = %v, want it refused saying %q", tt.bw, tt.lat, err, tt.want)
		}
	}
	cfg := tinyConfig(step.KindHelix)
	cfg.Bandwidth, cfg.LatencyUS = planlimits.Bandwidth, planlimits.Latency
	if _, err := Run(cfg); err != nil {
		t.Errorf("bandwidth and latency at their limits: %v", err)
	}
}

// TestSimSlowNetwork runs the skewed job on two nodes of two ranks. Over
// a network as fast as memory, helix balances across it as on one node.
// Over a slow one (2.5 bytes/µs, 20 Mbit/s) every byte that crosses it
// holds back the step's allgather: helix, whose gate prices a move on
// the path it takes, moves less across and keeps its throughput at
// least local's, while helix without the gate loses to local.
func TestSimSlowNetwork(t *testing.T) {
	run := func(k step.Kind, netBW int64) metrics.Summary {
		cfg := skewedConfig(k, 60)
		cfg.Nodes, cfg.NodeBandwidth, cfg.NodeLatencyUS = []int{0, 0, 2, 2}, netBW, 100
		res, err := Run(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return res.Summary
	}
	slow := int64(5 * plan.One / 2)
	local := run(step.KindLocal, slow)
	helix, nogate := run(step.KindHelix, slow), run(step.KindHelixNoGate, slow)
	fast := run(step.KindHelix, 1000*plan.One)
	t.Logf("throughput local %.1f, slow network: helix %.1f (%.0f B/step) nogate %.1f (%.0f B/step); fast network: helix %.1f",
		local.ThroughputSPS, helix.ThroughputSPS, helix.BytesMovedPerStep, nogate.ThroughputSPS, nogate.BytesMovedPerStep, fast.ThroughputSPS)
	if helix.ThroughputSPS < local.ThroughputSPS {
		t.Errorf("slow network: helix %.1f samples/s, below local's %.1f", helix.ThroughputSPS, local.ThroughputSPS)
	}
	if nogate.ThroughputSPS >= local.ThroughputSPS {
		t.Errorf("slow network: helix without the gate %.1f samples/s, not below local's %.1f: the network costs nothing", nogate.ThroughputSPS, local.ThroughputSPS)
	}
	if helix.BytesMovedPerStep >= nogate.BytesMovedPerStep {
		t.Errorf("slow network: helix moved %.0f bytes a step, no fewer than without the gate (%.0f)", helix.BytesMovedPerStep, nogate.BytesMovedPerStep)
	}
	if fast.ThroughputSPS <= helix.ThroughputSPS {
		t.Errorf("helix %.1f samples/s over a fast network, not above its %.1f over a slow one", fast.ThroughputSPS, helix.ThroughputSPS)
	}
}

// frameSkewed is a source where rank 0 reads 16-frame clips and the
// others single images, all of the same decode cost: only GPU work is
// uneven.
func frameSkewed(step int64, rank int) []Sample {
	out := make([]Sample, 4)
	for i := range out {
		f := 1
		if rank == 0 {
			f = 16
		}
		out[i] = Sample{ID: uint64(step)<<20 | uint64(rank)<<8 | uint64(i), Bytes: 100_000, Cost: 4000, Est: 4000, Frames: f, Mem: 1 << 20}
	}
	return out
}

// TestSimGPUWorkBalancing: where only the GPU work is uneven, torch-pack
// (the global batch packed by frames) and helix (its last phase) train
// the same global batches as torch and helix-notrain, faster; torch-pack
// moves no bytes, and helix-notrain has no reason to move any.
func TestSimGPUWorkBalancing(t *testing.T) {
	run := func(k step.Kind) metrics.Summary {
		res, err := Run(Config{Loader: k, Ranks: 4, Batch: 4, Steps: 40, Workers: 2,
			GPU: gpu.Model{Base: 10 * time.Millisecond, PerFrame: 2 * time.Millisecond}, Bandwidth: 1000 * plan.One, LatencyUS: 20, Margin: 200,
			Samples: frameSkewed})
		if err != nil {
			t.Fatal(err)
		}
		return res.Summary
	}
	torch, pack, notrain, helix := run(step.KindTorch), run(step.KindTorchPack), run(step.KindHelixNoTrain), run(step.KindHelix)
	t.Logf("samples/s: torch %.1f, torch-pack %.1f, helix-notrain %.1f, helix %.1f", torch.ThroughputSPS, pack.ThroughputSPS, notrain.ThroughputSPS, helix.ThroughputSPS)
	for _, s := range []metrics.Summary{pack, notrain, helix} {
		if s.BatchesHash != torch.BatchesHash {
			t.Errorf("%s trained other batches (%s) than torch (%s)", s.Loader, s.BatchesHash, torch.BatchesHash)
		}
	}
	if pack.ThroughputSPS < 1.5*torch.ThroughputSPS {
		t.Errorf("torch-pack %.1f samples/s, not 1.5x torch's %.1f", pack.ThroughputSPS, torch.ThroughputSPS)
	}
	if helix.ThroughputSPS < 1.5*notrain.ThroughputSPS {
		t.Errorf("helix %.1f samples/s, not 1.5x helix-notrain's %.1f", helix.ThroughputSPS, notrain.ThroughputSPS)
	}
	if pack.BytesMovedPerStep != 0 || notrain.BytesMovedPerStep != 0 {
		t.Errorf("bytes moved per step: torch-pack %.0f, helix-notrain %.0f; want 0", pack.BytesMovedPerStep, notrain.BytesMovedPerStep)
	}
}
