package gpu

import (
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

// feed simulates steps: batch s delivered after waits[s], then computed
// for steps[s].
func feed(tr *Tracker, steps, waits []time.Duration) time.Time {
	now := t0
	for s := range steps {
		tr.Requested(int64(s), now)
		now = now.Add(waits[s])
		tr.Delivered(int64(s), now)
		now = now.Add(steps[s])
	}
	return now
}

func TestTrackerMedianIgnoresOutliersAndWaits(t *testing.T) {
	tr := NewTracker(ms(500))
	if got := tr.StepTime(); got != ms(500) {
		t.Fatalf("before any step: got %v, want the prior 500ms", got)
	}
	steps := []time.Duration{ms(100), ms(100), ms(2000), ms(100), ms(101), ms(99), ms(100)}
	waits := []time.Duration{ms(0), ms(300), ms(0), ms(700), ms(0), ms(0), ms(0)}
	now := feed(tr, steps, waits)
	tr.Requested(int64(len(steps)), now) // closes the last step
	if got := tr.StepTime(); got != ms(100) {
		t.Errorf("step time = %v, want 100ms (one 2 s outlier, waits not counted)", got)
	}
}

func TestTrackerFollowsLastingChange(t *testing.T) {
	tr := NewTracker(ms(10))
	steps := make([]time.Duration, 40)
	for i := range steps {
		steps[i] = ms(50)
		if i >= 20 {
			steps[i] = ms(80)
		}
	}
	now := feed(tr, steps, make([]time.Duration, 40))
	tr.Requested(40, now)
	if got := tr.StepTime(); got != ms(80) {
		t.Errorf("after 20 steps at 80ms: got %v, want 80ms", got)
	}
}

func TestTrackerNeedAt(t *testing.T) {
	tr := NewTracker(ms(100))
	if got := tr.NeedAt(3, t0); !got.Equal(t0.Add(ms(300))) {
		t.Errorf("before start: NeedAt(3) = %v, want start+300ms", got.Sub(t0))
	}
	now := feed(tr, []time.Duration{ms(40), ms(40), ms(40)}, []time.Duration{0, ms(5), 0})
	tr.Requested(3, now)
	tr.Delivered(3, now)
	// Last delivery of step 3 at now; 40 ms per step.
	if got, want := tr.NeedAt(7, t0), now.Add(ms(160)); !got.Equal(want) {
		t.Errorf("NeedAt(7) = %v after t0, want %v", got.Sub(t0), want.Sub(t0))
	}
	if tr.lastDelivered() != 3 {
		t.Errorf("lastDelivered = %d, want 3", tr.lastDelivered())
	}
}

func TestModelStepTime(t *testing.T) {
	m := Model{Base: ms(10), PerSample: ms(1), PerFrame: time.Millisecond / 2, PerToken: time.Microsecond}
	tests := []struct {
		c    Contents
		want time.Duration
	}{
		{Contents{}, ms(10)},
		{Contents{Samples: 4, Frames: 32}, ms(10 + 4 + 16)},
		{Contents{Samples: 2, Tokens: 3000}, ms(10+2) + 3*time.Millisecond},
	}
	for _, tt := range tests {
		if got := m.StepTime(tt.c); got != tt.want {
			t.Errorf("StepTime(%+v) = %v, want %v", tt.c, got, tt.want)
		}
	}
	if (Model{PerFrame: -1}).Validate() == nil {
		t.Error("negative per-frame time accepted")
	}
}

// TestTrackerPrefersTheGPUsOwnTimes: an asynchronous host loop asks for
// the next batch 1 ms after getting one, while the GPU takes 80 ms: the
// measured times decide.
func TestTrackerPrefersTheGPUsOwnTimes(t *testing.T) {
	tr := NewTracker(ms(10))
	now := feed(tr, []time.Duration{ms(1), ms(1), ms(1)}, make([]time.Duration, 3))
	tr.Requested(3, now)
	if got := tr.StepTime(); got != ms(1) {
		t.Fatalf("host times: %v, want 1ms", got)
	}
	for range 3 {
		tr.Measured(ms(80))
	}
	if got := tr.StepTime(); got != ms(80) {
		t.Errorf("with the GPU's times: %v, want 80ms", got)
	}
}

// lastDelivered returns the last step delivered, -1 before the first.
func (t *Tracker) lastDelivered() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.lastStep
}
