package reader

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
)

// DefaultShuffleBuffer is the reader's default shuffle buffer, in
// samples. The benchmark's replay of a real run's reader must use the same.
const DefaultShuffleBuffer = 64

// SampleRef names one sample of the dataset: shard index (in the
// dataset's sorted order) and position in the shard.
type SampleRef struct {
	Shard int `json:"shard"`
	Index int `json:"index"`
}

// ID is the sample's job-wide id for one epoch: shard, index and epoch
// packed so that every sample a step holds has a distinct id.
func (s SampleRef) ID(epoch int) uint64 {
	return uint64(epoch)<<48 | uint64(s.Shard)<<24 | uint64(s.Index)
}

// Reader yields the sample order of one rank, as WebDataset does it: the
// dataset's parts go to the ranks round robin, part i to rank i mod N
// (splitParts: whole shards, or ranges of them when there are fewer shards
// than ranks); each epoch the rank visits its parts in an order shuffled
// with the epoch's seed, reads each sequentially and passes samples
// through a shuffle buffer of ShuffleBuffer entries. The order depends
// only on the seed, the rank and the shard sizes, so every loader, run
// and resumed run sees the same samples in the same steps. Its state
// (Order, Buf) counts in parts; Next returns samples by shard.
type Reader struct {
	sizes  []int  // samples per part of the whole dataset
	parts  []part // where each part lies
	rank   int
	ranks  int
	seed   uint64
	bufCap int
	st     readerState
}

// readerState is everything Reader needs to resume: saved in checkpoints.
type readerState struct {
	Epoch   int         `json:"epoch"`
	Order   []int       `json:"order"`    // this epoch's part visiting order
	Pos     int         `json:"pos"`      // next position in Order
	InShard int         `json:"in_shard"` // next sample of Order[Pos]
	Buf     []SampleRef `json:"buf"`
	BufEp   []int       `json:"buf_epoch"` // epoch each buffered sample was read in
	RNG     []byte      `json:"rng"`
	Served  int64       `json:"served"` // samples returned so far
	rng     *rand.PCG
}

// New returns rank's reader over a dataset whose shards hold sizes
// samples, split over the ranks by splitParts. Every rank reads B samples
// a step whatever its share of the samples, wrapping into its next epoch
// when its parts run out, so an uneven split cannot make a rank run dry
// while the others wait for it; SplitWarning says when the shares differ
// enough to skew what the model sees.
func New(sizes []int, rank, ranks int, seed uint64, shuffleBuffer int) (*Reader, error) {
	if rank < 0 || rank >= ranks {
		return nil, fmt.Errorf("spmd: rank %d of %d", rank, ranks)
	}
	// Every shard, not only this rank's: the ranks must agree that the
	// job cannot run, or the others would wait for this one.
	if i := slices.Index(sizes, 0); i >= 0 {
		return nil, fmt.Errorf("spmd: shard %d has no samples", i)
	}
	parts, err := splitParts(sizes, ranks)
	if err != nil {
		return nil, err
	}
	psizes := make([]int, len(parts))
	for i, p := range parts {
		psizes[i] = p.n
	}
	r := &Reader{sizes: psizes, parts: parts, rank: rank, ranks: ranks, seed: seed, bufCap: max(shuffleBuffer, 1)}
	r.st.rng = rand.NewPCG(seed, uint64(rank)+1)
	r.startEpoch(0)
	return r, nil
}

// part is a run of one shard's samples that one rank reads as a unit:
// samples [start, start+n) of shard.
type part struct{ shard, start, n int }

