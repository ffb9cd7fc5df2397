package spmd

import (
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
