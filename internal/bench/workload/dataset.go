package workload

import (
	"fmt"

	"github.com/datahelix/datahelix/decode"
	"github.com/datahelix/datahelix/internal/costmodel"
	"github.com/datahelix/datahelix/internal/decoding"
	"github.com/datahelix/datahelix/internal/reader"
	"github.com/datahelix/datahelix/internal/shard"
	"github.com/datahelix/datahelix/internal/sim"
	"github.com/datahelix/datahelix/internal/video"
)

// DatasetSimConfig says how a real dataset would be run: the flags of
// datahelix run that decide which samples a rank gets and how they split.
type DatasetSimConfig struct {
	Ranks, Batch, Steps int
	Workers             int    // W: clips split into at most W tasks
	Frames, Size        int    // F and S (0: 8 and 224)
	Seed                uint64 // the run's --seed: the reader's shuffle
	ShuffleBuffer       int    // 0: the runtime's 64
	Streams             int    // 0: the runtime's min(shards, ranks x batch)
	StreamTurns         int    // 0 or 1: none (reader.NewOrder's turns)
}

// DatasetSamples is a simulator sample source made of a real dataset's
// samples in the order the runtime reads them, for comparing simulated
// and real runs of the same data (the validation section).
type DatasetSamples struct {
	Batches [][][]sim.Sample // the samples by [step][rank]
	// MeanCostUS, MeanFrames and MeanTokens are per sample over the
	// samples of the run.
	MeanCostUS, MeanFrames, MeanTokens float64
}

// NewDatasetSamples reads, for every rank, the samples the runtime's
// reader (reader.New, same seed and shuffle buffer) gives it for
// cfg.Steps steps, parses their records and prices them as Synth does:
// the calibrated cost model's prediction is the true cost, the estimate
// carries the calibration's error, clips split with video.PlanTasks into at
// most W tasks. Sample ids are the runtime's (SampleRef.ID), so a
// simulation's batches_hash equals the real run's when both trained the
// same batches. A sample whose record does not parse is an error naming
// it (the runtime would drop it).
func NewDatasetSamples(ds *decode.Dataset, cal *costmodel.Calibration, cfg DatasetSimConfig) (*DatasetSamples, error) {
	if cfg.Frames <= 0 {
		cfg.Frames = decode.DefaultFrames
	}
	if cfg.Size <= 0 {
		cfg.Size = decode.DefaultSize
	}
	if cfg.ShuffleBuffer <= 0 {
		cfg.ShuffleBuffer = reader.DefaultShuffleBuffer
	}
	if cfg.Ranks < 1 || cfg.Batch < 1 || cfg.Steps < 1 || cfg.Workers < 1 {
		return nil, fmt.Errorf("bench: dataset simulation needs ranks, batch, steps and workers >= 1, got %+v", cfg)
	}
	if cal == nil {
		cal = DefaultCalibration()
	}
	unsplit := costmodel.New(cal)
	unsplit.SetOptions(costmodel.Options{Frames: cfg.Frames, Size: cfg.Size, MaxTasks: 1})
	split := costmodel.New(cal)
	split.SetOptions(costmodel.Options{Frames: cfg.Frames, Size: cfg.Size, MaxTasks: cfg.Workers})
	sizes := make([]int, ds.NumShards())
	for i, s := range shard.ShardsOf(ds) {
		sizes[i] = s.Len()
	}
	out := &DatasetSamples{Batches: make([][][]sim.Sample, cfg.Steps)}
	for t := range out.Batches {
		out.Batches[t] = make([][]sim.Sample, cfg.Ranks)
	}
	plane := int64(cfg.Size) * int64(cfg.Size) * 3
	n := 0
	for r := range cfg.Ranks {
		rd, err := reader.New(sizes, r, cfg.Ranks, cfg.Batch, cfg.Seed, cfg.ShuffleBuffer, cfg.Streams, cfg.StreamTurns)
		if err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
		for t := range cfg.Steps {
			xs := make([]sim.Sample, cfg.Batch)
			for i := range xs {
				ref, epoch := rd.Next()
				smp, err := ds.ReadSample(ref.Shard, ref.Index)
				if err != nil {
					return nil, fmt.Errorf("bench: %w", err)
				}
				rec, err := decoding.ParseRecord(smp, decoding.Limits{})
				if err != nil {
					return nil, fmt.Errorf("bench: sample %s of %s: %w", smp.Key, smp.Shard, err)
				}
				x := sim.Sample{ID: ref.ID(epoch), Bytes: rec.Bytes, Cost: unsplit.Estimate(rec)}
				x.Est = noisy(x.Cost, cal.Sigma(unsplit.Key(rec)), hash3(cfg.Seed, 7, x.ID))
				switch v := rec.Video; {
				case v != nil:
					x.Frames, x.Mem = cfg.Frames, int64(cfg.Frames)*plane
					if cfg.Workers > 1 && !v.FrameCountEstimated {
						tasks := video.PlanTasks(v, video.SampleFrames(v, cfg.Frames), cfg.Workers)
						if len(tasks) > 1 {
							frames := make([]int32, len(tasks))
							for k, tk := range tasks {
								frames[k] = int32(tk.DecodeFrames)
							}
							sc := split.Estimate(rec)
							x.Parts, x.PartsEst = splitCost(sc, frames), splitCost(x.Est*sc/x.Cost, frames)
						}
					}
				default:
					x.Frames, x.Mem = len(rec.Images), int64(len(rec.Images))*plane
				}
				if rec.Text != nil {
					x.Tokens = rec.Text.Tokens
				}
				out.MeanCostUS += float64(x.Cost)
				out.MeanFrames += float64(x.Frames)
				out.MeanTokens += float64(x.Tokens)
				n++
				xs[i] = x
			}
			out.Batches[t][r] = xs
		}
	}
	out.MeanCostUS /= float64(n)
	out.MeanFrames /= float64(n)
	out.MeanTokens /= float64(n)
	return out, nil
}

// Samples is the simulator's sample source (sim.Config.Samples).
func (d *DatasetSamples) Samples(step int64, rank int) []sim.Sample {
	return d.Batches[step][rank]
}
