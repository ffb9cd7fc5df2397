package inspect

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"sort"
	"time"

	"github.com/datahelix/datahelix/decode"
	"github.com/datahelix/datahelix/internal/costmodel"
	"github.com/datahelix/datahelix/internal/decoding"
	"github.com/datahelix/datahelix/internal/shard"
	"golang.org/x/sys/unix"
)

// CostEvalOptions configure EvaluateCostModel.
type CostEvalOptions struct {
	// Warmup is how many samples the model learns from before the
	// held-out evaluation starts (default 200).
	Warmup int
	// Limit caps the samples decoded, warm-up included (0: all).
	Limit int
	// WallClock measures wall time instead of the decoding thread's CPU
	// time (CPU time is the default: it is what the reference-CPU
	// estimates mean, and waiting for a core does not inflate it).
	WallClock bool
	// Repeat decodes each sample this many times and keeps the fastest
	// (default 3): on a shared or virtualised machine one decode of the
	// same sample varies by tens of percent (cache and SMT contention,
	// descheduled vCPUs count as CPU time), which the minimum filters
	// out.
	Repeat int
}

// CostEvalRow is the held-out error of one model key (or "all").
type CostEvalRow struct {
	Key           string
	Count         int
	MAPE          float64 // frozen model after the warm-up; fraction, 0.1 = 10 %
	OnlineMAPE    float64 // model still learning, each prediction made before its sample is learned
	MeanMeasured  float64 // µs
	MeanPredicted float64 // µs, frozen model
}

// CostEvalReport is what EvaluateCostModel measured.
type CostEvalReport struct {
	Warmup  int           // samples learned from
	HeldOut int           // samples evaluated
	Failed  []string      // samples that did not decode, with their errors
	Rows    []CostEvalRow // per model key, sorted, then "all"
	// Observations are every measured sample, in the order decoded, for
	// refitting or calibration afterwards.
	Observations []CostObservation
}

// CostObservation is one measured sample.
type CostObservation struct {
	Record  *decoding.Record
	Micros  int64
	HeldOut bool
	// Predicted is the prediction of the model frozen after the warm-up
	// (during the warm-up: of the model before it saw the sample).
	Predicted int64
	// PredictedOnline is the prediction of the model that keeps learning
	// from every sample after predicting it, as a running loader's does.
	PredictedOnline int64
}

