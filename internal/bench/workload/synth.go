package workload

import (
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/datahelix/datahelix/internal/costmodel"
	"github.com/datahelix/datahelix/internal/metrics"
	"github.com/datahelix/datahelix/internal/sim"
	"github.com/datahelix/datahelix/internal/video"
)

// PoolSize is how many samples are drawn from each source's preset: the
// simulator resamples them (with the run structure of source videos), so
// the sample distribution is the generator's, and a sample's cost is
// computed once.
const PoolSize = 2048

// poolEntry is one drawn sample with everything the simulator needs.
type poolEntry struct {
	class     int32   // source video class: resolution, frame rate and codec
	cost      int64   // true preparation cost, unsplit, µs
	splitCost int64   // true cost when split into len(parts) tasks
	parts     []int32 // frames each keyframe-aligned task decodes (nil: one task)
	sigma     float64 // shape of its estimate's log-normal error
	bytes     int64
	frames    int   // frames and images the GPU consumes
	tokens    int   // text tokens
	mem       int64 // decoded bytes
}

// pool is one source's drawn samples, grouped by class.
type pool struct {
	src     Source
	entries []poolEntry
	byClass [][]int32
}

// Synth produces the samples of a workload for the simulator: the ranks
// read a dataset of source-homogeneous shards (each follows one source,
// SourceOrder) in the WebDataset order of the runtime's reader, or in
// torch-ddp's (layout.go), and inside a
// shard consecutive clips come in runs from one source video (mean run
// length ClipsPerVideo) that share resolution, frame rate and codec. The
// features of every sample come from the generator's presets (gen.Spec),
// so real and simulated runs draw from the same distributions; the true
// cost is the calibrated cost model's prediction from the sample's
// record, and the estimate the planner sees is the true cost times a
// log-normal error with the calibration's measured MAPE.
//
// A Synth is safe for concurrent use.
type Synth struct {
	w       *Workload
	ranks   int
	batch   int
	seed    uint64
	pools   []*pool
	weights []float64 // cumulative, normalized source weights
	order   []int     // source of shard k is order[k % len(order)]
	// shardLen is per source the samples of one shard: ShardBytes over
	// the source's mean sample bytes.
	shardLen []int64

	// NoSplit withholds the clips' task split from the simulator, so no
	// loader splits (an ablation; the runtime splits).
	NoSplit bool
	// NoiseOnTruth puts the cost model's measured error on the true cost
	// (a mean-1 log-normal factor; the planner sees the model's
	// prediction) instead of on the estimate (the default: the true cost
	// is the prediction, the estimate carries the error). The measured
	// error mixes real sample-to-sample variation with the noise of
	// timing on a shared machine, so the two bracket the truth.
	NoiseOnTruth bool

	mu     sync.Mutex
	shards map[int64]*shardDraw
	layout layout
}

// shardDraw is which pool entries a shard holds, in order.
type shardDraw struct {
	source  int
	size    int64   // samples in the shard
	entries []int32 // the first drawn
	class   []int32 // the current source video's class, for the next entry
}

// NewSynth draws the workload's pools with seed. batch is the per-rank
// batch (the workload's when 0).
func NewSynth(w *Workload, cal *costmodel.Calibration, ranks, batch int, seed uint64) (*Synth, error) {
	if batch <= 0 {
		batch = w.Batch
	}
	if ranks < 1 {
		return nil, fmt.Errorf("bench: %d ranks", ranks)
	}
	s := &Synth{w: w, ranks: ranks, batch: batch, seed: seed, shards: map[int64]*shardDraw{}}
	total := 0.0
	for _, src := range w.Sources {
		total += src.Weight
	}
	acc := 0.0
	for i, src := range w.Sources {
		p, err := drawPool(w, src, cal, seed+uint64(i)*0x9e37)
		if err != nil {
			return nil, Wrapf(err, "workload %s source %s", w.Name, src.Preset)
		}
		s.pools = append(s.pools, p)
		acc += src.Weight / total
		s.weights = append(s.weights, acc)
	}
	s.order = SourceOrder(w.Sources, sourceOrderLen)
	for _, p := range s.pools {
		s.shardLen = append(s.shardLen, ShardSamples(w.ShardBytes, p.meanBytes()))
	}
	if err := s.newLayout(); err != nil {
		return nil, err
	}
	return s, nil
}

