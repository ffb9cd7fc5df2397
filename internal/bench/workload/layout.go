package workload

import (
	"fmt"
	"sort"
	"sync"

	"github.com/datahelix/datahelix/internal/reader"
	"github.com/datahelix/datahelix/internal/sim"
)

// The data layouts the simulator reads a workload's samples in.
//
// Every loader but torch-ddp reads the WebDataset order the runtime's
// reader builds (reader.Order): each epoch the dataset's shards are
// shuffled with the seed, S = ranks x workers streams (each worker of
// each rank streams its own shard, as a WebDataset DataLoader splits
// shards by rank and then by worker; at most the global batch and the
// shards) each read whole shards in turn through a shuffle buffer of
// reader.DefaultShuffleBuffer samples, and rank r takes positions
// [r·G/N, (r+1)·G/N) of each global batch of G: with a stream per worker
// the W streams of a rank take turns (turns), so that its batch comes
// whole from one worker's shard, as a DataLoader's does. Which sources a rank
// reads then follows the shards its streams drew, not its rank.
//
// torch-ddp reads a map-style dataset under PyTorch's DistributedSampler
// (SamplesDDP): each epoch a seeded permutation of every sample of the
// dataset, of which rank r takes every N-th from position r, batched B at
// a time; every rank mixes every source.

// DatasetShards is how many shards the simulated dataset has, at least
// (more when the streams need more): with the sources' order
// (SourceOrder) of the same period, the dataset holds each source in
// proportion to its weight.
const DatasetShards = sourceOrderLen

// layout holds a Synth's global batches in the WebDataset order, drawn
// on first use: the samples' reader.SampleRef.ID, G per step.
type layout struct {
	mu      sync.Mutex
	order   *reader.Order
	starts  []int64 // per shard, its first sample's position in the dataset; then the dataset's size
	batches [][]uint64
	refs    []reader.SampleRef
	epochs  []int
}

// streams is the WebDataset layout's stream count for the Synth.
func (s *Synth) streams() int {
	return max(min(s.ranks*max(s.w.Workers, 1), s.ranks*s.batch, s.datasetShards()), 1)
}

// turns is the WebDataset layout's stream turns: W when every rank has a
// stream per worker, so that each rank's batch comes whole from one of
// its W workers' shards in turn, as a DataLoader's do (--stream-turns).
func (s *Synth) turns() int {
	if w := max(s.w.Workers, 1); s.streams() == s.ranks*w {
		return w
	}
	return 1
}

// datasetShards is the simulated dataset's shard count: DatasetShards,
// or more where the streams or one global batch need more.
func (s *Synth) datasetShards() int {
	n := max(DatasetShards, s.ranks*max(s.w.Workers, 1))
	var total int64
	for i := range n {
		total += s.shardSize(int64(i))
	}
	for ; total < int64(s.ranks*s.batch); n++ {
		total += s.shardSize(int64(n))
	}
	return n
}

// shardSize is the samples of shard id: its source's (ShardBytes over
// the source's mean sample size).
func (s *Synth) shardSize(id int64) int64 { return s.shardLen[s.order[id%int64(len(s.order))]] }

// newLayout sets up the Synth's WebDataset order.
func (s *Synth) newLayout() error {
	sizes := make([]int, s.datasetShards())
	for i := range sizes {
		sizes[i] = int(s.shardSize(int64(i)))
	}
	s.layout.starts = make([]int64, len(sizes)+1)
	for i, n := range sizes {
		s.layout.starts[i+1] = s.layout.starts[i] + int64(n)
	}
	o, err := reader.NewOrder(sizes, s.ranks*s.batch, s.streams(), s.turns(), s.seed, reader.DefaultShuffleBuffer)
	if err != nil {
		return fmt.Errorf("bench: workload %s: the WebDataset order: %w", s.w.Name, err)
	}
	s.layout.order = o
	return nil
}

// globalBatch returns the sample ids of step's global batch in the
// WebDataset order, G = ranks x batch of them in position order.
func (s *Synth) globalBatch(step int64) []uint64 {
	l := &s.layout
	l.mu.Lock()
	defer l.mu.Unlock()
	for int64(len(l.batches)) <= step {
		l.refs, l.epochs = l.order.NextBatch(l.refs[:0], l.epochs[:0])
		ids := make([]uint64, len(l.refs))
		for i, r := range l.refs {
			ids[i] = r.ID(l.epochs[i])
		}
		l.batches = append(l.batches, ids)
	}
	return l.batches[step]
}

// refOf splits a reader.SampleRef.ID into shard and position.
func refOf(id uint64) (shard int64, index int64) {
	return int64(id >> 24 & (1<<24 - 1)), int64(id & (1<<24 - 1))
}

// SamplesDDP is Samples in torch-ddp's layout: a map-style dataset under
// DistributedSampler with shuffle, the DataLoader dropping each epoch's
// last incomplete batch. Step t of the run is step t mod E of epoch t / E,
// E = dataset / (ranks x batch); rank r's batch is the samples at
// positions (t·B + j)·N + r, j < B, of the epoch's permutation. The
// permutation is a seeded pseudo-random bijection of the dataset's
// samples (permute), not torch.randperm's: the layout, every source on
// every rank, is what matters here.
func (s *Synth) SamplesDDP(step int64, rank int) []sim.Sample {
	starts := s.layout.starts
	total := starts[len(starts)-1]
	g := int64(s.ranks * s.batch)
	perEpoch := max(total/g, 1)
	epoch, t := step/perEpoch, step%perEpoch
	out := make([]sim.Sample, s.batch)
	for j := range out {
		p := (t*int64(s.batch)+int64(j))*int64(s.ranks) + int64(rank)
		k := permute(uint64(p), uint64(total), hash3(s.seed, 0xdd9, uint64(epoch)))
		sh := sort.Search(len(starts)-1, func(i int) bool { return starts[i+1] > int64(k) })
		ref := reader.SampleRef{Shard: sh, Index: int(int64(k) - starts[sh])}
		out[j] = s.sample(ref.ID(int(epoch)))
	}
	return out
}

// permute maps i in [0, n) to a position in [0, n), a bijection chosen
// by key: a four-round Feistel network over the smallest even power of
// two at least n, walking the cycle until it lands inside [0, n).
func permute(i, n, key uint64) uint64 {
	bits := 2
	for uint64(1)<<bits < n {
		bits += 2
	}
	half := bits / 2
	mask := uint64(1)<<half - 1
	x := i
	for {
		l, r := x>>half, x&mask
		for round := range uint64(4) {
			l, r = r, l^(hash3(key, round, r)&mask)
		}
		x = l<<half | r
		if x < n {
			return x
		}
	}
}