// splitParts cuts shards of sizes samples into the parts the ranks read,
// part i going to rank i mod ranks. With at least as many shards as
// ranks, every shard is a part (ranks then read different numbers of
// shards when the count does not divide). With fewer, each shard is cut
// into ranks/gcd(shards, ranks) ranges of near-equal size, so that every
// rank reads the same number of ranges (a range of every shard when the
// counts are coprime: 3 shards on 8 ranks give each rank three ranges,
// one per shard). A shard too small to cut fails, naming it.
func splitParts(sizes []int, ranks int) ([]part, error) {
	n := len(sizes)
	switch {
	case ranks < 1:
		return nil, fmt.Errorf("spmd: %d ranks", ranks)
	case n == 0:
		return nil, fmt.Errorf("spmd: no shards")
	case n >= ranks:
		parts := make([]part, n)
		for i, sz := range sizes {
			parts[i] = part{shard: i, n: sz}
		}
		return parts, nil
	}
	k := ranks / gcd(n, ranks)
	parts := make([]part, 0, n*k)
	for i, sz := range sizes {
		if sz < k {
			return nil, fmt.Errorf("spmd: shard %d holds %d %s, too few to cut into the %d ranges that %d shards on %d ranks need (each rank reads ranges of the shards): use fewer ranks, or reshard",
				i, sz, plural(sz, "sample"), k, n, ranks)
		}
		for j := range k {
			start, end := sz*j/k, sz*(j+1)/k
			parts = append(parts, part{shard: i, start: start, n: end - start})
		}
	}
	return parts, nil
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// SplitError says why shards of sizes samples cannot be split over
// ranks (a shard too small to cut into ranges), nil when they can.
func SplitError(sizes []int, ranks int) error {
	_, err := splitParts(sizes, ranks)
	return err
}

// rankShards returns the indexes of the parts, of n, that rank reads:
// part i goes to rank i mod ranks.
func rankShards(n, rank, ranks int) []int {
	var out []int
	for i := rank; i < n; i += ranks {
		out = append(out, i)
	}
	return out
}

// RankSamples returns how many samples each of ranks reads per epoch when
// shards of sizes samples are split as Reader splits them (splitParts);
// nil when they cannot be.
func RankSamples(sizes []int, ranks int) []int {
	parts, err := splitParts(sizes, ranks)
	if err != nil {
		return nil
	}
	n := make([]int, ranks)
	for r := range n {
		for _, i := range rankShards(len(parts), r, ranks) {
			n[r] += parts[i].n
		}
	}
	return n
}

// MaxSampleImbalance is how many times more samples per epoch one rank
// may read than another before SplitWarning warns: a rank with fewer
// samples serves each of them proportionally more often (its epochs are
// shorter), which skews what the model sees.
const MaxSampleImbalance = 2

// maxNamedRanks caps the ranks a warning lists.
const maxNamedRanks = 6

// SplitWarning returns a one-line warning, or "" when there is nothing to
// say, about a dataset whose shards hold sizes samples, read by ranks
// ranks of batch samples per step: when a rank reads fewer samples per
// epoch than its batch (every batch it serves repeats samples), or when
// the ranks' samples per epoch differ by more than MaxSampleImbalance
// times. A split Reader refuses (fewer shards than ranks, a count that
// does not divide, an empty shard) gets "": NewReader's error says it.
func SplitWarning(sizes []int, ranks, batch int) string {
	if slices.Contains(sizes, 0) || SplitError(sizes, ranks) != nil {
		return ""
	}
	n := RankSamples(sizes, ranks)
	lo, hi := 0, 0 // ranks with the fewest and most samples
	var under []int
	for r, c := range n {
		if c < n[lo] {
			lo = r
		}
		if c > n[hi] {
			hi = r
		}
		if c < batch {
			under = append(under, r)
		}
	}
	counts := func(rs []int) string {
		var b strings.Builder
		for i, r := range rs[:min(len(rs), maxNamedRanks)] {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "rank %d has %d", r, n[r])
		}
		if len(rs) > maxNamedRanks {
			fmt.Fprintf(&b, " and %d more ranks", len(rs)-maxNamedRanks)
		}
		return b.String()
	}
	switch {
	case len(under) > 0:
		most := ""
		if len(under) < len(n) || len(under) > maxNamedRanks {
			// The busiest rank is not among those listed.
			most = fmt.Sprintf(" (the most: rank %d has %d)", hi, n[hi])
		}
		return fmt.Sprintf("samples per epoch below the batch of %d: %s%s, so every batch of those ranks repeats samples: reshard so that each rank gets at least a batch (%s)",
			batch, counts(under), most, splitRule(len(sizes), ranks))
	case n[hi] > MaxSampleImbalance*n[lo]:
		var small []int
		for r, c := range n {
			if c*MaxSampleImbalance < n[hi] {
				small = append(small, r)
			}
		}
		return fmt.Sprintf("samples per epoch differ by more than %dx across ranks: rank %d has %d, %s (batch %d), so rank %d serves each of its samples %.1fx as often: reshard so that the ranks get about the same number (%s)",
			MaxSampleImbalance, hi, n[hi], counts(small), batch, lo, float64(n[hi])/float64(n[lo]), splitRule(len(sizes), ranks))
	}
	return ""
}

