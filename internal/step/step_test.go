package step

import (
	"testing"

	"github.com/datahelix/datahelix/plan"
)

// TestHelixNoTrainPlansAlike: helix-notrain's blocks carry the planner's
// NoTrain flag, so every rank that decodes the gathered blocks plans
// without the GPU-work phase and gets the same plan; helix's blocks on
// the same samples make the exchanges that even GPU work out.
func TestHelixNoTrainPlansAlike(t *testing.T) {
	gather := func(k Kind) []byte {
		var buf []byte
		for r := range 4 {
			own := make([]Item, 3)
			for i := range own {
				train := int64(1e6) // rank 0 trains 20 ms clips, the others 1 ms images
				if r == 0 {
					train = 20e6
				}
				own[i] = Item{ID: uint64(r*10 + i + 1), Owner: r, Bytes: 1000, Est: 5000, Train: train}
			}
			st := RankState{DeadlineUS: 1e6, Workers: 2, Speed: plan.One, Bandwidth: 1000 * plan.One, LatencyUS: 10}
			var err error
			if buf, err = plan.AppendBlock(buf, Params{Kind: k, Batch: 3, Seed: 1, Margin: 200}.Block(7, r, st, own)); err != nil {
				t.Fatal(err)
			}
		}
		return buf
	}
	var a, b Stepper
	buf := gather(KindHelixNoTrain)
	in, p, err := a.Plan(7, buf)
	if err != nil {
		t.Fatal(err)
	}
	if !in.NoTrain || in.Mode != plan.ModeHelix {
		t.Fatalf("helix-notrain plans with mode %s, NoTrain %v; want helix without the phase", in.Mode, in.NoTrain)
	}
	hash, moved := p.Hash, p.Moved
	if _, q, err := b.Plan(7, buf); err != nil || q.Hash != hash {
		t.Fatalf("another rank's plan: hash %x (%v), want %x", q.Hash, err, hash)
	}
	if moved != 0 {
		t.Errorf("helix-notrain moved %d samples where only GPU work is uneven", moved)
	}
	if _, q, err := a.Plan(7, gather(KindHelix)); err != nil || q.Moved == 0 {
		t.Errorf("helix moved %d samples (%v): want the GPU work evened out", q.Moved, err)
	}
}
