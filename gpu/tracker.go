package gpu

import (
	"slices"
	"sync"
	"time"
)

// stepWindow is the number of recent steps the step-time estimate looks at.
const stepWindow = 15

// Tracker follows the GPU's progress from two events per step: the
// training loop asks for batch t (Requested) and receives it (Delivered).
// The time from receiving batch t to asking for batch t+1 is the GPU's
// compute time for step t (forward, backward and the gradient allreduce);
// the time from asking to receiving is input wait.
//
// A Tracker is safe for concurrent use: the training loop reports events
// while the loader's control loop asks for deadlines.
type Tracker struct {
	mu        sync.Mutex
	prior     time.Duration // step time assumed before any measurement
	recent    window        // the host's step times: delivery to next request
	lastStep  int64
	lastGiven time.Time // when batch lastStep was delivered
	started   bool
	measured  window // the GPU's own step times (Measured), when reported
}

// window is a ring of the last StepWindow durations.
type window struct {
	d    []time.Duration
	next int
}

func (w *window) add(d time.Duration) {
	if len(w.d) < stepWindow {
		w.d = append(w.d, d)
		return
	}
	w.d[w.next] = d
	w.next = (w.next + 1) % stepWindow
}

func (w *window) median() time.Duration {
	s := slices.Clone(w.d)
	slices.Sort(s)
	return s[len(s)/2]
}

// Measured records the GPU's own time for a step (CUDA events around
// it). Once the trainer reports them, they take the place of the times
// between requests, which the host loop of an asynchronous CUDA program
// makes too short.
func (t *Tracker) Measured(d time.Duration) {
	if d <= 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.measured.add(d)
}

// NewTracker returns a tracker that assumes prior per step until it has
// measured one.
func NewTracker(prior time.Duration) *Tracker {
	if prior <= 0 {
		prior = 100 * time.Millisecond
	}
	return &Tracker{prior: prior, lastStep: -1}
}

// Requested records that the training loop asked for batch step at time at.
func (t *Tracker) Requested(step int64, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.started && step == t.lastStep+1 {
		d := at.Sub(t.lastGiven)
		t.recent.add(max(d, 0))
	}
}

// Delivered records that batch step reached the GPU at time at.
func (t *Tracker) Delivered(step int64, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lastStep, t.lastGiven, t.started = step, at, true
}

// StepTime is the current estimate of one step's compute time.
func (t *Tracker) StepTime() time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.stepTime()
}

func (t *Tracker) stepTime() time.Duration {
	if len(t.measured.d) > 0 {
		return t.measured.median()
	}
	if len(t.recent.d) == 0 {
		return t.prior
	}
	return t.recent.median()
}

// NeedAt predicts when the GPU will ask for batch step, assuming no
// further input wait: the last delivery plus one step time per step in
// between. Before the first delivery, start stands for the moment batch 0
// is first asked for.
func (t *Tracker) NeedAt(step int64, start time.Time) time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.stepTime()
	if !t.started {
		return start.Add(time.Duration(step) * st)
	}
	return t.lastGiven.Add(time.Duration(step-t.lastStep) * st)
}
