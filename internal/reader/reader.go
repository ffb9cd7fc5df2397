package reader

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
)

// DefaultShuffleBuffer is the reader's default shuffle buffer, in
// samples. The benchmark's replay of a real run's reader must use the same.
const DefaultShuffleBuffer = 64

// ErrState marks a saved order that this job cannot continue: another
// dataset, seed, global batch, stream count or shuffle buffer, or a
// damaged state. The message says which.
var ErrState = errors.New("reader: cannot continue this order")

// ErrShortEpoch marks a dataset whose epoch is shorter than one global
// batch, so that no step can be filled: NewOrder's error is one, and its
// message gives the sizes and what to change.
var ErrShortEpoch = errors.New("reader: an epoch is shorter than one global batch")

// shortEpochError is ErrShortEpoch with the epoch's samples and the
// global batch.
type shortEpochError struct{ samples, global int }

func (e shortEpochError) Error() string {
	return fmt.Sprintf("reader: an epoch of %d %s is shorter than one global batch of %d: use more data, or fewer ranks or a smaller --batch",
		e.samples, plural(e.samples, "sample"), e.global)
}

func (e shortEpochError) Is(target error) bool { return target == ErrShortEpoch }

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

// Order is the job's sample order, as WebDataset and Mosaic Streaming
// users expect it, and the same at any world size: which samples make up
// each step's global batch depends only on the shard sizes, the seed, the
// global batch G (ranks x per-rank batch), the number of streams S and
// their turns T.
//
//   - Each epoch the shards are shuffled with the seed and the epoch.
//   - S streams (by default min(shards, G)) each read whole shards in
//     turn, the next of the epoch's queue whenever they finish one (and
//     the next epoch's queue after the last), and pass their samples
//     through a shuffle buffer of their own.
//   - Global batch t takes, for each of its G positions p in order, the
//     next sample of stream ⌊p·S/G⌋: a run of about G/S consecutive
//     positions from each stream. With turns T > 1 the streams form S/T
//     lanes of T streams that take turns: position p of batch t draws
//     from stream ⌊p·L/G⌋·T + t mod T of the L = S/T lanes, so that one
//     stream fills a lane's whole run of a batch, and its next run T
//     batches later. S = N·W and T = W is WebDataset under a DataLoader
//     of W workers: each batch of a rank comes whole from one worker's
//     shard, the workers taking turns.
//   - A rank of N takes positions [r·G/N, (r+1)·G/N) of every global
//     batch, so that when S = N each rank streams its own shards, as a
//     WebDataset rank does (S = N·W gives each of its W workers one).
//
// Every sample is served once an epoch; epochs run into each other where
// shuffle buffers straddle them. Every rank computes the whole order (it
// is a few integers per sample), so its state is the same on every rank,
// and a job saved at N ranks resumes at M with the same global batch.
type Order struct {
	sizes  []int // samples per shard
	g      int   // global batch
	seed   uint64
	bufCap int
	st     orderState
}

// orderState is everything Order needs to continue: saved in checkpoints
// and Loader states, the same on every rank.
type orderState struct {
	Format  int           `json:"format"`
	Dataset uint64        `json:"dataset"`                // hash of the shard sizes
	Global  int           `json:"global_batch"`           // G
	Seed    uint64        `json:"seed"`                   // the order's seed
	Buffer  int           `json:"shuffle_buffer"`         // per stream
	Batches int64         `json:"batches"`                // global batches drawn
	Turns   int           `json:"stream_turns,omitempty"` // T; absent is 1
	Epoch   int           `json:"epoch"`                  // the epoch of Queue
	Queue   []int         `json:"queue"`                  // that epoch's shard order
	Next    int           `json:"next"`                   // next position of Queue to hand out
	Streams []streamState `json:"streams"`
}

// orderFormat is the layout version of orderState.
const orderFormat = 1

// streamState is one stream: the shard it reads, and its shuffle buffer.
type streamState struct {
	Shard int         `json:"shard"` // -1 before its first
	Epoch int         `json:"epoch"` // the epoch Shard was handed out in
	Pos   int         `json:"pos"`   // next sample of Shard
	Buf   []SampleRef `json:"buf"`
	BufEp []int       `json:"buf_epoch"`
	RNG   []byte      `json:"rng"`
	rng   *rand.PCG
}

