package loader

import (
	"context"
	"fmt"
	"time"

	"github.com/datahelix/datahelix/collective"
	"github.com/datahelix/datahelix/gpu"
)

// simulatedGPU executes training steps for a rank without a GPU: it waits the
// model's compute time for the batch, then joins a collective with every
// other rank's simulated GPU, standing for the gradient allreduce, so a
// late rank holds every rank back exactly as in lockstep training.
//
// Comm must be a communicator used by nothing else at the same time (a
// duplicate of the job's), since the loader runs its own collectives
// concurrently.
type simulatedGPU struct {
	Model gpu.Model
	Comm  collective.Comm
	// Sleep waits d; nil means a timer that honours ctx. Tests replace it.
	Sleep func(ctx context.Context, d time.Duration) error
}

// Step runs one training step on a batch with contents c and returns the
// compute time it modelled. The allreduce sums the ranks' sample counts,
// as the loss normalization of a real step would.
func (s *simulatedGPU) Step(ctx context.Context, c gpu.Contents) (time.Duration, error) {
	d := s.Model.StepTime(c)
	sleep := s.Sleep
	if sleep == nil {
		sleep = sleepCtx
	}
	if err := sleep(ctx, d); err != nil {
		return d, err
	}
	buf := []int64{int64(c.Samples)}
	if err := s.Comm.AllreduceInt64(buf, collective.OpSum); err != nil {
		return d, fmt.Errorf("gpu: gradient allreduce: %w", err)
	}
	return d, nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return context.Cause(ctx)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
