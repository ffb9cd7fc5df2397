package plan

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestHelixNoTrain: Params.NoTrain leaves out the GPU-work phase. Its plan is helix's on the same input with every GPU time
// unknown (the phase then has nothing to do), makes no exchange for GPU
// work, and is the same plan, hash included, from a fresh planner and a
// reused one (every rank computes it alike).
func TestHelixNoTrain(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 1))
	var reused Planner
	var out Plan
	trained := 0
	for i := range 200 {
		n, b := 2+rng.IntN(8), 1+rng.IntN(6)
		in := genInput(rng, n, b, genOpts{mode: ModeHelix, heavy: true, progress: i%2 == 0, train: true, margin: rng.Int64N(300)})
		in.NoTrain = true
		got, err := Compute(in)
		if err != nil {
			t.Fatal(err)
		}
		if err := reused.Compute(in, &out); err != nil {
			t.Fatal(err)
		}
		if out.Hash != got.Hash || !slices.Equal(out.Assign, got.Assign) {
			t.Fatalf("input %d: a reused planner gave another plan (hash %x, want %x)", i, out.Hash, got.Hash)
		}
		for _, x := range got.Exchanges {
			if x.TrainGain != 0 {
				t.Fatalf("input %d: an exchange for GPU work (%+v) with NoTrain", i, x)
			}
		}
		ref := *in
		ref.NoTrain = false
		ref.Samples = slices.Clone(in.Samples)
		for k := range ref.Samples {
			ref.Samples[k].Train = 0
		}
		want, err := Compute(&ref)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.Assign, want.Assign) || !slices.Equal(got.Order, want.Order) || !slices.Equal(got.Finish, want.Finish) {
			t.Fatalf("input %d: the plan with NoTrain differs from helix's without GPU times", i)
		}
		in.NoTrain = false
		full, err := Compute(in)
		if err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(full.Exchanges, func(x Exchange) bool { return x.TrainGain != 0 }) {
			trained++
		}
	}
	if trained == 0 {
		t.Fatal("helix evened GPU work on none of the inputs: the test compares nothing")
	}
}
