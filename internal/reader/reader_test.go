package reader

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// globalBatches returns the next steps global batches of ranks readers
// of batch samples each, concatenated in rank order.
func globalBatches(t *testing.T, rs []*Reader, batch, steps int) [][]uint64 {
	t.Helper()
	out := make([][]uint64, steps)
	for s := range out {
		for _, r := range rs {
			for range batch {
				ref, e := r.Next()
				out[s] = append(out[s], ref.ID(e))
			}
		}
	}
	return out
}

func readers(t *testing.T, sizes []int, ranks, batch int, seed uint64, buf, streams int) []*Reader {
	t.Helper()
	rs := make([]*Reader, ranks)
	for r := range rs {
		var err error
		if rs[r], err = New(sizes, r, ranks, batch, seed, buf, streams, 1); err != nil {
			t.Fatal(err)
		}
	}
	return rs
}

// TestGlobalBatchIndependentOfWorldSize: the global batch of every step
// is the same at 1, 2, 3, 4 and 12 ranks of the same global batch, and
// the ranks' slices of it tile it.
func TestGlobalBatchIndependentOfWorldSize(t *testing.T) {
	sizes := []int{9, 4, 17, 6, 11, 3, 8}
	const global, steps = 12, 40
	want := globalBatches(t, readers(t, sizes, 1, global, 5, 6, 0), global, steps)
	for _, ranks := range []int{2, 3, 4, 12} {
		got := globalBatches(t, readers(t, sizes, ranks, global/ranks, 5, 6, 0), global/ranks, steps)
		for s := range want {
			if !slices.Equal(got[s], want[s]) {
				t.Fatalf("%d ranks, step %d: global batch %v, want the one rank's %v", ranks, s, got[s], want[s])
			}
		}
	}
}

// TestEverySampleOnceAnEpoch: over the batches that cover the first two
// epochs, every sample of epoch 0 is served exactly once, with shards
// shuffled differently in the two epochs.
func TestEverySampleOnceAnEpoch(t *testing.T) {
	sizes := []int{5, 9, 2, 7, 4, 6}
	total := 33
	o, err := NewOrder(sizes, 4, 0, 1, 3, 4)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[uint64]int{}
	var refs []SampleRef
	var eps []int
	for range 3 * total / 4 {
		refs, eps = o.NextBatch(refs[:0], eps[:0])
		for i, ref := range refs {
			seen[ref.ID(eps[i])]++
		}
	}
	for sh, n := range sizes {
		for i := range n {
			if c := seen[SampleRef{Shard: sh, Index: i}.ID(0)]; c != 1 {
				t.Errorf("sample %d of shard %d served %d times in epoch 0", i, sh, c)
			}
		}
	}
	first := slices.Clone(o.st.Queue)
	if o.st.Epoch < 1 {
		t.Fatalf("still in epoch %d after %d batches", o.st.Epoch, 3*total/4)
	}
	zero := Order{sizes: sizes, seed: 3}
	zero.startEpoch(0)
	if slices.Equal(first, zero.st.Queue) {
		t.Errorf("epoch %d visits the shards in epoch 0's order %v", o.st.Epoch, first)
	}
}

// TestStreamTurnsIsDataLoaderLayout: with streams = ranks x W taking
// turns W at a time, each step's batch of a rank comes whole from one
// stream, stream r·W + t mod W, which continues T steps later where it
// stopped (without a shuffle buffer: the next samples of its shard); the
// global batches are the same at any world size, and every sample is
// served once an epoch.
func TestStreamTurnsIsDataLoaderLayout(t *testing.T) {
	const ranks, workers, batch = 2, 3, 4
	sizes := []int{40, 40, 40, 40, 40, 40, 40, 40}
	rs := make([]*Reader, ranks)
	for r := range rs {
		var err error
		if rs[r], err = New(sizes, r, ranks, batch, 9, 1, ranks*workers, workers); err != nil {
			t.Fatal(err)
		}
	}
	last := map[[2]int]SampleRef{} // (rank, worker) -> the last sample its batch ended with
	seen := map[SampleRef]bool{}
	for step := range 12 {
		for r, rd := range rs {
			w := step % workers
			var prev SampleRef
			for i := range batch {
				ref, _ := rd.Next()
				if seen[ref] {
					t.Fatalf("step %d rank %d: sample %v served twice in epoch 0", step, r, ref)
				}
				seen[ref] = true
				want := prev
				if i == 0 {
					want = last[[2]int{r, w}]
				}
				if (i > 0 || step >= workers) && (ref.Shard != want.Shard || ref.Index != want.Index+1) {
					t.Fatalf("step %d rank %d sample %d: %v, want the sample after %v of its stream", step, r, i, ref, want)
				}
				prev = ref
			}
			last[[2]int{r, w}] = prev
		}
	}
	// The same global batches read by one rank of the whole batch.
	one, err := New(sizes, 0, 1, ranks*batch, 9, 1, ranks*workers, workers)
	if err != nil {
		t.Fatal(err)
	}
	rs2 := make([]*Reader, ranks)
	for r := range rs2 {
		rs2[r], _ = New(sizes, r, ranks, batch, 9, 1, ranks*workers, workers)
	}
	want := globalBatches(t, rs2, batch, 20)
	if got := globalBatches(t, []*Reader{one}, ranks*batch, 20); !slices.Equal(slices.Concat(got...), slices.Concat(want...)) {
		t.Errorf("one rank's global batches differ from %d ranks'", ranks)
	}
}

