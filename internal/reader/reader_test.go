package reader

import (
	"encoding/json"
	"maps"
	"math/rand/v2"
	"slices"
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
		r, err := New(sizes, rank, 3, 42, 1) // buffer 1: no cross-epoch mixing
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
	a, _ := New(sizes, 1, 2, 9, 16)
	b, _ := New(sizes, 1, 2, 9, 16)
	c, _ := New(sizes, 1, 2, 10, 16)
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
	r, _ := New(sizes, 0, 2, 5, 6)
	drawIDs(r, 13)
	state, err := r.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	want := drawIDs(r, 40)
	again, _ := New(sizes, 0, 2, 5, 6)
	if err := again.UnmarshalJSON(state); err != nil {
		t.Fatal(err)
	}
	got := drawIDs(again, 40)
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("draw %d after resume: got %x, want %x", i, got[i], want[i])
		}
	}
	other, _ := New(sizes, 1, 2, 5, 6)
	if err := other.UnmarshalJSON(state); err == nil || !strings.Contains(err.Error(), "reader state of rank 1: shard order [2 0] of epoch 1, not the [3 1]") {
		t.Errorf("rank 1 accepted rank 0's state: %v", err)
	}
}

// TestSplitParts: whole shards round robin when there are enough; with
// fewer shards than ranks, each cut into ranks/gcd ranges so that every
// rank reads as many; a shard too small to cut is refused, named.
func TestSplitParts(t *testing.T) {
	tests := []struct {
		sizes []int
		ranks int
		want  []int // samples each rank reads per epoch
	}{
		{[]int{4, 4, 4}, 2, []int{8, 4}},
		{[]int{10, 10, 10}, 8, []int{3, 3, 3, 3, 3, 3, 3, 9}}, // ranges of 10/8: 1 or 2 samples
		{[]int{8}, 4, []int{2, 2, 2, 2}},
		{[]int{6, 6}, 4, []int{3, 3, 3, 3}},
	}
	for _, tt := range tests {
		got := RankSamples(tt.sizes, tt.ranks)
		total := 0
		for _, n := range got {
			total += n
		}
		sum := 0
		for _, n := range tt.sizes {
			sum += n
		}
		if total != sum {
			t.Errorf("%v on %d ranks: the ranks read %v, %d samples of %d", tt.sizes, tt.ranks, got, total, sum)
		}
		if tt.sizes[0] != 10 && !slices.Equal(got, tt.want) {
			t.Errorf("%v on %d ranks: %v, want %v", tt.sizes, tt.ranks, got, tt.want)
		}
	}
	if _, err := New([]int{1}, 0, 2, 1, 1); err == nil || !strings.Contains(err.Error(), "shard 0 holds 1 sample, too few to cut into the 2 ranges that 1 shards on 2 ranks need") {
		t.Errorf("got %v", err)
	}
	// 1,000 shards on 64 ranks: every shard read by exactly one rank.
	sizes := make([]int, 1000)
	for i := range sizes {
		sizes[i] = 1 + i%7
	}
	if err := SplitError(sizes, 64); err != nil {
		t.Errorf("1,000 shards on 64 ranks: %v", err)
	}
}

