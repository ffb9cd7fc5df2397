package realrun

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/datahelix/datahelix/gpu"
	"github.com/datahelix/datahelix/internal/bench/workload"
	"github.com/datahelix/datahelix/internal/reader"
	"github.com/datahelix/datahelix/internal/sim"
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
		ref := reader.SampleRef{Shard: rng.IntN(1 << 24), Index: rng.IntN(1 << 24)}
		if got := refOfID(ref.ID(rng.IntN(1 << 15))); got != ref {
			t.Fatalf("refOfID(%v.ID) = %v", ref, got)
		}
	}
}

// fixedSource serves batches[step][rank].
func fixedSource(batches [][][]sim.Sample) sampleSource {
	return func(step int64, rank int) []sim.Sample { return batches[step][rank] }
}

func TestSplitWorkRatioAndImbalance(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	const steps, ranks, b = 12, 3, 4
	batches := make([][][]sim.Sample, steps)
	for s := range batches {
		batches[s] = make([][]sim.Sample, ranks)
		for r := range ranks {
			for range b {
				x := sim.Sample{Cost: 1 + rng.Int64N(1000)}
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
	ref := reader.SampleRef{Shard: 1, Index: 2}
	x := sim.Sample{ID: ref.ID(3), Cost: 1000, Est: 900, Parts: []int64{600, 600}, PartsEst: []int64{540, 540}, Frames: 8}
	y := sim.Sample{ID: reader.SampleRef{Shard: 0, Index: 0}.ID(0), Cost: 50, Est: 60, Frames: 1}
	j := &realJob{samples: &workload.DatasetSamples{Batches: [][][]sim.Sample{{{x, y}}}},
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
