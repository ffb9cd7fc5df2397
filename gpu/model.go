package gpu

import (
	"fmt"
	"time"
)

// Model is a GPU's step time: Base plus a cost per sample, per
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