// TestReaderServesEverySampleOnceAnEpoch: with fewer shards than ranks,
// the ranks' readers together serve every sample of the dataset exactly
// once in their first epoch (each range read by one rank).
func TestReaderServesEverySampleOnceAnEpoch(t *testing.T) {
	sizes := []int{10, 9, 12}
	const ranks = 8
	seen := map[SampleRef]int{}
	per := RankSamples(sizes, ranks)
	for r := range ranks {
		rd, err := New(sizes, r, ranks, 1, 4)
		if err != nil {
			t.Fatal(err)
		}
		for range per[r] {
			ref, e := rd.Next()
			if e != 0 {
				continue // the shuffle buffer reached into epoch 1
			}
			seen[ref]++
		}
	}
	for sh, n := range sizes {
		for i := range n {
			if c := seen[SampleRef{Shard: sh, Index: i}]; c > 1 {
				t.Errorf("sample %d of shard %d served %d times in epoch 0", i, sh, c)
			}
		}
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
		{[]int{1, 1}, 1, 3, "samples per epoch below the batch of 3: rank 0 has 2, so every batch of those ranks repeats samples: reshard so that each rank gets at least a batch (shard i goes to rank i mod 1)"},
		// Every rank listed: the busiest is among them, said once.
		{[]int{2, 2}, 2, 4, "samples per epoch below the batch of 4: rank 0 has 2, rank 1 has 2, so every batch of those ranks repeats samples: reshard so that each rank gets at least a batch (shard i goes to rank i mod 2)"},
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
			rd, err := New(sizes, r, ranks, uint64(trial), 1)
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

// TestReaderRefusesImpossibleStates edits a saved state the ways a damaged
// or hand-edited checkpoint could: each was accepted before and then
// served another rank's samples or one sample twice in an epoch.
func TestReaderRefusesImpossibleStates(t *testing.T) {
	sizes := []int{5, 3, 4, 6}
	base, _ := New(sizes, 0, 2, 7, 4)
	drawIDs(base, 3) // 6 of the rank's 9 samples of epoch 0 read, 3 of them buffered
	good, err := base.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	var saved map[string]any
	if err := json.Unmarshal(good, &saved); err != nil {
		t.Fatal(err)
	}
	ref := func(shard, index int) map[string]any { return map[string]any{"shard": shard, "index": index} }
	for _, tt := range []struct {
		name string
		edit func(m map[string]any)
		want string
	}{
		{"another rank's shard buffered", func(m map[string]any) { m["buf"] = []any{ref(1, 0)}; m["buf_epoch"] = []any{0} }, "buffered sample of shard 1, not one of rank 0's"},
		{"a sample buffered twice", func(m map[string]any) {
			m["buf"], m["buf_epoch"] = []any{ref(0, 0), ref(0, 0), ref(2, 0)}, []any{0, 0, 0}
		}, "buffered twice in epoch 0"},
		{"a sample not read yet", func(m map[string]any) {
			second := int(m["order"].([]any)[1].(float64))
			m["buf"], m["buf_epoch"] = []any{ref(second, sizes[second]-1)}, []any{0}
		}, "not read yet in epoch 0"},
		{"negative epoch", func(m map[string]any) { m["epoch"] = -1 }, "epoch -1 outside"},
		{"buffered from a later epoch", func(m map[string]any) {
			ep := slices.Clone(m["buf_epoch"].([]any))
			ep[len(ep)-1] = 1
			m["buf_epoch"] = ep
		}, "of epoch 1, outside [0, 0]"},
		{"a shard twice in the order", func(m map[string]any) { m["order"] = []any{0, 0} }, "shard order [0 0]"},
		{"past the end of a shard", func(m map[string]any) { m["in_shard"] = 1 << 40 }, "sample 1099511627776 of shard"},
		{"more buffered than the buffer holds", func(m map[string]any) {
			m["buf"], m["buf_epoch"] = []any{ref(0, 0), ref(0, 1), ref(0, 2), ref(2, 0), ref(2, 1)}, []any{0, 0, 0, 0, 0}
		}, "5 buffered samples with 5 epochs, for a shuffle buffer of 4"},
		{"served count off", func(m map[string]any) { m["served"] = 2 }, "2 samples served, but"},
	} {
		m := maps.Clone(saved)
		tt.edit(m)
		data, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		r, _ := New(sizes, 0, 2, 7, 4)
		if err := r.UnmarshalJSON(data); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got %v, want an error with %q", tt.name, err, tt.want)
		}
	}
	r, _ := New(sizes, 0, 2, 7, 4)
	if err := r.UnmarshalJSON(good); err != nil {
		t.Errorf("the unedited state: %v", err)
	}
}

// FuzzReaderState restores mutated saved states: an accepted one must go
// on serving only the rank's own samples, each at most once per epoch.
func FuzzReaderState(f *testing.F) {
	sizes := []int{5, 3, 4, 6}
	r, _ := New(sizes, 1, 2, 7, 4)
	for range 12 { // across the epoch boundary (9 samples per epoch)
		b, err := r.MarshalJSON()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		r.Next()
	}
	f.Add([]byte(`{"order":[1],"Buf":[{},{},{}],"Buf_epoCh":[0,0,0],"rng":"cGNnOr000000000000000000000="}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, _ := New(sizes, 1, 2, 7, 4)
		if err := r.UnmarshalJSON(data); err != nil {
			return
		}
		seen := map[uint64]bool{}
		for range 30 {
			s, e := r.Next()
			if s.Shard%2 != 1 || s.Index < 0 || s.Index >= sizes[s.Shard] || e < 0 {
				t.Fatalf("served sample %+v of epoch %d", s, e)
			}
			if seen[s.ID(e)] {
				t.Fatalf("served sample %+v twice in epoch %d", s, e)
			}
			seen[s.ID(e)] = true
		}
	})
}
