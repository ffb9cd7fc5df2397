package workload

import (
	"math"
	"testing"

	"github.com/datahelix/datahelix/internal/sim"
)

// TestSkewLabels pins every built-in workload's skew label to the one its
// measured load autocorrelation gives (MeasureSkew at SkewRanks ranks,
// SkewSteps steps, seed 1, the default calibration): a label is measured,
// never asserted.
func TestSkewLabels(t *testing.T) {
	if testing.Short() {
		t.Skip("measures every workload over 2,000 steps")
	}
	ws, err := Workloads()
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range ws {
		s, err := NewSynth(w, DefaultCalibration(), SkewRanks, 0, 1)
		if err != nil {
			t.Fatal(err)
		}
		ac, label := MeasureSkew(s, SkewSteps, 1)
		t.Logf("%-20s autocorrelation at lags %d-%d: %.3f (%s)", w.Name, SkewLagMin, SkewLagMax, ac, label)
		if label != w.Skew {
			t.Errorf("%s: file says %q, the measured autocorrelation %.3f gives %q (threshold %g)", w.Name, w.Skew, ac, label, SkewThreshold)
		}
	}
}

// TestLoadAutocorr checks the measurement on loads whose answer is known:
// a rank loaded for the whole run correlates fully, fresh draws do not.
func TestLoadAutocorr(t *testing.T) {
	const ranks, steps = 8, 400
	fixed := func(step int64, rank int) []sim.Sample {
		return []sim.Sample{{Cost: int64(100 + 100*(rank%2))}}
	}
	if ac := LoadAutocorr(fixed, ranks, steps, 16, 64, nil); math.Abs(ac-1) > 1e-9 {
		t.Errorf("a fixed imbalance: autocorrelation %v, want 1", ac)
	}
	fresh := func(step int64, rank int) []sim.Sample {
		return []sim.Sample{{Cost: int64(1 + hash3(1, uint64(step), uint64(rank))%1000)}}
	}
	if ac := LoadAutocorr(fresh, ranks, steps, 16, 64, nil); math.Abs(ac) > 0.05 {
		t.Errorf("fresh draws: autocorrelation %v, want about 0", ac)
	}
	if ac := LoadAutocorr(fresh, ranks, steps, 16, 64, func(step int64, rank int) float64 {
		return 1 + 4*float64(rank/4) // node 1 five times slower
	}); ac < SkewThreshold {
		t.Errorf("fresh draws on a slow node: autocorrelation %v, want skewed (at least %v)", ac, SkewThreshold)
	}
	if SkewLabel(SkewThreshold) != Skewed || SkewLabel(SkewThreshold/2) != Uniform {
		t.Error("SkewLabel does not split at SkewThreshold")
	}
}

// TestNoisySpells checks the noisy neighbours' draw: a pure function of
// the seed, node and spell, constant within a spell and across a node's
// ranks, slowing about Share of the spells by Slowdown.
func TestNoisySpells(t *testing.T) {
	ws, err := SelectWorkloads("noisy_neighbours")
	if err != nil {
		t.Fatal(err)
	}
	w := ws[0]
	n := w.Cluster.Noisy
	const ranks, spells = 64, 400
	slow := 0
	for sp := range int64(spells) {
		for r := range ranks {
			a := w.SlowdownAt(9, sp*int64(n.PeriodSteps), r, ranks)
			if b := w.SlowdownAt(9, sp*int64(n.PeriodSteps)+int64(n.PeriodSteps)-1, r, ranks); a != b {
				t.Fatalf("spell %d rank %d: slowdown %v at its start, %v at its end", sp, r, a, b)
			}
			if c := w.SlowdownAt(9, sp*int64(n.PeriodSteps), r/w.Cluster.RanksPerNode*w.Cluster.RanksPerNode, ranks); a != c {
				t.Fatalf("spell %d: rank %d and its node's first rank differ", sp, r)
			}
			switch a {
			case n.Slowdown:
				slow++
			case 1:
			default:
				t.Fatalf("slowdown %v: want 1 or %v", a, n.Slowdown)
			}
		}
	}
	if share := float64(slow) / (ranks * spells); math.Abs(share-n.Share) > 0.03 {
		t.Errorf("%.3f of rank-spells slowed, want about %v", share, n.Share)
	}
	if w.SlowdownAt(9, 0, 0, ranks) != w.SlowdownAt(9, 0, 0, ranks) {
		t.Error("SlowdownAt is not deterministic")
	}
}