// TestStreamTurnsRefusals: turns that do not divide the streams, or more
// turns than shards, are refused naming the flag; a state saved with
// other turns is refused on resume.
func TestStreamTurnsRefusals(t *testing.T) {
	sizes := []int{10, 10, 10, 10}
	for _, c := range []struct {
		streams, turns int
		want           string
	}{{3, 2, "--streams 3"}, {0, 5, "--stream-turns 5"}} {
		if _, err := NewOrder(sizes, 8, c.streams, c.turns, 1, 4); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("streams %d turns %d: %v, want an error naming %s", c.streams, c.turns, err, c.want)
		}
	}
	a, _ := NewOrder(sizes, 8, 4, 2, 1, 4)
	a.NextBatch(nil, nil)
	st, _ := a.MarshalJSON()
	b, _ := NewOrder(sizes, 8, 4, 1, 1, 4)
	if err := b.UnmarshalJSON(st); !errors.Is(err, ErrState) || !strings.Contains(err.Error(), "--stream-turns") {
		t.Errorf("a state of turns 2 resumed with turns 1: %v, want ErrState naming --stream-turns", err)
	}
}

// TestRankStreamsItsShards: with as many streams as ranks, every sample
// a rank serves in a step comes from its own stream, whose shards no
// other rank reads in that epoch (WebDataset's split by rank).
func TestRankStreamsItsShards(t *testing.T) {
	sizes := []int{20, 20, 20, 20}
	rs := readers(t, sizes, 4, 3, 1, 1, 0) // 4 shards, G=12: 4 streams
	owner := map[int]int{}                 // shard -> rank reading it
	for range 6 {
		for r, rd := range rs {
			for range 3 {
				ref, _ := rd.Next()
				if o, ok := owner[ref.Shard]; ok && o != r {
					t.Fatalf("shard %d served to rank %d and rank %d in one epoch", ref.Shard, o, r)
				}
				owner[ref.Shard] = r
			}
		}
	}
}

// TestResumeAtAnotherWorldSize: an order saved after k steps at 2 ranks
// continues at 4 ranks, and at 3, with the global batches the unsplit
// run gives.
func TestResumeAtAnotherWorldSize(t *testing.T) {
	sizes := []int{7, 13, 5, 9, 8}
	const global, k, more = 12, 9, 20
	whole := globalBatches(t, readers(t, sizes, 2, 6, 11, 5, 0), 6, k+more)
	before := readers(t, sizes, 2, 6, 11, 5, 0)
	globalBatches(t, before, 6, k)
	state, err := before[1].MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if other, _ := before[0].MarshalJSON(); string(other) != string(state) {
		t.Fatalf("ranks 0 and 1 saved different states")
	}
	for _, ranks := range []int{4, 3} {
		after := readers(t, sizes, ranks, global/ranks, 11, 5, 0)
		for _, r := range after {
			if err := r.UnmarshalJSON(state); err != nil {
				t.Fatal(err)
			}
		}
		got := globalBatches(t, after, global/ranks, more)
		for s := range got {
			if !slices.Equal(got[s], whole[k+s]) {
				t.Fatalf("resumed at %d ranks, step %d: %v, want %v", ranks, k+s, got[s], whole[k+s])
			}
		}
	}
}

