package loader

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/datahelix/datahelix/internal/agree"
	"io"
	"time"

	"github.com/datahelix/datahelix/gpu"
	"github.com/datahelix/datahelix/internal/metrics"
)

// ErrDelivered is Peek's error for a step Next delivered already.
var ErrDelivered = errors.New("spmd: batch delivered already")

// Peek waits until the batch of step is decoded and returns it without
// delivering it: the loader's clocks and records are Next's. A server
// that hands batches to another process copies them out ahead of the
// request with it. It returns ErrDelivered once Next took step, io.EOF
// for a step past the last, and the loader's error if it failed.
func (l *Loader) Peek(ctx context.Context, step int64) (*Batch, error) {
	if step >= int64(l.cfg.Steps) {
		return nil, io.EOF
	}
	stop := context.AfterFunc(ctx, func() { l.mu.Lock(); l.cond.Broadcast(); l.mu.Unlock() })
	defer stop()
	l.mu.Lock()
	defer l.mu.Unlock()
	for {
		switch {
		case l.fatal != nil:
			return nil, l.fatal
		case context.Cause(ctx) != nil:
			return nil, context.Cause(ctx)
		case l.closed:
			return nil, io.EOF
		case step < l.next:
			return nil, ErrDelivered
		}
		if b := l.batches[step]; b != nil && b.ready {
			return batchOf(b), nil
		}
		l.cond.Wait()
	}
}

// ReportGPUStep records the GPU's own time for the step last delivered,
// as the trainer measured it (CUDA events): the progress tracker then
// predicts deadlines from it rather than from the host's requests, and
// the step's record holds it as gpu_us.
func (l *Loader) ReportGPUStep(d time.Duration) {
	if d <= 0 {
		return
	}
	l.tracker.Measured(d)
	l.mu.Lock()
	l.reportedGPU = d
	l.mu.Unlock()
}

// observeStep feeds the learned GPU model the step before the one being
// delivered, now that its compute time is known: the GPU's own time when
// the trainer reported one, else the time from its delivery to the next
// request. prev is that step's record.
func (l *Loader) observeStep(prev *metrics.StepRecord) {
	l.mu.Lock()
	d := l.reportedGPU
	l.reportedGPU = 0
	c := l.lastContents
	l.mu.Unlock()
	if d > 0 {
		prev.GPUUS = d.Microseconds()
	} else {
		d = time.Duration(prev.ComputeUS) * time.Microsecond
	}
	if l.learner != nil {
		l.learner.Observe(c, d)
	}
}

// gpuModel is the GPU model that prices new samples: the learned one
// when the loader learns it (Config.LearnGPU), else Config.GPU.
func (l *Loader) gpuModel() gpu.Model {
	if l.learner != nil {
		return l.learner.Model()
	}
	return l.cfg.GPU
}

// gpuModelError is the learned GPU model's mean absolute percentage
// error in predicting each step (0..1); ok is false when the loader does
// not learn one or has not scored it yet.
func (l *Loader) gpuModelError() (mape float64, ok bool) {
	if l.learner == nil {
		return 0, false
	}
	return l.learner.MAPE()
}

// State is a loader's position in its sample stream with the identity
// of the stream. Every rank's is the same at the same step, so any
// rank's (a trainer's state_dict) resumes the whole job.
type State struct {
	Format int    `json:"format"`
	Seed   uint64 `json:"seed"`
	// GlobalBatch is ranks x batch: a state resumes at any world size
	// with the same global batch (WorldSize and Batch are the saving
	// run's, for the record).
	GlobalBatch   int `json:"global_batch"`
	Streams       int `json:"streams"`
	StreamTurns   int `json:"stream_turns,omitempty"` // absent: 1
	ShuffleBuffer int `json:"shuffle_buffer"`
	Batch         int `json:"batch"`
	WorldSize     int `json:"world_size"`
	// Loader is the loader that saved it, for the record: every loader
	// trains the same sequence of global batches, so any may resume it.
	Loader  string `json:"loader"`
	Dataset string `json:"dataset"` // agree.DatasetHash, hex
	Shards  int    `json:"shards"`
	// ShardList is each shard's file name and sample count
	// (agree.ShardList), so that a resume on a changed dataset names the
	// shard that changed.
	ShardList []string `json:"shard_list,omitempty"`
	// Step is the first step the resumed run delivers.
	Step int64 `json:"step"`
}

