package bench

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/datahelix/datahelix/internal/bench/eval"
	"github.com/datahelix/datahelix/internal/bench/workload"
	"github.com/datahelix/datahelix/internal/planlimits"
	"github.com/datahelix/datahelix/internal/step"
)

// TestRunConfigCheck checks that every setting that cannot run is found
// by Check, naming its flag, before anything runs.
func TestRunConfigCheck(t *testing.T) {
	ws, err := workload.SelectWorkloads("kinetics")
	if err != nil {
		t.Fatal(err)
	}
	good := func() RunConfig {
		// The memory limit of a 24 GiB node, whatever this one has.
		scale := eval.DefaultScale
		scale.MemoryLimit = 19e9
		return RunConfig{Eval: eval.EvalConfig{Workloads: ws, Ranks: 8, Steps: 10, MemoryLimit: 19e9}, Sections: []string{}, Scale: scale}
	}
	for _, tt := range []struct {
		name string
		edit func(c *RunConfig)
		want string // "" when accepted
	}{
		{"defaults", func(c *RunConfig) {}, ""},
		{"scale zero values are refused, not defaults", func(c *RunConfig) { c.Scale.Ranks = 0 }, "--scale-ranks 0"},
		{"real without oracle", func(c *RunConfig) { c.Real, c.Eval.Loaders = true, []step.Kind{step.KindOracle, step.KindHelix} }, ""},
		{"ranks 0", func(c *RunConfig) { c.Eval.Ranks = 0 }, "--ranks 0: want 1.."},
		{"ranks over the planner's", func(c *RunConfig) { c.Eval.Ranks = planlimits.Ranks + 1 }, fmt.Sprintf("--ranks %d: want 1..%d", planlimits.Ranks+1, planlimits.Ranks)},
		{"steps", func(c *RunConfig) { c.Eval.Steps = 0 }, "--steps 0"},
		{"batch", func(c *RunConfig) { c.Eval.Batch = planlimits.Batch + 1 }, fmt.Sprintf("--batch %d", planlimits.Batch+1)},
		{"parallel", func(c *RunConfig) { c.Eval.Parallel = -1 }, "--parallel -1"},
		{"bandwidth", func(c *RunConfig) { c.Eval.Network = eval.Network{BandwidthMBs: 0, LatencyUS: 5} }, "--bandwidth-mbs 0"},
		{"latency", func(c *RunConfig) { c.Eval.Network = eval.Network{BandwidthMBs: 1, LatencyUS: -1} }, "--latency-us -1"},
		{"same workload twice", func(c *RunConfig) { c.Eval.Workloads = []*workload.Workload{ws[0], ws[0]} }, "two workloads named kinetics"},
		{"real oracle only", func(c *RunConfig) { c.Real, c.Eval.Loaders = true, []step.Kind{step.KindOracle} }, "--loaders oracle: --real needs another loader"},
		{"timeline", func(c *RunConfig) { c.Timeline = "kinetics" }, ""},
		{"timeline not run", func(c *RunConfig) { c.Timeline = "text" }, "--timeline text: not among the workloads run (kinetics)"},
		{"section", func(c *RunConfig) { c.Sections = []string{"planner", "gpu"} }, `--sections: unknown section "gpu"`},
		{"scale ranks", func(c *RunConfig) { c.Scale.Ranks = planlimits.Ranks + 1 }, fmt.Sprintf("--scale-ranks %d: want 1..%d", planlimits.Ranks+1, planlimits.Ranks)},
		{"scale batch", func(c *RunConfig) { c.Scale.Batch = -2 }, "--scale-batch -2"},
		{"scale steps", func(c *RunConfig) { c.Scale.Steps = -1 }, "--scale-steps -1"},
		{"scale workload", func(c *RunConfig) { c.Scale.Workload = "nope" }, `bench: --scale-workload: invalid workload: unknown workload "nope"`},
		// A real run's world shares this machine's cores.
		{"real ranks", func(c *RunConfig) { c.Real, c.Eval.Ranks = true, MaxRealRanks(runtime.NumCPU()) }, ""},
		{"real ranks over the cap", func(c *RunConfig) { c.Real, c.Eval.Ranks = true, 2000 },
			fmt.Sprintf("bench: --ranks 2000: --real runs at most %d ranks here", MaxRealRanks(runtime.NumCPU()))},
		{"simulated ranks are not capped", func(c *RunConfig) { c.Eval.Ranks = 2000 }, ""},
		// Memory: the 65536-rank run grew to 24 GB and was killed; steps
		// had no bound. The documented runs stay allowed.
		{"ranks x steps over the memory limit", func(c *RunConfig) { c.Eval.Ranks, c.Eval.Steps = 65536, 2000 },
			"bench: --ranks 65536 --steps 2000 --batch 16 (workload kinetics): a simulation would need about 220.0 GB of memory"},
		{"the limit is named", func(c *RunConfig) { c.Eval.Ranks, c.Eval.Steps = 65536, 2000 },
			"over the limit of 19.0 GB (the limit set): lower --ranks, --steps or --batch"},
		{"steps without bound", func(c *RunConfig) { c.Eval.Steps = 100000000 }, "bench: --ranks 8 --steps 100000000 --batch 16 (workload kinetics): a simulation would need about 1.25 TB"},
		{"batch counts", func(c *RunConfig) { c.Eval.Ranks, c.Eval.Batch = 65536, 256 }, "--ranks 65536 --steps 10 --batch 256"},
		{"1024 ranks of every workload at the default steps", func(c *RunConfig) {
			c.Eval.Workloads, _ = workload.SelectWorkloads("all")
			c.Eval.Ranks, c.Eval.Steps = 1024, 200
		}, ""},
		{"the default run", func(c *RunConfig) { c.Eval.Workloads, _ = workload.SelectWorkloads("all"); c.Eval.Steps = 200 }, ""},
		{"scale over the memory limit", func(c *RunConfig) { c.Scale.Ranks, c.Scale.Steps = 65536, 100000 },
			"bench: --scale-ranks 65536 --scale-steps 100000 --scale-batch 16 (workload panda70m): a simulation would need about"},
		{"scale steps over the memory limit", func(c *RunConfig) { c.Scale.Steps = 1 << 30 }, "--scale-steps 1073741824"},
		// Bandwidths whose fixed point (1/65536 MB/s) truncates to 0 or
		// overflows were simulated as 1 GB/s.
		{"bandwidth below the fixed point", func(c *RunConfig) { c.Eval.Network = eval.Network{BandwidthMBs: 1e-6, LatencyUS: 5} },
			"bench: --bandwidth-mbs 1e-06: want 1.52587890625e-05 (1/65536) to 2.68435456e+08 MB/s"},
		{"bandwidth overflowing", func(c *RunConfig) { c.Eval.Network = eval.Network{BandwidthMBs: 2e14, LatencyUS: 5} }, "--bandwidth-mbs 2e+14: want"},
		{"bandwidth at its limits", func(c *RunConfig) { c.Eval.Network = eval.Network{BandwidthMBs: eval.MinBandwidthMBs} }, ""},
		{"bandwidth at its top", func(c *RunConfig) {
			c.Eval.Network = eval.Network{BandwidthMBs: eval.MaxBandwidthMBs, LatencyUS: eval.MaxLatencyUS}
		}, ""},
		{"latency over the planner's", func(c *RunConfig) { c.Eval.Network = eval.Network{BandwidthMBs: 1, LatencyUS: 1 << 33} },
			fmt.Sprintf("--latency-us %d: want 0..%d", int64(1<<33), int64(planlimits.Latency))},
	} {
		c := good()
		tt.edit(&c)
		err := c.Check()
		if strings.Count(fmt.Sprint(err), "bench:") > 1 {
			t.Errorf("%s: %v says bench: more than once", tt.name, err)
		}
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: got %v, want accepted", tt.name, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: got %v, want an error with %q", tt.name, err, tt.want)
		}
	}
}