// NewOrder returns the order of a dataset whose shards hold sizes
// samples, for a global batch of global samples, with streams streams (0:
// min(shards, global) lanes of turns streams) taking turns turns at a
// time (0 or 1: none), each passing samples through a shuffle buffer of
// shuffleBuffer (at most the stream's share of an epoch, samples over
// streams). An epoch shorter than one global batch is refused, as
// is an empty shard.
func NewOrder(sizes []int, global, streams, turns int, seed uint64, shuffleBuffer int) (*Order, error) {
	total := 0
	for i, n := range sizes {
		if n <= 0 {
			return nil, fmt.Errorf("reader: shard %d has no samples", i)
		}
		total += n
	}
	switch {
	case len(sizes) == 0:
		return nil, fmt.Errorf("reader: no shards")
	case global < 1:
		return nil, fmt.Errorf("reader: global batch %d", global)
	case total < global:
		return nil, shortEpochError{samples: total, global: global}
	}
	turns = max(turns, 1)
	if turns > len(sizes) {
		return nil, fmt.Errorf("reader: --stream-turns %d: want 1..%d (at most the shards, each stream reading its own)", turns, len(sizes))
	}
	if streams <= 0 {
		streams = min(len(sizes)/turns, global) * turns
	}
	switch lanes := streams / turns; {
	case streams%turns != 0:
		return nil, fmt.Errorf("reader: --streams %d: want a multiple of --stream-turns %d", streams, turns)
	case lanes > global || streams > len(sizes):
		return nil, fmt.Errorf("reader: --streams %d: want %d..%d (at most the shards, %d, and the global batch, %d, times --stream-turns %d)",
			streams, turns, min(len(sizes)/turns, global)*turns, len(sizes), global, turns)
	}
	// A stream's buffer holds at most its share of an epoch: a larger one
	// would hoard the samples of several epochs and serve them at random
	// across them.
	o := &Order{sizes: sizes, g: global, seed: seed, bufCap: max(min(shuffleBuffer, total/streams), 1)}
	o.st = orderState{Format: orderFormat, Dataset: sizesHash(sizes), Global: global, Seed: seed, Buffer: o.bufCap,
		Streams: make([]streamState, streams)}
	if turns > 1 {
		o.st.Turns = turns
	}
	for s := range o.st.Streams {
		o.st.Streams[s] = streamState{Shard: -1, rng: rand.NewPCG(seed, uint64(s)+1)}
	}
	o.startEpoch(0)
	return o, nil
}

// Streams is the order's number of streams.
func (o *Order) Streams() int { return len(o.st.Streams) }

// Turns is how many streams of a lane take turns (1: none).
func (o *Order) Turns() int { return max(o.st.Turns, 1) }

// Epoch is the epoch whose shards the streams are being handed: 0 until
// every shard of epoch 0 has gone to a stream.
func (o *Order) Epoch() int { return o.st.Epoch }

// Batches is how many global batches the order has drawn.
func (o *Order) Batches() int64 { return o.st.Batches }

func (o *Order) startEpoch(e int) {
	o.st.Epoch, o.st.Next = e, 0
	o.st.Queue = o.st.Queue[:0]
	for i := range o.sizes {
		o.st.Queue = append(o.st.Queue, i)
	}
	perm := rand.New(rand.NewPCG(o.seed^0x5eed5eed, uint64(e)))
	perm.Shuffle(len(o.st.Queue), func(i, j int) { o.st.Queue[i], o.st.Queue[j] = o.st.Queue[j], o.st.Queue[i] })
}

// pull reads stream s's next sample in shard order, taking the queue's
// next shard when its own is done.
func (o *Order) pull(s *streamState) (SampleRef, int) {
	for s.Shard < 0 || s.Pos >= o.sizes[s.Shard] {
		if o.st.Next == len(o.st.Queue) {
			o.startEpoch(o.st.Epoch + 1)
		}
		s.Shard, s.Epoch, s.Pos = o.st.Queue[o.st.Next], o.st.Epoch, 0
		o.st.Next++
	}
	ref := SampleRef{Shard: s.Shard, Index: s.Pos}
	s.Pos++
	return ref, s.Epoch
}

// draw returns stream s's next sample through its shuffle buffer.
func (o *Order) draw(s *streamState) (SampleRef, int) {
	for len(s.Buf) < o.bufCap {
		ref, e := o.pull(s)
		s.Buf = append(s.Buf, ref)
		s.BufEp = append(s.BufEp, e)
	}
	i := int(s.rng.Uint64() % uint64(len(s.Buf)))
	ref, e := s.Buf[i], s.BufEp[i]
	last := len(s.Buf) - 1
	s.Buf[i], s.BufEp[i] = s.Buf[last], s.BufEp[last]
	s.Buf, s.BufEp = s.Buf[:last], s.BufEp[:last]
	return ref, e
}