// stateFormat is State.Format of this binary.
const stateFormat = 2

// State returns the loader's state before its next step, as JSON: what
// Config.Restore takes to continue with the same batches.
func (l *Loader) State() []byte {
	l.mu.Lock()
	step := l.next
	l.mu.Unlock()
	b, _ := json.Marshal(l.stateAt(step))
	return b
}

func (l *Loader) stateAt(step int64) State {
	return State{Format: stateFormat, Seed: l.cfg.Seed, GlobalBatch: l.cfg.Batch * l.comm.Size(), Streams: l.reader.Order().Streams(), StreamTurns: l.reader.Order().Turns(),
		ShuffleBuffer: l.cfg.ShuffleBuffer, Batch: l.cfg.Batch, WorldSize: l.comm.Size(),
		Loader: l.cfg.Loader.String(), Dataset: fmt.Sprintf("%016x", l.dataset), Shards: l.ds.NumShards(), Step: step,
		ShardList: agree.ShardList(l.ds)}
}

// ErrState matches a Config.Restore that this run cannot continue: it
// does not parse, or was saved for another dataset, seed, global batch,
// stream count or shuffle buffer (the error names which).
var ErrState = errors.New("spmd: cannot resume from this state")

// restoreState moves the fresh reader to the state's step, replaying
// the global batches the run before drew (the order depends only on the
// dataset, the seed, the global batch and the streams, not on the world
// size), and returns that step.
func (l *Loader) restoreState(data []byte) (int64, error) {
	var st State
	if err := json.Unmarshal(data, &st); err != nil {
		return 0, fmt.Errorf("%w: %v", ErrState, err)
	}
	if why := st.mismatch(l.stateAt(st.Step)); why != "" {
		return 0, fmt.Errorf("%w: it was saved with %s", ErrState, why)
	}
	if st.Step >= int64(l.cfg.Steps) {
		return 0, fmt.Errorf("%w: it is at step %d, and this run ends before it (--steps %d)", ErrState, st.Step, l.cfg.Steps)
	}
	l.reader.Skip(st.Step)
	return st.Step, nil
}

// mismatch names the first field of s that differs from this run's
// identity id (Step and Loader aside), e.g. "seed 3, this run's 1"; ""
// when none does.
func (s State) mismatch(id State) string {
	switch {
	case s.Format != id.Format:
		return fmt.Sprintf("format %d, this datahelix reads %d", s.Format, id.Format)
	case s.Dataset != id.Dataset || s.Shards != id.Shards:
		if d := agree.FirstDifference(s.ShardList, id.ShardList); s.ShardList != nil && d != "" {
			return fmt.Sprintf("another dataset (%s)", d)
		}
		return fmt.Sprintf("dataset %s (%d shards), this run reads %s (%d shards)", s.Dataset, s.Shards, id.Dataset, id.Shards)
	case s.Seed != id.Seed:
		return fmt.Sprintf("seed %d, this run's %d", s.Seed, id.Seed)
	case s.GlobalBatch != id.GlobalBatch:
		return fmt.Sprintf("a global batch of %d (%d ranks x %d), this run's is %d (%d x %d): keep ranks x --batch to resume at another world size",
			s.GlobalBatch, s.WorldSize, s.Batch, id.GlobalBatch, id.WorldSize, id.Batch)
	case s.Streams != id.Streams:
		return fmt.Sprintf("%d streams, this run's %d (--streams)", s.Streams, id.Streams)
	case max(s.StreamTurns, 1) != max(id.StreamTurns, 1):
		return fmt.Sprintf("streams taking turns %d at a time, this run's %d (--stream-turns)", max(s.StreamTurns, 1), max(id.StreamTurns, 1))
	case s.ShuffleBuffer != id.ShuffleBuffer:
		return fmt.Sprintf("a shuffle buffer of %d, this run's %d (--shuffle-buffer)", s.ShuffleBuffer, id.ShuffleBuffer)
	case s.Step < 0:
		return fmt.Sprintf("step %d", s.Step)
	}
	return ""
}