// ShardSamples is how many samples of mean size meanBytes fill a shard of
// shardBytes bytes (at least 1): the writing tools close a shard when it
// reaches its size.
func ShardSamples(shardBytes int64, meanBytes float64) int64 {
	if !(meanBytes > 0) {
		return 1
	}
	return max(int64(math.Round(float64(shardBytes)/meanBytes)), 1)
}

// meanBytes is the mean encoded size of the pool's samples.
func (p *pool) meanBytes() float64 {
	var sum float64
	for _, e := range p.entries {
		sum += float64(e.bytes)
	}
	return sum / float64(max(len(p.entries), 1))
}

// ShardLens returns per source the samples of one of its shards.
func (s *Synth) ShardLens() []int64 { return slices.Clone(s.shardLen) }

// sourceOrderLen is the period of the shards' source sequence.
const sourceOrderLen = 1000

// SourceOrder assigns sources to n consecutive shards by smooth weighted
// round robin: every prefix holds each source in proportion to its
// weight (within one shard), as the generator's mixed preset takes one
// source per shard in turn. Which rank reads a shard is the reader's
// per-epoch shuffle's choice, not the shard's index.
func SourceOrder(srcs []Source, n int) []int {
	total := 0.0
	for _, s := range srcs {
		total += s.Weight
	}
	credit := make([]float64, len(srcs))
	out := make([]int, n)
	for k := range out {
		best := 0
		for i, s := range srcs {
			credit[i] += s.Weight
			if credit[i] > credit[best] {
				best = i
			}
		}
		credit[best] -= total
		out[k] = best
	}
	return out
}

// drawPool draws PoolSize samples of a source and computes their costs.
func drawPool(w *Workload, src Source, cal *costmodel.Calibration, seed uint64) (*pool, error) {
	// The cost models per frame count: w.Frames for every clip, or with
	// fps sampling the frames each clip's duration gives.
	type models struct{ unsplit, split *costmodel.Model }
	byFrames := map[int]models{}
	modelsFor := func(f int) models {
		m, ok := byFrames[f]
		if !ok {
			m = models{costmodel.New(cal), costmodel.New(cal)}
			m.unsplit.SetOptions(costmodel.Options{Frames: f, Size: w.Size, MaxTasks: 1})
			m.split.SetOptions(costmodel.Options{Frames: f, Size: w.Size, MaxTasks: w.Workers})
			byFrames[f] = m
		}
		return m
	}
	p := &pool{src: src}
	classes := map[string]int32{}
	sigmas := map[string]float64{}
	for i := range PoolSize {
		spec, err := drawSpec(src.Preset, seed, src.DurationScale, i)
		if err != nil {
			return nil, err
		}
		rec, err := syntheticRecord(spec, cal.BitsPerPixel)
		if err != nil {
			return nil, err
		}
		frames := w.Frames
		if v := rec.Video; v != nil {
			frames = w.ClipFrames(v)
		}
		m := modelsFor(frames)
		key := m.unsplit.Key(rec)
		sigma, ok := sigmas[key]
		if !ok {
			sigma = cal.Sigma(key)
			sigmas[key] = sigma
		}
		e := poolEntry{cost: m.unsplit.Estimate(rec), sigma: sigma, bytes: rec.Bytes}
		e.splitCost = e.cost
		sz := int64(w.Size) * int64(w.Size) * 3
		class := spec.Kind
		switch v := rec.Video; {
		case v != nil:
			e.frames, e.mem = frames, int64(frames)*sz
			class = fmt.Sprintf("%s/%dx%d/%d", v.Codec, v.Width, v.Height, v.Timescale)
			if w.FPS > 0 {
				// Clips of one source video share its duration class too.
				class = fmt.Sprintf("%s/%d", class, frames)
			}
			if w.Workers > 1 {
				tasks := video.PlanTasks(v, video.SampleFrames(v, frames), w.Workers)
				if len(tasks) > 1 {
					e.splitCost = m.split.Estimate(rec)
					for _, t := range tasks {
						e.parts = append(e.parts, int32(t.DecodeFrames))
					}
				}
			}
		default:
			e.frames, e.mem = len(rec.Images), int64(len(rec.Images))*sz
		}
		if rec.Text != nil {
			e.tokens = rec.Text.Tokens
		}
		c, ok := classes[class]
		if !ok {
			c = int32(len(p.byClass))
			classes[class] = c
			p.byClass = append(p.byClass, nil)
		}
		e.class = c
		p.byClass[c] = append(p.byClass[c], int32(i))
		p.entries = append(p.entries, e)
	}
	return p, nil
}