// NextBatch appends the next global batch's G samples, in position
// order, to refs and their epochs to epochs.
func (o *Order) NextBatch(refs []SampleRef, epochs []int) ([]SampleRef, []int) {
	turns := o.Turns()
	lanes, turn := len(o.st.Streams)/turns, int(o.st.Batches%int64(turns))
	for p := range o.g {
		ref, e := o.draw(&o.st.Streams[p*lanes/o.g*turns+turn])
		refs, epochs = append(refs, ref), append(epochs, e)
	}
	o.st.Batches++
	return refs, epochs
}

// MarshalJSON saves the order's position.
func (o *Order) MarshalJSON() ([]byte, error) {
	st := o.st
	st.Streams = slices.Clone(st.Streams)
	for i := range st.Streams {
		b, err := st.Streams[i].rng.MarshalBinary()
		if err != nil {
			return nil, err
		}
		st.Streams[i].RNG = b
	}
	return json.Marshal(st)
}

// UnmarshalJSON continues a position saved by MarshalJSON, at any world
// size: the order must be of the same dataset, seed, global batch,
// streams and shuffle buffer (ErrState, saying which differs).
func (o *Order) UnmarshalJSON(data []byte) error {
	var st orderState
	if err := json.Unmarshal(data, &st); err != nil {
		return fmt.Errorf("%w: %v", ErrState, err)
	}
	if err := o.checkState(&st); err != nil {
		return fmt.Errorf("%w: %v", ErrState, err)
	}
	for i := range st.Streams {
		st.Streams[i].rng = rand.NewPCG(0, 0)
		if err := st.Streams[i].rng.UnmarshalBinary(st.Streams[i].RNG); err != nil {
			return fmt.Errorf("%w: stream %d's shuffle generator: %v", ErrState, i, err)
		}
		st.Streams[i].RNG = nil
	}
	o.st = st
	return nil
}

// maxEpoch bounds a restored state's epoch.
const maxEpoch = 1<<31 - 1

// checkState reports why st cannot continue o: another job's order, or
// one no run of this order reaches (a damaged or hand-edited state would
// otherwise serve a sample twice in an epoch without a word).
func (o *Order) checkState(st *orderState) error {
	switch {
	case st.Format != orderFormat:
		return fmt.Errorf("order format %d, want %d", st.Format, orderFormat)
	case st.Dataset != o.st.Dataset:
		return fmt.Errorf("saved for another dataset (its shards' sample counts differ)")
	case st.Seed != o.seed:
		return fmt.Errorf("saved with seed %d, this job's is %d", st.Seed, o.seed)
	case st.Global != o.g:
		return fmt.Errorf("saved with a global batch of %d, this job's is %d (ranks x --batch): keep the global batch to resume at another world size", st.Global, o.g)
	case len(st.Streams) != len(o.st.Streams):
		return fmt.Errorf("saved with %d streams, this job's is %d (--streams)", len(st.Streams), len(o.st.Streams))
	case max(st.Turns, 1) != o.Turns():
		return fmt.Errorf("saved with streams taking turns %d at a time, this job's %d (--stream-turns)", max(st.Turns, 1), o.Turns())
	case st.Buffer != o.bufCap:
		return fmt.Errorf("saved with a shuffle buffer of %d, this job's is %d (--shuffle-buffer)", st.Buffer, o.bufCap)
	case st.Epoch < 0 || st.Epoch > maxEpoch:
		return fmt.Errorf("epoch %d outside [0, %d]", st.Epoch, maxEpoch)
	case st.Batches < 0:
		return fmt.Errorf("%d batches drawn", st.Batches)
	}
	want := Order{sizes: o.sizes, seed: o.seed}
	want.startEpoch(st.Epoch)
	if !slices.Equal(st.Queue, want.st.Queue) {
		return fmt.Errorf("shard order of epoch %d is not this seed's", st.Epoch)
	}
	if st.Next < 0 || st.Next > len(st.Queue) {
		return fmt.Errorf("queue position %d outside its %d shards", st.Next, len(st.Queue))
	}
	handed := make(map[int]bool, len(st.Streams)) // shards of this epoch a stream reads now
	for i := range st.Streams {
		s := &st.Streams[i]
		if len(s.Buf) != len(s.BufEp) || len(s.Buf) > o.bufCap {
			return fmt.Errorf("stream %d: %d buffered samples with %d epochs, for a shuffle buffer of %d", i, len(s.Buf), len(s.BufEp), o.bufCap)
		}
		if s.Shard < 0 {
			if len(s.Buf) > 0 {
				return fmt.Errorf("stream %d buffers samples before its first shard", i)
			}
			continue
		}
		switch {
		case s.Shard >= len(o.sizes):
			return fmt.Errorf("stream %d reads shard %d of %d", i, s.Shard, len(o.sizes))
		case s.Pos < 0 || s.Pos > o.sizes[s.Shard]:
			return fmt.Errorf("stream %d at sample %d of shard %d, which holds %d", i, s.Pos, s.Shard, o.sizes[s.Shard])
		case s.Epoch != st.Epoch && s.Epoch != st.Epoch-1:
			return fmt.Errorf("stream %d reads a shard of epoch %d in epoch %d", i, s.Epoch, st.Epoch)
		case s.Epoch == st.Epoch && (!slices.Contains(st.Queue[:st.Next], s.Shard) || handed[s.Shard]):
			return fmt.Errorf("stream %d reads shard %d, not handed to it in epoch %d", i, s.Shard, st.Epoch)
		}
		if s.Epoch == st.Epoch {
			handed[s.Shard] = true
		}
		for k, ref := range s.Buf {
			if ref.Shard < 0 || ref.Shard >= len(o.sizes) || ref.Index < 0 || ref.Index >= o.sizes[ref.Shard] {
				return fmt.Errorf("stream %d buffers sample %d of shard %d, which does not exist", i, ref.Index, ref.Shard)
			}
			if e := s.BufEp[k]; e < 0 || e > st.Epoch {
				return fmt.Errorf("stream %d buffers a sample of epoch %d, outside [0, %d]", i, e, st.Epoch)
			}
		}
	}
	return nil
}

