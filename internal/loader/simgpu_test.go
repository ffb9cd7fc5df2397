package loader

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/datahelix/datahelix/collective"
	"github.com/datahelix/datahelix/gpu"
)

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

// TestSimulatedLockstep checks that the allreduce holds every rank until
// the slowest one's step ends.
func TestSimulatedLockstep(t *testing.T) {
	const n = 3
	comms := collective.NewLocal(n)
	var mu sync.Mutex
	virtual := make([]time.Duration, n) // per-rank simulated time spent sleeping
	ends := make([]time.Time, n)
	var wg sync.WaitGroup
	start := time.Now()
	for r := 0; r < n; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := &simulatedGPU{
				Model: gpu.Model{Base: ms(20), PerSample: ms(30)},
				Comm:  comms[r],
				Sleep: func(ctx context.Context, d time.Duration) error {
					mu.Lock()
					virtual[r] += d
					mu.Unlock()
					return sleepCtx(ctx, d)
				},
			}
			// Rank 2 has 4 samples, the others 1: its step is 140ms,
			// theirs 50ms.
			samples := 1
			if r == 2 {
				samples = 4
			}
			if _, err := s.Step(context.Background(), gpu.Contents{Samples: samples}); err != nil {
				t.Error(err)
			}
			ends[r] = time.Now()
		}()
	}
	wg.Wait()
	if virtual[0] != ms(50) || virtual[2] != ms(140) {
		t.Errorf("modelled compute = %v, want 50ms for rank 0 and 140ms for rank 2", virtual)
	}
	for r, e := range ends {
		if e.Sub(start) < ms(140) {
			t.Errorf("rank %d left the allreduce after %v, before the slowest rank's 140ms step", r, e.Sub(start))
		}
	}
}

// TestStepReturnsTheCancelCause: a step stopped by its context says why
// (the cause given to the cancel), before and during its compute.
func TestStepReturnsTheCancelCause(t *testing.T) {
	why := errors.New("interrupted by SIGTERM")
	for _, base := range []time.Duration{0, time.Hour} {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(why)
		s := &simulatedGPU{Model: gpu.Model{Base: base}, Comm: collective.NewLocal(1)[0]}
		if _, err := s.Step(ctx, gpu.Contents{Samples: 1}); !errors.Is(err, why) {
			t.Errorf("base %v: got %v, want the cause %v", base, err, why)
		}
	}
}
