package sim

import (
	"testing"
	"time"

	"github.com/datahelix/datahelix/gpu"
	"github.com/datahelix/datahelix/internal/step"
	"github.com/datahelix/datahelix/plan"
)

// BenchmarkSimulate times the simulator on 256 skewed ranks (the scale
// section runs 1024), with and without shared cores.
func BenchmarkSimulate(b *testing.B) {
	for _, tc := range []struct {
		name string
		cpus func(n int) *CPUShare
	}{
		{"dedicated", func(int) *CPUShare { return nil }},
		{"shared", func(n int) *CPUShare {
			sh := &CPUShare{Group: make([]int, n), Cores: make([]int, n/2)}
			for r := range sh.Group {
				sh.Group[r] = r / 2
			}
			for g := range sh.Cores {
				sh.Cores[g] = 2
			}
			return sh
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			const n = 256
			for b.Loop() {
				if _, err := Run(Config{Loader: step.KindHelix, Ranks: n, Batch: 4, Steps: 20, Workers: 2,
					GPU: gpu.Model{Base: 45 * time.Millisecond}, Bandwidth: 1000 * plan.One, LatencyUS: 20,
					Samples: skewed(n, 40000), CPUs: tc.cpus(n)}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
