package step

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestPackTrain: every sample goes to exactly one rank, every rank gets
// b; the heaviest rank is within the heaviest sample of the mean (LPT's
// bound with equal counts is looser, but one sample is what a greedy
// packing can miss by on these inputs); the packing does not depend on
// the order the ranks list the samples in, only on the samples.
func TestPackTrain(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 27))
	for range 200 {
		n, b := 1+rng.IntN(9), 1+rng.IntN(8)
		items := make([]Item, n*b)
		var total, heaviest int64
		for i := range items {
			items[i] = Item{ID: rng.Uint64(), Train: rng.Int64N(50e6)}
			total += items[i].Train
			heaviest = max(heaviest, items[i].Train)
		}
		got := PackTrain(items, n, b)
		seen := make([]bool, len(items))
		var worst int64
		for r, idx := range got {
			if len(idx) != b {
				t.Fatalf("rank %d got %d samples, want %d", r, len(idx), b)
			}
			var load int64
			for _, i := range idx {
				if seen[i] {
					t.Fatalf("sample %d packed twice", i)
				}
				seen[i] = true
				load += items[i].Train
			}
			worst = max(worst, load)
		}
		if mean := total / int64(n); worst > mean+heaviest {
			t.Errorf("n=%d b=%d: heaviest rank %d, mean %d, heaviest sample %d", n, b, worst, mean, heaviest)
		}
		// The same samples listed in another order: the same ranks train
		// the same ids.
		perm := rng.Perm(len(items))
		shuffled := make([]Item, len(items))
		for i, p := range perm {
			shuffled[i] = items[p]
		}
		again := PackTrain(shuffled, n, b)
		for r := range got {
			a, c := ids(items, got[r]), ids(shuffled, again[r])
			if !slices.Equal(a, c) {
				t.Fatalf("rank %d: %v, then %v with the samples reordered", r, a, c)
			}
		}
	}
}

func ids(items []Item, idx []int) []uint64 {
	out := make([]uint64, len(idx))
	for i, k := range idx {
		out[i] = items[k].ID
	}
	slices.Sort(out)
	return out
}

// TestPackTrainEvens: two ranks, one holding every clip and the other
// every image, are packed to one clip and one image each.
func TestPackTrainEvens(t *testing.T) {
	items := []Item{{ID: 1, Train: 80}, {ID: 2, Train: 80}, {ID: 3, Train: 10}, {ID: 4, Train: 10}}
	got := PackTrain(items, 2, 2)
	want := [][]int{{0, 2}, {1, 3}}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("PackTrain = %v, want %v", got, want)
	}
}