// splitRule says how n shards go to ranks, for messages.
func splitRule(n, ranks int) string {
	if n >= ranks {
		return fmt.Sprintf("shard i goes to rank i mod %d", ranks)
	}
	k := ranks / gcd(n, ranks)
	return fmt.Sprintf("%d shards on %d ranks: each shard is cut into %d ranges, range i to rank i mod %d", n, ranks, k, ranks)
}

func (r *Reader) startEpoch(e int) {
	r.st.Epoch = e
	r.st.Order = append(r.st.Order[:0], rankShards(len(r.sizes), r.rank, r.ranks)...)
	perm := rand.New(rand.NewPCG(r.seed^0x5eed5eed, uint64(e)<<16|uint64(r.rank)))
	perm.Shuffle(len(r.st.Order), func(i, j int) { r.st.Order[i], r.st.Order[j] = r.st.Order[j], r.st.Order[i] })
	r.st.Pos, r.st.InShard = 0, 0
}

// pull reads the next sample in shard order, moving to the next epoch at
// the end of this one.
func (r *Reader) pull() (SampleRef, int) {
	for r.st.InShard >= r.sizes[r.st.Order[r.st.Pos]] {
		r.st.Pos++
		r.st.InShard = 0
		if r.st.Pos == len(r.st.Order) {
			r.startEpoch(r.st.Epoch + 1)
		}
	}
	s := SampleRef{Shard: r.st.Order[r.st.Pos], Index: r.st.InShard}
	r.st.InShard++
	return s, r.st.Epoch
}

// Next returns the rank's next sample and the epoch it was read in.
func (r *Reader) Next() (SampleRef, int) {
	for len(r.st.Buf) < r.bufCap {
		s, e := r.pull()
		r.st.Buf = append(r.st.Buf, s)
		r.st.BufEp = append(r.st.BufEp, e)
	}
	i := int(r.st.rng.Uint64() % uint64(len(r.st.Buf)))
	s, e := r.st.Buf[i], r.st.BufEp[i]
	last := len(r.st.Buf) - 1
	r.st.Buf[i], r.st.BufEp[i] = r.st.Buf[last], r.st.BufEp[last]
	r.st.Buf, r.st.BufEp = r.st.Buf[:last], r.st.BufEp[:last]
	r.st.Served++
	p := r.parts[s.Shard]
	return SampleRef{Shard: p.shard, Index: p.start + s.Index}, e
}

// MarshalJSON saves the reader's position.
func (r *Reader) MarshalJSON() ([]byte, error) {
	b, err := r.st.rng.MarshalBinary()
	if err != nil {
		return nil, err
	}
	st := r.st
	st.RNG = b
	return json.Marshal(st)
}

// UnmarshalJSON restores a position saved by MarshalJSON into a reader
// made by NewReader over the same dataset and ranks.
func (r *Reader) UnmarshalJSON(data []byte) error {
	var st readerState
	if err := json.Unmarshal(data, &st); err != nil {
		return fmt.Errorf("spmd: reader state: %w", err)
	}
	st.rng = rand.NewPCG(0, 0)
	if err := st.rng.UnmarshalBinary(st.RNG); err != nil {
		return fmt.Errorf("spmd: reader state: shuffle generator: %w", err)
	}
	if err := r.checkState(&st); err != nil {
		return fmt.Errorf("spmd: reader state of rank %d: %w", r.rank, err)
	}
	r.st = st
	return nil
}

