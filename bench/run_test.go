package bench

import (
	"fmt"
	"strings"
	"testing"

	"github.com/datahelix/datahelix/plan"
	"github.com/datahelix/datahelix/spmd"
)

// TestRunConfigCheck checks that every setting that cannot run is found
// by Check, naming its flag, before anything runs.
func TestRunConfigCheck(t *testing.T) {
	ws, err := SelectWorkloads("kinetics")
	if err != nil {
		t.Fatal(err)
	}
	good := func() RunConfig {
		return RunConfig{Eval: EvalConfig{Workloads: ws, Ranks: 8, Steps: 10}, Sections: []string{}, Scale: DefaultScale}
	}
	for _, tt := range []struct {
		name string
		edit func(c *RunConfig)
		want string // "" when accepted
	}{
		{"defaults", func(c *RunConfig) {}, ""},
		{"scale zero values are refused, not defaults", func(c *RunConfig) { c.Scale.Ranks = 0 }, "--scale-ranks 0"},
		{"real without oracle", func(c *RunConfig) { c.Real, c.Eval.Loaders = true, []spmd.Kind{spmd.KindOracle, spmd.KindHelix} }, ""},
		{"ranks 0", func(c *RunConfig) { c.Eval.Ranks = 0 }, "--ranks 0: want 1.."},
		{"ranks over the planner's", func(c *RunConfig) { c.Eval.Ranks = plan.MaxRanks + 1 }, fmt.Sprintf("--ranks %d: want 1..%d", plan.MaxRanks+1, plan.MaxRanks)},
		{"steps", func(c *RunConfig) { c.Eval.Steps = 0 }, "--steps 0"},
		{"batch", func(c *RunConfig) { c.Eval.Batch = plan.MaxBatch + 1 }, fmt.Sprintf("--batch %d", plan.MaxBatch+1)},
		{"parallel", func(c *RunConfig) { c.Eval.Parallel = -1 }, "--parallel -1"},
		{"bandwidth", func(c *RunConfig) { c.Eval.Network = Network{BandwidthMBs: 0, LatencyUS: 5} }, "--bandwidth-mbs 0"},
		{"latency", func(c *RunConfig) { c.Eval.Network = Network{BandwidthMBs: 1, LatencyUS: -1} }, "--latency-us -1"},
		{"same workload twice", func(c *RunConfig) { c.Eval.Workloads = []*Workload{ws[0], ws[0]} }, "two workloads named kinetics"},
		{"real oracle only", func(c *RunConfig) { c.Real, c.Eval.Loaders = true, []spmd.Kind{spmd.KindOracle} }, "--loaders oracle: --real needs another loader"},
		{"timeline", func(c *RunConfig) { c.Timeline = "kinetics" }, ""},
		{"timeline not run", func(c *RunConfig) { c.Timeline = "text" }, "--timeline text: not among the workloads run (kinetics)"},
		{"section", func(c *RunConfig) { c.Sections = []string{"planner", "gpu"} }, `--sections: unknown section "gpu"`},
		{"scale ranks", func(c *RunConfig) { c.Scale.Ranks = plan.MaxRanks + 1 }, fmt.Sprintf("--scale-ranks %d: want 1..%d", plan.MaxRanks+1, plan.MaxRanks)},
		{"scale batch", func(c *RunConfig) { c.Scale.Batch = -2 }, "--scale-batch -2"},
		{"scale steps", func(c *RunConfig) { c.Scale.Steps = -1 }, "--scale-steps -1"},
		{"scale workload", func(c *RunConfig) { c.Scale.Workload = "nope" }, `--scale-workload: bench: invalid workload: unknown workload "nope"`},
	} {
		c := good()
		tt.edit(&c)
		err := c.Check()
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: got %v, want accepted", tt.name, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: got %v, want an error with %q", tt.name, err, tt.want)
		}
	}
}
