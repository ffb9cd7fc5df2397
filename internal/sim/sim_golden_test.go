package sim

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/datahelix/datahelix/gpu"
	"github.com/datahelix/datahelix/internal/step"
	"github.com/datahelix/datahelix/plan"
)

var rewriteSimGolden = flag.Bool("rewrite-sim-golden", false, "rewrite testdata/sim_golden.json from the current simulator")

// goldenConfigs are multi-rank simulations whose records are pinned by
// testdata/sim_golden.json: every loader on a skewed workload, and again
// with slow ranks, a memory budget and frame-dependent GPU steps.
func goldenConfigs() map[string]Config {
	out := map[string]Config{}
	for _, k := range []step.Kind{step.KindTorch, step.KindLocal, step.KindStatic, step.KindHelix, step.KindHelixNoGate, step.KindOracle,
		step.KindHelixNoTrain, step.KindTorchPack} {
		out[k.String()] = Config{Loader: k, Ranks: 4, Batch: 4, Steps: 40, Workers: 2,
			GPU: gpu.Model{Base: 45 * time.Millisecond}, Bandwidth: 1000 * plan.One, LatencyUS: 20, AllreduceUS: 300, Margin: 200,
			Samples: skewed(4, 40000)}
		out[k.String()+"-slow"] = Config{Loader: k, Ranks: 4, Batch: 4, Steps: 40, Workers: 3, Budget: 8 << 20,
			GPU: gpu.Model{Base: 20 * time.Millisecond, PerFrame: time.Millisecond}, Bandwidth: 500 * plan.One, LatencyUS: 50,
			Speed: []int64{plan.One, 2 * plan.One, plan.One, 3 * plan.One / 2}, Samples: skewed(4, 20000)}
		// Two ranks pinned to each core, with start-up work: processor
		// sharing.
		out[k.String()+"-shared"] = Config{Loader: k, Ranks: 4, Batch: 4, Steps: 30, Workers: 2,
			GPU: gpu.Model{Base: 60 * time.Millisecond}, Bandwidth: 1000 * plan.One, LatencyUS: 20, AllreduceUS: 500, Margin: 200,
			CPUs: &CPUShare{Group: []int{0, 1, 0, 1}, Cores: []int{1, 1}}, StartUS: []int64{30000, 0, 10000, 50000},
			Speed: []int64{plan.One, 3 * plan.One / 2, plan.One, plan.One}, Samples: skewed(4, 15000)}
		// othersConfig is the same with other processes' threads.
		out[k.String()+"-others"] = othersConfig(out[k.String()+"-shared"])
	}
	return out
}

// recordsDigest hashes a simulation's step records (the fields every
// version of the simulator fills) and its wall time.
func recordsDigest(res *Result) string {
	h := sha256.New()
	for _, r := range res.Records {
		fmt.Fprintf(h, "%d %d %d %d %d %d %d %v %d %d %d %d\n", r.Step, r.Rank, r.RequestUS, r.ReadyUS, r.DeliverUS, r.WaitUS,
			r.ComputeUS, r.Miss, r.Samples, r.BytesIn, r.BytesOut, r.Hash)
	}
	fmt.Fprintf(h, "wall %d\n", res.WallUS)
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// TestSimGolden pins the simulator's records on multi-rank runs. The
// digests of the runs without shared cores were made by the per-rank
// simulator of commit 70166b4, before the one event queue and processor
// sharing: the queue changed no record. Those of the "-shared" runs were
// made at commit 50239d7, before other processes' threads coupled the
// core groups, which changed none of them; the "-others" runs', at
// their introduction. A change meant to alter the simulation rewrites
// them with -rewrite-sim-golden and says why in its commit.
func TestSimGolden(t *testing.T) {
	const path = "testdata/sim_golden.json"
	got := map[string]string{}
	for name, cfg := range goldenConfigs() {
		res, err := Run(cfg)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got[name] = recordsDigest(res)
	}
	if *rewriteSimGolden {
		b, err := json.MarshalIndent(got, "", " ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]string
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if len(want) != len(got) {
		t.Errorf("%s has %d digests, the test makes %d", path, len(want), len(got))
	}
	for name, d := range got {
		if want[name] != d {
			t.Errorf("%s: records digest %s, want %s", name, d, want[name])
		}
	}
}

// othersConfig is cfg with one and a half threads of other processes
// moving between its cores.
func othersConfig(cfg Config) Config {
	cpus := *cfg.CPUs
	cpus.Others = 3 * OtherUnit / 2
	cfg.CPUs = &cpus
	return cfg
}