// maxEpoch bounds a restored state's epoch, so that the counts checkState
// derives from it cannot overflow.
const maxEpoch = 1<<31 - 1

// checkState reports why st cannot be a state of r's reader: one its
// draws reach from NewReader over the same dataset, ranks and seed, with
// a shuffle buffer no larger than r's. A hand-edited or damaged
// checkpoint could otherwise serve another rank's samples, or one sample
// twice in an epoch, without a word (or end the job with a misleading
// "blocks disagree" under a planned loader).
func (r *Reader) checkState(st *readerState) error {
	if st.Epoch < 0 || st.Epoch > maxEpoch {
		return fmt.Errorf("epoch %d outside [0, %d]", st.Epoch, maxEpoch)
	}
	// The shard order is the epoch's shuffle of the rank's shards.
	want := Reader{sizes: r.sizes, parts: r.parts, rank: r.rank, ranks: r.ranks, seed: r.seed}
	want.startEpoch(st.Epoch)
	if !slices.Equal(st.Order, want.st.Order) {
		return fmt.Errorf("shard order %v of epoch %d, not the %v this seed and rank give", st.Order, st.Epoch, want.st.Order)
	}
	if st.Pos < 0 || st.Pos >= len(st.Order) {
		return fmt.Errorf("position %d outside its %d shards", st.Pos, len(st.Order))
	}
	if size := r.sizes[st.Order[st.Pos]]; st.InShard < 0 || st.InShard > size {
		return fmt.Errorf("sample %d of shard %d, which holds %d", st.InShard, st.Order[st.Pos], size)
	}
	if len(st.Buf) != len(st.BufEp) || len(st.Buf) > r.bufCap {
		return fmt.Errorf("%d buffered samples with %d epochs, for a shuffle buffer of %d", len(st.Buf), len(st.BufEp), r.bufCap)
	}
	// Where each of the epoch's shards comes in its order: a buffered
	// sample of this epoch must already have been read.
	at := make(map[int]int, len(st.Order))
	for i, sh := range st.Order {
		at[sh] = i
	}
	seen := make(map[uint64]bool, len(st.Buf))
	for i, s := range st.Buf {
		e := st.BufEp[i]
		switch {
		case s.Shard < 0 || s.Shard >= len(r.sizes) || s.Shard%r.ranks != r.rank:
			return fmt.Errorf("buffered sample of shard %d, not one of rank %d's", s.Shard, r.rank)
		case s.Index < 0 || s.Index >= r.sizes[s.Shard]:
			return fmt.Errorf("buffered sample %d of shard %d, which holds %d", s.Index, s.Shard, r.sizes[s.Shard])
		case e < 0 || e > st.Epoch:
			return fmt.Errorf("buffered sample of epoch %d, outside [0, %d]", e, st.Epoch)
		case e == st.Epoch && (at[s.Shard] > st.Pos || at[s.Shard] == st.Pos && s.Index >= st.InShard):
			return fmt.Errorf("buffered sample %d of shard %d, not read yet in epoch %d", s.Index, s.Shard, e)
		case seen[s.ID(e)]:
			return fmt.Errorf("sample %d of shard %d buffered twice in epoch %d", s.Index, s.Shard, e)
		}
		seen[s.ID(e)] = true
	}
	// Every sample read was either served or is buffered.
	var perEpoch, inEpoch int64
	for i, sh := range st.Order {
		perEpoch += int64(r.sizes[sh])
		if i < st.Pos {
			inEpoch += int64(r.sizes[sh])
		}
	}
	read := int64(st.Epoch)*perEpoch + inEpoch + int64(st.InShard)
	if st.Served != read-int64(len(st.Buf)) {
		return fmt.Errorf("%d samples served, but %d read and %d buffered", st.Served, read, len(st.Buf))
	}
	return nil
}

// plural is word for one of it, word+"s" for any other count.
func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}
