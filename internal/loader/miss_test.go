package loader

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/datahelix/datahelix/collective"
	"github.com/datahelix/datahelix/decode"
	"github.com/datahelix/datahelix/internal/gen/gentest"
	"github.com/datahelix/datahelix/internal/metrics"
)

// TestMissedIsLateness checks the deadline-miss rule: a batch is late when
// it became ready more than the tolerance after the GPU's request (the
// larger of 1 ms and 2 % of the GPU step), whatever the GPU then waited
// for its hand-off.
func TestMissedIsLateness(t *testing.T) {
	for _, tt := range []struct {
		request, ready, gpu int64
		want                bool
	}{
		{10_000, 2_000, 0, false},                        // ready long before
		{10_000, 10_000, 0, false},                       // ready at the request
		{10_000, 10_000 + metrics.ToleranceUS, 0, false}, // within the tolerance
		{10_000, 10_000 + metrics.ToleranceUS + 1, 0, true},
		{10_000, 10_000 + metrics.ToleranceUS + 1, 50_000, true}, // 2 % of 50 ms is 1 ms
		{10_000, 10_000 + 20_000, 1_000_000, false},              // 2 % of a 1 s step
		{10_000, 10_000 + 20_001, 1_000_000, true},
		{10_000, 900_000, 100, true},
	} {
		if got := metrics.Missed(tt.request, tt.ready, tt.gpu); got != tt.want {
			t.Errorf("missed(request %d, ready %d, GPU step %d) = %v, want %v", tt.request, tt.ready, tt.gpu, got, tt.want)
		}
	}
}

// slowDone is a context whose Done takes delay: Next calls it after
// stamping the request, so it stands for a training loop's thread that
// lost its core between asking for a batch and taking it.
type slowDone struct {
	context.Context
	delay time.Duration
}

func (c slowDone) Done() <-chan struct{} {
	time.Sleep(c.delay)
	return c.Context.Done()
}

// TestReadyBatchHandedOffLateIsNoMiss checks a batch that was decoded
// before the GPU asked for it but reached the GPU 20 ms after the request:
// its record counts the 20 ms as GPU wait, and no deadline miss (DESIGN.md:
// a miss is a batch not ready when the GPU asked for it). It counted as a
// miss when the rule read the wait.
func TestReadyBatchHandedOffLateIsNoMiss(t *testing.T) {
	data := gentest.Tiny(t)
	cfg := testConfig(KindLocal)
	cfg.Steps = 2
	const delay = 20 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var rec metrics.StepRecord
	errs := collective.RunLocal(ctx, 1, func(ctx context.Context, c collective.Comm) error {
		ds, err := decode.OpenDataset(data, t.TempDir())
		if err != nil {
			return err
		}
		defer ds.Close()
		l, err := NewLoader(ctx, c, ds, cfg)
		if err != nil {
			return err
		}
		defer l.Close()
		for ready := false; !ready; {
			if err := ctx.Err(); err != nil {
				return errors.New("batch 0 never became ready")
			}
			time.Sleep(time.Millisecond)
			l.mu.Lock()
			b := l.batches[0]
			ready = b != nil && b.ready
			l.mu.Unlock()
		}
		if _, err := l.Next(slowDone{ctx, delay}); err != nil {
			return err
		}
		for {
			if _, err := l.Next(ctx); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return err
			}
		}
		rec = l.records[0]
		return nil
	})
	requireOK(t, errs)
	if rec.ReadyUS > rec.RequestUS || rec.WaitUS < delay.Microseconds() {
		t.Fatalf("step 0: ready %d µs, request %d µs, wait %d µs: want a batch ready before the request and a wait of at least %d µs",
			rec.ReadyUS, rec.RequestUS, rec.WaitUS, delay.Microseconds())
	}
	if rec.Miss {
		t.Errorf("step 0: ready %d µs before the request, handed off %d µs after it: counted as a deadline miss",
			rec.RequestUS-rec.ReadyUS, rec.WaitUS)
	}
}