// Workload returns the workload the samples are drawn for.
func (s *Synth) Workload() *Workload { return s.w }

// Batch returns the per-rank batch.
func (s *Synth) Batch() int { return s.batch }

// Means returns the mean true (unsplit) cost in µs, frames and tokens per
// sample over the workload's mixture: the inputs of the provisioning rule
// and of the GPU model.
func (s *Synth) Means() (cost, frames, tokens float64) {
	prev := 0.0
	for i, p := range s.pools {
		share := s.weights[i] - prev
		prev = s.weights[i]
		var c, f, t float64
		for _, e := range p.entries {
			c += float64(e.cost)
			f += float64(e.frames)
			t += float64(e.tokens)
		}
		n := float64(len(p.entries))
		cost += share * c / n
		frames += share * f / n
		tokens += share * t / n
	}
	return cost, frames, tokens
}

// SplitWorkRatio is the mean CPU work of a sample when loaders split
// clips into keyframe-aligned tasks over the mean unsplit work: the cost
// of the extra task set-ups (container open, decoder start) that the
// splitting loaders pay and torch does not.
func (s *Synth) SplitWorkRatio() float64 {
	if s.NoSplit {
		return 1
	}
	var split, whole float64
	prev := 0.0
	for i, p := range s.pools {
		share := s.weights[i] - prev
		prev = s.weights[i]
		var a, b float64
		for _, e := range p.entries {
			a += float64(e.splitCost)
			b += float64(e.cost)
		}
		split += share * a
		whole += share * b
	}
	return split / whole
}

// Imbalance measures how unevenly the workload loads the ranks beyond
// what a rank-local loader can absorb: steps are cut into windows of
// horizon steps; in each, a rank's load is the true cost of its samples
// times its CPU slowdown; Imbalance is the mean over windows of the most
// loaded rank's load over the mean rank's, minus 1. A loader that sees
// the whole window but keeps samples on their rank still has one rank
// that much busier than average; balancing across ranks can remove it.
func (s *Synth) Imbalance(steps, horizon int, slowdowns []float64) float64 {
	return Imbalance(s.Samples, s.ranks, steps, horizon, slowdowns)
}

// Imbalance is Synth.Imbalance over the samples samples gives ranks ranks.
func Imbalance(samples func(step int64, rank int) []sim.Sample, ranks, steps, horizon int, slowdowns []float64) float64 {
	horizon = max(min(horizon, steps), 1)
	windows := max(steps/horizon, 1)
	load := make([]float64, ranks)
	total := 0.0
	for win := range windows {
		clear(load)
		for t := win * horizon; t < (win+1)*horizon; t++ {
			for r := range load {
				for _, x := range samples(int64(t), r) {
					load[r] += float64(x.Cost) * slowdowns[r]
				}
			}
		}
		hi, sum := 0.0, 0.0
		for _, l := range load {
			hi = max(hi, l)
			sum += l
		}
		if sum > 0 {
			total += hi/(sum/float64(len(load))) - 1
		}
	}
	return total / float64(windows)
}