// TestResumeRefusesAnotherOrder: a state of another dataset, seed, global
// batch, stream count or shuffle buffer is refused, saying which.
func TestResumeRefusesAnotherOrder(t *testing.T) {
	sizes := []int{7, 13, 5, 9}
	o, _ := NewOrder(sizes, 8, 0, 1, 2, 4)
	o.NextBatch(nil, nil)
	state, _ := o.MarshalJSON()
	for _, c := range []struct {
		name    string
		sizes   []int
		global  int
		streams int
		seed    uint64
		buf     int
		want    string
	}{
		{"dataset", []int{7, 13, 5, 10}, 8, 0, 2, 4, "another dataset"},
		{"seed", sizes, 8, 0, 3, 4, "seed 2, this job's is 3"},
		{"global batch", sizes, 12, 0, 2, 4, "global batch of 8, this job's is 12"},
		{"streams", sizes, 8, 2, 2, 4, "4 streams, this job's is 2"},
		{"shuffle buffer", sizes, 8, 0, 2, 5, "shuffle buffer of 4, this job's is 5"},
	} {
		other, err := NewOrder(c.sizes, c.global, c.streams, 1, c.seed, c.buf)
		if err != nil {
			t.Fatal(err)
		}
		err = other.UnmarshalJSON(state)
		if !errors.Is(err, ErrState) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrState saying %q", c.name, err, c.want)
		}
	}
	damaged := strings.Replace(string(state), `"next":`, `"next":9`, 1)
	if err := o.UnmarshalJSON([]byte(damaged)); !errors.Is(err, ErrState) {
		t.Errorf("a queue position past the queue: %v, want ErrState", err)
	}
}

// TestOrderRefusals: an epoch shorter than a global batch, an empty
// shard and more streams than shards are refused at start.
func TestOrderRefusals(t *testing.T) {
	for _, c := range []struct {
		sizes          []int
		global, stream int
		want           string
	}{
		{[]int{3, 4}, 8, 0, "an epoch of 7 samples is shorter than one global batch of 8"},
		{[]int{3, 0}, 2, 0, "shard 1 has no samples"},
		{[]int{3, 4}, 4, 3, "--streams 3: want 1..2"},
	} {
		if _, err := NewOrder(c.sizes, c.global, c.stream, 1, 1, 1); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewOrder(%v, %d, %d): %v, want %q", c.sizes, c.global, c.stream, err, c.want)
		}
	}
	if _, err := NewOrder([]int{3, 4}, 8, 0, 1, 1, 1); !errors.Is(err, ErrShortEpoch) {
		t.Errorf("an epoch of 7 for a global batch of 8: %v, want ErrShortEpoch", err)
	}
}

// TestSeedChangesTheOrder: the same seed gives the same order, another
// seed another.
func TestSeedChangesTheOrder(t *testing.T) {
	sizes := []int{8, 8, 8}
	a := globalBatches(t, readers(t, sizes, 2, 2, 9, 4, 0), 2, 10)
	b := globalBatches(t, readers(t, sizes, 2, 2, 9, 4, 0), 2, 10)
	c := globalBatches(t, readers(t, sizes, 2, 2, 10, 4, 0), 2, 10)
	if !slices.EqualFunc(a, b, slices.Equal[[]uint64]) {
		t.Error("one seed gave two orders")
	}
	if slices.EqualFunc(a, c, slices.Equal[[]uint64]) {
		t.Error("seeds 9 and 10 gave one order")
	}
}

// FuzzOrderState feeds saved states, valid and mangled, to an order: one
// is accepted or refused with ErrState, never a panic, and an accepted
// one draws batches of existing samples.
func FuzzOrderState(f *testing.F) {
	sizes := []int{5, 3, 8}
	for _, turns := range []int{1, 3} { // states of both layouts
		o, _ := NewOrder(sizes, 4, 0, turns, 1, 3)
		for range 5 {
			o.NextBatch(nil, nil)
			st, _ := o.MarshalJSON()
			f.Add(st)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		turns := 1 + len(data)%2*2 // either layout takes any state
		o, _ := NewOrder(sizes, 4, 0, turns, 1, 3)
		if err := o.UnmarshalJSON(data); err != nil {
			if !errors.Is(err, ErrState) {
				t.Fatalf("error %v does not match ErrState", err)
			}
			return
		}
		for range 10 {
			refs, _ := o.NextBatch(nil, nil)
			for _, r := range refs {
				if r.Shard < 0 || r.Shard >= len(sizes) || r.Index < 0 || r.Index >= sizes[r.Shard] {
					t.Fatalf("drew sample %d of shard %d", r.Index, r.Shard)
				}
			}
		}
	})
}