// sizesHash identifies a dataset by its shards' sample counts.
func sizesHash(sizes []int) uint64 {
	h := uint64(0xcbf29ce484222325)
	for _, n := range sizes {
		h ^= uint64(n)
		h *= 0x100000001b3
		h ^= h >> 29
	}
	return h ^ uint64(len(sizes))
}

// Reader is one rank's view of the order: its slice of every global
// batch, one sample at a time.
type Reader struct {
	order       *Order
	rank, ranks int
	batch       int
	own         []SampleRef // this rank's samples of the current global batch, not yet served
	ownEp       []int
	refs        []SampleRef // scratch for a global batch
	eps         []int
}

// New returns rank's reader (of ranks, batch samples a step each) of the
// order of a dataset whose shards hold sizes samples: NewOrder's, for a
// global batch of ranks x batch.
func New(sizes []int, rank, ranks, batch int, seed uint64, shuffleBuffer, streams, turns int) (*Reader, error) {
	if rank < 0 || rank >= ranks || batch < 1 {
		return nil, fmt.Errorf("reader: rank %d of %d, batch %d", rank, ranks, batch)
	}
	o, err := NewOrder(sizes, ranks*batch, streams, turns, seed, shuffleBuffer)
	if err != nil {
		return nil, err
	}
	return &Reader{order: o, rank: rank, ranks: ranks, batch: batch}, nil
}

// Next returns the rank's next sample and the epoch it was read in.
func (r *Reader) Next() (SampleRef, int) {
	if len(r.own) == 0 {
		r.refs, r.eps = r.order.NextBatch(r.refs[:0], r.eps[:0])
		lo := r.rank * r.batch
		r.own = append(r.own[:0], r.refs[lo:lo+r.batch]...)
		r.ownEp = append(r.ownEp[:0], r.eps[lo:lo+r.batch]...)
	}
	ref, e := r.own[0], r.ownEp[0]
	r.own, r.ownEp = r.own[1:], r.ownEp[1:]
	return ref, e
}

// Skip draws n global batches without serving them: where a run that
// served n steps left the order.
func (r *Reader) Skip(n int64) {
	for range n {
		r.refs, r.eps = r.order.NextBatch(r.refs[:0], r.eps[:0])
	}
	r.own, r.ownEp = r.own[:0], r.ownEp[:0]
}

// Order is the order the reader takes its samples from.
func (r *Reader) Order() *Order { return r.order }

// MarshalJSON saves the order's position; it must be called between two
// global batches (after a multiple of batch Next calls), where the state
// is the same on every rank.
func (r *Reader) MarshalJSON() ([]byte, error) {
	if len(r.own) != 0 {
		return nil, fmt.Errorf("reader: state saved in the middle of a global batch")
	}
	return r.order.MarshalJSON()
}

// UnmarshalJSON continues the order a reader of any rank, at any world
// size with the same global batch, saved.
func (r *Reader) UnmarshalJSON(data []byte) error {
	if err := r.order.UnmarshalJSON(data); err != nil {
		return err
	}
	r.own, r.ownEp = r.own[:0], r.ownEp[:0]
	return nil
}

// plural is word for one of it, word+"s" for any other count.
func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}
