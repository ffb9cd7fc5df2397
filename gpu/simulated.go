package gpu

import (
	"context"
	"fmt"
	"time"

	"github.com/datahelix/datahelix/collective"
)

// Model is a simulated GPU's step time: Base plus a cost per sample, per
// video frame and per text token of the batch, as a training step's
// forward and backward passes grow with what the batch holds.
type Model struct {
	Base      time.Duration
	PerSample time.Duration
	PerFrame  time.Duration
	PerToken  time.Duration
}

// Contents is what a batch holds, as far as the GPU's step time goes.
type Contents struct {
	Samples int
	Frames  int // decoded video frames and images
	Tokens  int // text tokens
}

// StepTime is the compute time of one step on contents c. It is a pure
// function of c, so a simulated run's GPU is deterministic.
func (m Model) StepTime(c Contents) time.Duration {
	return m.Base + time.Duration(c.Samples)*m.PerSample +
		time.Duration(c.Frames)*m.PerFrame + time.Duration(c.Tokens)*m.PerToken
}

// Validate rejects negative times.
func (m Model) Validate() error {
	if m.Base < 0 || m.PerSample < 0 || m.PerFrame < 0 || m.PerToken < 0 {
		return fmt.Errorf("gpu: negative step time in model %+v", m)
	}
	return nil
}

// Simulated executes training steps for a rank without a GPU: it waits the
// model's compute time for the batch, then joins a collective with every
// other rank's simulated GPU, standing for the gradient allreduce, so a
// late rank holds every rank back exactly as in lockstep training.
//
// Comm must be a communicator used by nothing else at the same time (a
// duplicate of the job's), since the loader runs its own collectives
// concurrently.
type Simulated struct {
	Model Model
	Comm  collective.Comm
	// Sleep waits d; nil means a timer that honours ctx. Tests replace it.
	Sleep func(ctx context.Context, d time.Duration) error
}

// Step runs one training step on a batch with contents c and returns the
// compute time it modelled. The allreduce sums the ranks' sample counts,
// as the loss normalization of a real step would.
func (s *Simulated) Step(ctx context.Context, c Contents) (time.Duration, error) {
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
