package realrun

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"time"

	"github.com/datahelix/datahelix/decode"
	"github.com/datahelix/datahelix/internal/bench/workload"
	"github.com/datahelix/datahelix/internal/decoding"
	"github.com/datahelix/datahelix/internal/gen"
	"github.com/datahelix/datahelix/internal/shard"
)

// RealScale sizes the real runs for this machine: a dataset of
// ShardsPerRank x ranks shards of SamplesPerShard samples, generated with
// clip durations and picture sizes scaled down (the distributions keep
// their shapes), decoded by Workers workers per rank.
type RealScale struct {
	ShardsPerRank   int
	SamplesPerShard int
	// DurationScale multiplies each source's duration scale; SizeScale
	// every picture size (gen.Config's knobs).
	DurationScale float64
	SizeScale     float64
	// Workers is W per rank in real runs, in place of the workload's (8
	// workers per GPU need 8 cores per rank; this machine has 2 for all
	// ranks).
	Workers int
	// MeasureRepeat is how many times each sample is decoded to measure
	// the dataset's mean cost (the median counts).
	MeasureRepeat int
}

// DefaultRealScale fits a 2-core machine: 2 shards of 16 samples per
// rank, clips a quarter as long and pictures half the size, 2 workers
// per rank.
var DefaultRealScale = RealScale{ShardsPerRank: 2, SamplesPerShard: 16, DurationScale: 0.25, SizeScale: 0.5, Workers: 2, MeasureRepeat: 3}

func (s RealScale) withDefaults() RealScale {
	d := DefaultRealScale
	if s.ShardsPerRank <= 0 {
		s.ShardsPerRank = d.ShardsPerRank
	}
	if s.SamplesPerShard <= 0 {
		s.SamplesPerShard = d.SamplesPerShard
	}
	if s.DurationScale <= 0 {
		s.DurationScale = d.DurationScale
	}
	if s.SizeScale <= 0 {
		s.SizeScale = d.SizeScale
	}
	if s.Workers <= 0 {
		s.Workers = d.Workers
	}
	if s.MeasureRepeat <= 0 {
		s.MeasureRepeat = d.MeasureRepeat
	}
	return s
}

// String states the scale as the report prints it.
func (s RealScale) String() string {
	return fmt.Sprintf("%d shards x %d samples per rank, clip durations x%g (of each source's), picture sizes x%g, W=%d workers per rank",
		s.ShardsPerRank, s.SamplesPerShard, s.DurationScale, s.SizeScale, s.Workers)
}

// realDataset is a generated dataset laid out for a real run: shard k
// follows source workload.SourceOrder(w.Sources)[k], as Synth assigns them, so
// with shard i read by rank i mod N the ranks' loads are correlated as
// in the simulation.
type realDataset struct {
	Dir     string
	Shards  int
	Samples int
	// Sources counts the shards of each preset.
	Sources map[string]int
}

// realSourceConfig is the generator configuration of one source's shards.
func realSourceConfig(src workload.Source, shards int, sc RealScale, seed uint64) gen.Config {
	return gen.Config{Preset: src.Preset, Samples: shards * sc.SamplesPerShard, Shards: shards, Seed: seed,
		DurationScale: src.DurationScale * sc.DurationScale, SizeScale: sc.SizeScale}
}

// realSourceDir names the cache directory of a source's generated shards:
// every knob of the configuration is in the name, so workloads sharing a
// source share its shards.
func realSourceDir(cache string, gc gen.Config) string {
	return filepath.Join(cache, "bench", "real", "src", gen.CacheName(fmt.Sprintf("%s-n%d-k%d-d%s-s%s-seed%d", gc.Preset, gc.Samples, gc.Shards,
		strconv.FormatFloat(gc.DurationScale, 'g', -1, 64), strconv.FormatFloat(gc.SizeScale, 'g', -1, 64), gc.Seed)))
}