// EvaluateCostModel decodes the samples of ds one at a time with dec,
// measures each, lets m learn from the first Warmup samples (Observe) and
// then records the error of predictions on every later sample: those of
// a copy of m frozen after the warm-up, which never learns from them
// (held-out samples in the strict sense), and those of m itself, which
// learns from each sample after predicting it, as a running loader's
// model does (prequential: every prediction is still made on a sample
// the model has not seen). Samples are
// taken round-robin over the shards (sample 0 of every shard, then sample
// 1, ...) so that the warm-up sees every shard. One untimed decode comes
// first, so one-time library initialisation is not measured. progress, if
// not nil, is called after each sample.
func EvaluateCostModel(ctx context.Context, ds *decode.Dataset, dec *decoding.Decoder, m *costmodel.Model, o CostEvalOptions, progress func(done, total int)) (*CostEvalReport, error) {
	if o.Warmup <= 0 {
		o.Warmup = 200
	}
	if o.Repeat <= 0 {
		o.Repeat = 3
	}
	order := roundRobin(ds)
	if o.Limit > 0 && len(order) > o.Limit {
		order = order[:o.Limit]
	}
	if len(order) == 0 {
		return nil, fmt.Errorf("%w: the dataset has no samples", decode.ErrNoShards)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	rep := &CostEvalReport{}
	warmed := false
	var frozen *costmodel.Model
	for n, at := range order {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		smp, err := shard.ShardsOf(ds)[at[0]].ReadSample(at[1])
		var rec *decoding.Record
		if err == nil {
			rec, err = decoding.ParseRecord(smp, decoding.Limits{})
		}
		if err == nil && !warmed {
			_, err = dec.Decode(ctx, smp, rec)
			warmed = true
		}
		us := int64(math.MaxInt64)
		for k := 0; k < o.Repeat && err == nil; k++ {
			var t int64
			t, err = measure(o.WallClock, func() error { _, err := dec.Decode(ctx, smp, rec); return err })
			us = min(us, t)
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			rep.Failed = append(rep.Failed, err.Error())
			continue
		}
		obs := CostObservation{Record: rec, Micros: us, PredictedOnline: m.Predict(rec), HeldOut: rep.Warmup >= o.Warmup}
		obs.Predicted = obs.PredictedOnline
		if obs.HeldOut {
			if frozen == nil {
				if frozen, err = clone(m); err != nil {
					return nil, err
				}
			}
			obs.Predicted = frozen.Predict(rec)
			rep.HeldOut++
		} else {
			rep.Warmup++
		}
		m.Observe(rec, us)
		rep.Observations = append(rep.Observations, obs)
		if progress != nil {
			progress(n+1, len(order))
		}
	}
	rep.Rows = heldOutRows(m, rep.Observations)
	return rep, nil
}

// roundRobin lists (shard, index) pairs taking one sample of each shard in
// turn.
func roundRobin(ds *decode.Dataset) [][2]int {
	var out [][2]int
	for i := 0; ; i++ {
		added := false
		for s, sh := range shard.ShardsOf(ds) {
			if i < sh.Len() {
				out = append(out, [2]int{s, i})
				added = true
			}
		}
		if !added {
			return out
		}
	}
}

// measure runs f and returns its duration in µs: CPU time of the calling
// (locked) thread, or wall time.
func measure(wall bool, f func() error) (int64, error) {
	if wall {
		t0 := time.Now()
		err := f()
		return max(time.Since(t0).Microseconds(), 1), err
	}
	var a, b unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &a); err != nil {
		return 0, fmt.Errorf("decode: thread CPU clock: %w", err)
	}
	err := f()
	if cerr := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &b); cerr != nil && err == nil {
		err = fmt.Errorf("decode: thread CPU clock: %w", cerr)
	}
	return max((b.Nano()-a.Nano())/1000, 1), err
}

// heldOutRows computes the error of the held-out predictions per model key
// and overall.
func heldOutRows(m *costmodel.Model, obs []CostObservation) []CostEvalRow {
	rows := map[string]*CostEvalRow{}
	all := &CostEvalRow{Key: "all"}
	for _, o := range obs {
		if !o.HeldOut {
			continue
		}
		key := m.Key(o.Record)
		r := rows[key]
		if r == nil {
			r = &CostEvalRow{Key: key}
			rows[key] = r
		}
		for _, r := range []*CostEvalRow{r, all} {
			r.Count++
			r.MAPE += math.Abs(float64(o.Predicted-o.Micros)) / float64(o.Micros)
			r.OnlineMAPE += math.Abs(float64(o.PredictedOnline-o.Micros)) / float64(o.Micros)
			r.MeanMeasured += float64(o.Micros)
			r.MeanPredicted += float64(o.Predicted)
		}
	}
	out := make([]CostEvalRow, 0, len(rows)+1)
	for _, r := range rows {
		out = append(out, *r)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Key < out[b].Key })
	out = append(out, *all)
	for i := range out {
		if n := float64(out[i].Count); n > 0 {
			out[i].MAPE /= n
			out[i].OnlineMAPE /= n
			out[i].MeanMeasured /= n
			out[i].MeanPredicted /= n
		}
	}
	return out
}

// clone returns an independent copy of m, through its saved state.
func clone(m *costmodel.Model) (*costmodel.Model, error) {
	data, err := m.MarshalJSON()
	if err != nil {
		return nil, err
	}
	c := costmodel.New(nil)
	if err := c.UnmarshalJSON(data); err != nil {
		return nil, err
	}
	return c, nil
}
