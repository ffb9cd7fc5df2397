package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestRunLinksNoPlotting: the datahelix binary, which runs jobs, links
// neither the benchmark harness nor its plotting libraries; they are
// datahelix-bench's (cmd/datahelix-bench), which datahelix bench runs.
func TestRunLinksNoPlotting(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, "gonum.org/v1/plot") ||
			strings.HasPrefix(p, "github.com/datahelix/datahelix/internal/bench") && p != "github.com/datahelix/datahelix/internal/bench/cmdinfo" {
			t.Errorf("datahelix links %s", p)
		}
	}
}
