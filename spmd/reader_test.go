package spmd

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// drawIDs draws n samples and returns their ids.
func drawIDs(r *Reader, n int) []uint64 {
	ids := make([]uint64, n)
	for i := range ids {
		s, e := r.Next()
		ids[i] = s.ID(e)
	}
	return ids
}

func TestReaderCoversEveryOwnedSampleOncePerEpoch(t *testing.T) {
	sizes := []int{5, 3, 4, 6, 2, 7}
	for rank := 0; rank < 3; rank++ {
		r, err := NewReader(sizes, rank, 3, 42, 1) // buffer 1: no cross-epoch mixing
		if err != nil {
			t.Fatal(err)
		}
		owned := sizes[rank] + sizes[rank+3]
		for epoch := 0; epoch < 3; epoch++ {
			seen := map[SampleRef]int{}
			for i := 0; i < owned; i++ {
				s, e := r.Next()
				if e != epoch {
					t.Fatalf("rank %d: draw %d of epoch %d came from epoch %d", rank, i, epoch, e)
				}
				if s.Shard%3 != rank {
					t.Fatalf("rank %d got shard %d", rank, s.Shard)
				}
				seen[s]++
			}
			if len(seen) != owned {
				t.Errorf("rank %d epoch %d: %d distinct samples, want %d", rank, epoch, len(seen), owned)
			}
		}
	}
}

func TestReaderIsDeterministicAndShuffles(t *testing.T) {
	sizes := []int{50, 50, 50, 50}
	a, _ := NewReader(sizes, 1, 2, 9, 16)
	b, _ := NewReader(sizes, 1, 2, 9, 16)
	c, _ := NewReader(sizes, 1, 2, 10, 16)
	x, y, z := drawIDs(a, 100), drawIDs(b, 100), drawIDs(c, 100)
	same, differ := true, false
	for i := range x {
		same = same && x[i] == y[i]
		differ = differ || x[i] != z[i]
	}
	if !same {
		t.Error("same seed gave different orders")
	}
	if !differ {
		t.Error("another seed gave the same order")
	}
}

func TestReaderResumesExactly(t *testing.T) {
	sizes := []int{7, 5, 9, 4}
	r, _ := NewReader(sizes, 0, 2, 5, 6)
	drawIDs(r, 13)
	state, err := r.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	want := drawIDs(r, 40)
	again, _ := NewReader(sizes, 0, 2, 5, 6)
	if err := again.UnmarshalJSON(state); err != nil {
		t.Fatal(err)
	}
	got := drawIDs(again, 40)
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("draw %d after resume: got %x, want %x", i, got[i], want[i])
		}
	}
	other, _ := NewReader(sizes, 1, 2, 5, 6)
	if err := other.UnmarshalJSON(state); err == nil || !strings.Contains(err.Error(), "not one of rank 1") {
		t.Errorf("rank 1 accepted rank 0's state: %v", err)
	}
}

func TestReaderRejectsUnevenSplit(t *testing.T) {
	if _, err := NewReader([]int{1, 1, 1}, 0, 2, 1, 1); err == nil || !strings.Contains(err.Error(), "3 shards do not split evenly over 2 ranks") {
		t.Errorf("got %v", err)
	}
	if _, err := NewReader([]int{1}, 0, 2, 1, 1); err == nil || !strings.Contains(err.Error(), "1 shards cannot feed 2 ranks") {
		t.Errorf("got %v", err)
	}
}

func TestSplitWarning(t *testing.T) {
	for _, tt := range []struct {
		sizes        []int
		ranks, batch int
		want         string // "" or the whole line
	}{
		{[]int{8, 8, 8, 8}, 4, 4, ""},
		{[]int{8, 4}, 2, 4, ""}, // 2x: at the limit
		{[]int{5, 3, 4, 6}, 2, 4, ""},
		{[]int{8, 1}, 2, 4, "samples per epoch below the batch of 4: rank 1 has 1 (the most: rank 0 has 8), so every batch of those ranks repeats samples: reshard so that each rank gets at least a batch (shard i goes to rank i mod 2)"},
		// Rank 1 has exactly a batch (3+1), rank 0 more than 2x that (2+8).
		{[]int{2, 3, 8, 1}, 2, 4, "samples per epoch differ by more than 2x across ranks: rank 0 has 10, rank 1 has 4 (batch 4), so rank 1 serves each of its samples 2.5x as often: reshard so that the ranks get about the same number (shard i goes to rank i mod 2)"},
		{[]int{1, 8, 2, 8}, 4, 4, "samples per epoch below the batch of 4: rank 0 has 1, rank 2 has 2 (the most: rank 1 has 8), so every batch of those ranks repeats samples: reshard so that each rank gets at least a batch (shard i goes to rank i mod 4)"},
		{[]int{9, 4, 8, 3}, 4, 2, "samples per epoch differ by more than 2x across ranks: rank 0 has 9, rank 1 has 4, rank 3 has 3 (batch 2), so rank 3 serves each of its samples 3.0x as often: reshard so that the ranks get about the same number (shard i goes to rank i mod 4)"},
		{[]int{1, 2, 3}, 2, 1, ""}, // does not split: NewReader says so
		{[]int{1}, 2, 1, ""},       // too few shards: likewise
		{[]int{1, 1}, 1, 3, "samples per epoch below the batch of 3: rank 0 has 2 (the most: rank 0 has 2), so every batch of those ranks repeats samples: reshard so that each rank gets at least a batch (shard i goes to rank i mod 1)"},
		{[]int{1, 1, 1, 1, 1, 1, 1, 1, 9}, 9, 2, "samples per epoch below the batch of 2: rank 0 has 1, rank 1 has 1, rank 2 has 1, rank 3 has 1, rank 4 has 1, rank 5 has 1 and 2 more ranks (the most: rank 8 has 9), so every batch of those ranks repeats samples: reshard so that each rank gets at least a batch (shard i goes to rank i mod 9)"},
	} {
		got := SplitWarning(tt.sizes, tt.ranks, tt.batch)
		if got != tt.want {
			t.Errorf("SplitWarning(%v, %d ranks, batch %d)\n got %q\nwant %q", tt.sizes, tt.ranks, tt.batch, got, tt.want)
		}
	}
}

// TestRankSamplesMatchesReader checks RankSamples against what each
// rank's reader actually serves over one epoch, on random datasets.
func TestRankSamplesMatchesReader(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for trial := 0; trial < 50; trial++ {
		ranks := 1 + rng.IntN(5)
		sizes := make([]int, ranks*(1+rng.IntN(3)))
		for i := range sizes {
			sizes[i] = 1 + rng.IntN(9)
		}
		n := RankSamples(sizes, ranks)
		for r := range ranks {
			rd, err := NewReader(sizes, r, ranks, uint64(trial), 1)
			if err != nil {
				t.Fatal(err)
			}
			seen := map[SampleRef]bool{}
			for {
				s, e := rd.Next()
				if e > 0 {
					break
				}
				seen[s] = true
			}
			if len(seen) != n[r] {
				t.Errorf("sizes %v, %d ranks: rank %d's reader serves %d samples per epoch, RankSamples says %d", sizes, ranks, r, len(seen), n[r])
			}
		}
	}
}
