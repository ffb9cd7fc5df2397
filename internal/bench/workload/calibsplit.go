package workload

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"runtime"
	"strconv"

	"github.com/datahelix/datahelix/decode"
	"github.com/datahelix/datahelix/internal/costmodel"
	"github.com/datahelix/datahelix/internal/decoding"
	"github.com/datahelix/datahelix/internal/inspect"
	"github.com/datahelix/datahelix/internal/video"
)

// calibrateSplitTasks is how many keyframe-aligned tasks calibration
// splits clips into: the workloads' W, as the runtime's MaxTasks default.
const calibrateSplitTasks = 8

// splitObservation is the measured CPU time of a clip decoded as the
// splitting loaders decode it: task by task.
type splitObservation struct {
	rec     *decoding.Record
	whole   int64 // µs, the clip decoded whole, measured next to micros
	micros  int64 // µs, all its tasks together
	heldOut bool
}

// measureSplit decodes every clip of obs that video.PlanTasks splits into
// more than one task (at most calibrateSplitTasks) task by task with
// DecodeVideoTask on this locked thread, keeping the fastest of repeat
// sums of the tasks' thread CPU times, and, alternating with it, whole
// (the fastest of repeat). Without these, the cost model
// only ever sees one task per clip and cannot tell the cost of a task
// from the fixed cost of a clip.
func measureSplit(ctx context.Context, ds *decode.Dataset, dec *decoding.Decoder, obs []inspect.CostObservation, repeat int) ([]splitObservation, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	size := dec.Options().Size
	var out []splitObservation
	for _, o := range obs {
		v := o.Record.Video
		if v == nil || v.FrameCountEstimated {
			continue
		}
		tasks := video.PlanTasks(v, video.SampleFrames(v, dec.Options().Frames), calibrateSplitTasks)
		if len(tasks) < 2 {
			continue
		}
		i, err := strconv.Atoi(filepath.Base(o.Record.Key))
		if err != nil || ds.NumShards() != 1 {
			return nil, fmt.Errorf("bench calibrate: sample %q: want one shard of indexed samples", o.Record.Key)
		}
		smp, err := ds.ReadSample(0, i)
		if err != nil {
			return nil, err
		}
		data := smp.Members[v.Member].Data
		dst := make([]byte, dec.Options().Frames*size*size*3)
		// Whole and split decodes alternate, so that both see the same
		// machine: their ratio is what matters.
		whole, split := int64(math.MaxInt64), int64(math.MaxInt64)
		for range repeat {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			t0 := ThreadCPU()
			if _, err := dec.Decode(ctx, smp, o.Record); err != nil {
				return nil, fmt.Errorf("bench calibrate: sample %s: %w", o.Record.Key, err)
			}
			t1 := ThreadCPU()
			for _, t := range tasks {
				if _, err := dec.DecodeVideoTask(ctx, data, v, t, dst); err != nil {
					return nil, fmt.Errorf("bench calibrate: sample %s task at keyframe %d: %w", o.Record.Key, t.Keyframe, err)
				}
			}
			t2 := ThreadCPU()
			whole, split = min(whole, (t1-t0)/1000), min(split, (t2-t1)/1000)
		}
		out = append(out, splitObservation{rec: o.Record, whole: max(whole, 1), micros: max(split, 1), heldOut: o.HeldOut})
	}
	return out, nil
}

// learnSplit feeds the warm-up split observations to m (with split
// features) and returns the held-out relative errors by model key, of
// predictions made before m saw them.
func learnSplit(m *costmodel.Model, whole costmodel.Options, obs []splitObservation) map[string][]float64 {
	split := whole
	split.MaxTasks = calibrateSplitTasks
	m.SetOptions(split)
	defer m.SetOptions(whole)
	errs := map[string][]float64{}
	for _, o := range obs {
		if o.heldOut {
			p := m.Predict(o.rec)
			k := m.Key(o.rec)
			errs[k] = append(errs[k], math.Abs(float64(p-o.micros))/float64(o.micros))
			continue
		}
		m.Observe(o.rec, o.micros)
	}
	return errs
}

// learnHeldOutSplit feeds the held-out split observations to m at the end.
func learnHeldOutSplit(m *costmodel.Model, whole costmodel.Options, obs []splitObservation) {
	split := whole
	split.MaxTasks = calibrateSplitTasks
	m.SetOptions(split)
	defer m.SetOptions(whole)
	for _, o := range obs {
		if o.heldOut {
			m.Observe(o.rec, o.micros)
		}
	}
}