// shard returns shard id with its first upto+1 entries drawn (drawing on
// first use): a shard is drawn only as far as it is read, so a 1 GB shard
// of short texts costs the simulation only the samples it trains. s.mu
// must be held.
func (s *Synth) shard(id, upto int64) *shardDraw {
	d := s.shards[id]
	if d == nil {
		src := s.order[id%int64(len(s.order))]
		d = &shardDraw{source: src, size: s.shardLen[src]}
		s.shards[id] = d
	}
	p := s.pools[d.source]
	newRun := 1 / p.src.ClipsPerVideo
	for o := int64(len(d.entries)); o <= upto && o < d.size; o++ {
		h := hash3(s.seed, uint64(id), uint64(o))
		if o == 0 || unit(mix64(h^2)) < newRun {
			// A new source video: its class is that of a random sample,
			// so classes keep their frequencies in the pool.
			d.class = p.byClass[p.entries[h%uint64(len(p.entries))].class]
		}
		d.entries = append(d.entries, d.class[mix64(h^3)%uint64(len(d.class))])
	}
	return d
}

// Samples returns rank's batch for step in the WebDataset layout (see
// layout.go): the simulator's sample source for every loader but
// torch-ddp. It is a pure function of (step, rank) for a given Synth.
func (s *Synth) Samples(step int64, rank int) []sim.Sample {
	ids := s.globalBatch(step)[rank*s.batch : (rank+1)*s.batch]
	out := make([]sim.Sample, s.batch)
	for slot, id := range ids {
		out[slot] = s.sample(id)
	}
	return out
}

// sample is the sample of id (a reader.SampleRef.ID): the shard's entry
// at its position, with its estimate's error drawn from id.
func (s *Synth) sample(gid uint64) sim.Sample {
	shard, o := refOf(gid)
	s.mu.Lock()
	d := s.shard(shard, o)
	e := &s.pools[d.source].entries[d.entries[o]] // pools do not change once drawn
	s.mu.Unlock()
	x := sim.Sample{ID: gid, Bytes: e.bytes, Cost: e.cost, Est: e.cost, Frames: e.frames, Tokens: e.tokens, Mem: e.mem}
	splitTrue, splitEst := e.splitCost, e.splitCost
	if s.NoiseOnTruth {
		f := math.Exp(e.sigma*gauss(hash3(s.seed, 7, gid)) - e.sigma*e.sigma/2)
		x.Cost = max(int64(math.Round(float64(e.cost)*f)), 1)
		splitTrue = max(int64(math.Round(float64(e.splitCost)*f)), 1)
	} else {
		x.Est = noisy(e.cost, e.sigma, hash3(s.seed, 7, gid))
		splitEst = x.Est * e.splitCost / e.cost
	}
	if len(e.parts) > 1 && !s.NoSplit {
		x.Parts, x.PartsEst = splitCost(splitTrue, e.parts), splitCost(splitEst, e.parts)
	}
	return x
}

// splitCost spreads a cost over tasks in proportion to the frames each
// decodes, as the runtime does for its estimates (at least 1 µs each).
func splitCost(cost int64, frames []int32) []int64 {
	total := int64(0)
	for _, f := range frames {
		total += int64(f)
	}
	out := make([]int64, len(frames))
	for i, f := range frames {
		out[i] = max(cost*int64(f)/max(total, 1), 1)
	}
	return out
}

// noisy returns cost times e^{σZ} for the standard normal Z that h draws,
// at least 1.
func noisy(cost int64, sigma float64, h uint64) int64 {
	if sigma == 0 {
		return cost
	}
	return max(int64(math.Round(float64(cost)*math.Exp(sigma*gauss(h)))), 1)
}

// gauss is the standard normal variate h draws (Box-Muller).
func gauss(h uint64) float64 {
	u1 := (float64(h>>11) + 0.5) / (1 << 53)
	u2 := unit(mix64(h))
	return math.Sqrt(-2*math.Log(u1)) * math.Cos(2*math.Pi*u2)
}

// hash3 mixes three words into one.
func hash3(a, b, c uint64) uint64 {
	return mix64(mix64(mix64(a^0x243f6a8885a308d3)^b) ^ c)
}

// mix64 is one splitmix64 step: the golden-ratio increment, then
// metrics.Mix64's finalizer.
func mix64(x uint64) uint64 { return metrics.Mix64(x + 0x9e3779b97f4a7c15) }

// unit maps a hash to [0, 1).
func unit(h uint64) float64 { return float64(h>>11) / (1 << 53) }