// ensureRealDataset generates (once, cached) the dataset of workload w
// for ranks ranks: each source's shards with the generator, then a
// directory of symbolic links "shard-000000.tar", ... in the shards'
// source order.
func ensureRealDataset(ctx context.Context, re RealEnv, w *workload.Workload, ranks int, seed uint64) (*realDataset, error) {
	sc := re.Scale
	n := ranks * sc.ShardsPerRank
	order := workload.SourceOrder(w.Sources, n)
	count := make([]int, len(w.Sources))
	for _, s := range order {
		count[s]++
	}
	rd := &realDataset{Shards: n, Samples: n * sc.SamplesPerShard, Sources: map[string]int{},
		// The links point at generated shards: the format is in the name too.
		Dir: filepath.Join(re.CacheDir, "bench", "real", gen.CacheName(fmt.Sprintf("%s-r%d-k%d-n%d-d%s-s%s-seed%d", w.Name, ranks, sc.ShardsPerRank, sc.SamplesPerShard,
			strconv.FormatFloat(sc.DurationScale, 'g', -1, 64), strconv.FormatFloat(sc.SizeScale, 'g', -1, 64), seed)))}
	// paths[i] lists source i's shards in order.
	paths := make([][]string, len(w.Sources))
	for i, src := range w.Sources {
		if count[i] == 0 {
			continue
		}
		rd.Sources[src.Preset] += count[i]
		// Sources differ in seed too, in case two share a preset.
		gc := realSourceConfig(src, count[i], sc, seed+uint64(i))
		dir := realSourceDir(re.CacheDir, gc)
		t0 := time.Now()
		made, err := gen.Ensure(ctx, gc, dir)
		if err != nil {
			return nil, workload.Wrapf(err, "workload %s: generate %s", w.Name, src.Preset)
		}
		if made {
			re.Logf("real: generated %d %s samples in %d shards into %s in %.0fs", gc.Samples, gc.Preset, gc.Shards, dir, time.Since(t0).Seconds())
		}
		for k := range count[i] {
			paths[i] = append(paths[i], filepath.Join(dir, gen.ShardName(gc.Preset, k)))
		}
	}
	// The links go through gen.Install like the shards they point at: a
	// scratch name of their own, so that two evaluations in one process
	// never remove each other's half-made directory.
	_, err := gen.Install(rd.Dir, func(tmp string) error {
		next := make([]int, len(w.Sources))
		for k, s := range order {
			if err := os.Symlink(paths[s][next[s]], filepath.Join(tmp, fmt.Sprintf("shard-%06d.tar", k))); err != nil {
				return fmt.Errorf("bench: %w", err)
			}
			next[s]++
		}
		return nil
	})
	if err != nil {
		return nil, workload.Wrapf(err, "workload %s: install %s", w.Name, rd.Dir)
	}
	return rd, nil
}

// measuredCosts are a dataset's preparation costs on this machine: the
// CPU time of one decode.Decoder decode of every sample (F frames at S x
// S, one task: unsplit), the median of a few passes, by shard and
// position.
type measuredCosts struct {
	US      [][]int64 // [shard][index], µs
	MeanUS  float64
	Failed  int // samples that did not decode (the runtime drops them)
	Elapsed time.Duration
}

// measureDataset decodes every sample of ds repeat times on one locked
// thread, passes alternating over the dataset, and keeps each sample's
// median CPU time. The median, not the fastest: on a shared machine the
// fastest of a few is well below what a run meets (a decode's CPU time
// grows when other processes share the caches), and the run is what the
// simulator must match.
func measureDataset(ctx context.Context, ds *decode.Dataset, frames, size, repeat int) (*measuredCosts, error) {
	t0 := time.Now()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	dec := decoding.NewDecoder(decoding.Options{Frames: frames, Size: size})
	mc := &measuredCosts{US: make([][]int64, ds.NumShards())}
	times := make([][][]int64, ds.NumShards())
	for k, sh := range shard.ShardsOf(ds) {
		mc.US[k] = make([]int64, sh.Len())
		times[k] = make([][]int64, sh.Len())
	}
	failed := map[[2]int]bool{}
	for range max(repeat, 1) {
		for k, sh := range shard.ShardsOf(ds) {
			for i := range sh.Len() {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				if failed[[2]int{k, i}] {
					continue
				}
				smp, err := sh.ReadSample(i)
				if err != nil {
					return nil, fmt.Errorf("bench: %w", err)
				}
				rec, err := decoding.ParseRecord(smp, decoding.Limits{})
				if err != nil {
					failed[[2]int{k, i}] = true
					continue
				}
				d, err := workload.CPUOf(func() error {
					_, err := dec.Decode(ctx, smp, rec)
					return err
				})
				if err != nil {
					failed[[2]int{k, i}] = true
					continue
				}
				times[k][i] = append(times[k][i], max(d.Microseconds(), 1))
			}
		}
	}
	n := 0
	for k := range mc.US {
		for i, ts := range times[k] {
			if failed[[2]int{k, i}] || len(ts) == 0 {
				continue
			}
			mc.US[k][i] = median(ts)
			mc.MeanUS += float64(mc.US[k][i])
			n++
		}
	}
	mc.Failed = len(failed)
	if n == 0 {
		return nil, fmt.Errorf("bench: no sample of the dataset decoded")
	}
	mc.MeanUS /= float64(n)
	mc.Elapsed = time.Since(t0)
	return mc, nil
}

// median returns the median of xs (the mean of the middle two when the
// count is even); it sorts xs.
func median(xs []int64) int64 {
	slices.Sort(xs)
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}