// TestRunConfigCheckFindsNoMPIRun checks that --real without mpirun on
// PATH is one clear line before any dataset is generated (it failed
// after seconds of generation with a 600-character exec error), and that
// a simulation does not need mpirun.
func TestRunConfigCheckFindsNoMPIRun(t *testing.T) {
	ws, err := workload.SelectWorkloads("text")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", t.TempDir())
	c := RunConfig{Eval: eval.EvalConfig{Workloads: ws, Ranks: 2, Steps: 10}, Sections: []string{}, Scale: eval.DefaultScale}
	if err := c.Check(); err != nil {
		t.Errorf("simulation without mpirun: %v", err)
	}
	c.Real = true
	err = c.Check()
	if err == nil || !strings.HasPrefix(err.Error(), "bench: --real: mpirun not found on PATH (install openmpi-bin") {
		t.Errorf("got %v, want bench: --real: mpirun not found on PATH (install openmpi-bin ...", err)
	}
}

func TestEvalConfigErrors(t *testing.T) {
	ws, _ := workload.SelectWorkloads("text")
	for _, c := range []struct {
		cfg  eval.EvalConfig
		want string
	}{
		{eval.EvalConfig{Ranks: 8, Steps: 10}, "no workloads"},
		{eval.EvalConfig{Workloads: ws, Ranks: 0, Steps: 10}, "--ranks 0"},
		{eval.EvalConfig{Workloads: ws, Ranks: 8, Steps: 0}, "--steps 0"},
		{eval.EvalConfig{Workloads: ws, Ranks: 8, Steps: 5, Batch: -1}, "--batch -1"},
		{eval.EvalConfig{Workloads: ws, Ranks: 8, Steps: 5, Network: eval.Network{BandwidthMBs: -1}}, "--bandwidth-mbs -1"},
		{eval.EvalConfig{Workloads: ws, Ranks: 8, Steps: 5, Parallel: -1}, "--parallel -1"},
	} {
		if _, err := eval.RunSim(context.Background(), c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("config %+v: err = %v, want %q", c.cfg, err, c.want)
		}
	}
	// Real runs check the same configuration before starting anything.
	if _, err := RunReal(context.Background(), eval.EvalConfig{Workloads: ws, Ranks: 4, Steps: 0}); err == nil || !strings.Contains(err.Error(), "--steps 0") {
		t.Errorf("RunReal with --steps 0: %v", err)
	}
}
