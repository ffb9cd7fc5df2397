package loader

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	"golang.org/x/sys/unix"

	"github.com/datahelix/datahelix/decode"
	"github.com/datahelix/datahelix/internal/decoding"
	"github.com/datahelix/datahelix/internal/step"
	"github.com/datahelix/datahelix/internal/video"
	"github.com/datahelix/datahelix/plan"
)

// enqueue hands a prepared batch to the decode pool.
func (l *Loader) enqueue(bs *batchState) {
	split := l.cfg.Loader.stepKind().Splits()
	above := step.SplitAbove(l.tracker.StepTime().Microseconds())
	items := make([]step.Item, len(bs.slots))
	for i, st := range bs.slots {
		if !split || len(st.tasks) < 2 || st.item.Est <= above {
			st.tasks = nil
			st.item.Parts = nil
		}
		st.partsLeft = max(len(st.tasks), 1)
		st.bytes = st.item.Bytes
		items[i] = st.item
	}
	tasks := step.BuildTasks(bs.step, items, step.SamplerOrder(len(items)), split, above)
	bs.tasksLeft = len(tasks)
	l.mu.Lock()
	l.batches[bs.step] = bs
	l.sched.Add(bs.step, tasks)
	l.cond.Broadcast()
	l.mu.Unlock()
}

// worker is one decode worker: it takes the task its scheduler gives it,
// decodes, and reports back, until the loader closes.
func (l *Loader) worker(ctx context.Context, w int) {
	defer l.wg.Done()
	// One OS thread per worker, so that the thread's CPU clock measures
	// this worker's decodes.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	l.mu.Lock()
	defer l.mu.Unlock()
	for {
		var t step.Task
		for {
			if l.closed || l.fatal != nil {
				return
			}
			var ok bool
			if t, ok = l.sched.Next(w); ok {
				break
			}
			l.cond.Wait()
		}
		bs := l.batches[t.Step]
		st := bs.slots[t.Slot]
		l.mu.Unlock()
		t0, c0 := time.Now(), threadCPU()
		damaged, err := l.runTask(ctx, st, t)
		took, cpu := time.Since(t0).Microseconds(), (threadCPU()-c0)/1000
		l.mu.Lock()
		l.sched.Finish(w, t)
		if err != nil && ctx.Err() != nil {
			// Closing, whatever the cancel's cause reads: the task did not
			// fail, it was stopped, and its sample is not counted as dropped.
			return
		}
		st.decodeUS += cpu
		st.damaged += damaged
		l.decodeCPU += cpu
		if err == nil && cpu > 0 {
			// Wall time over CPU time of this rank's decodes: how much
			// slower than its CPU cost a decode runs here (other ranks or
			// processes sharing the cores), smoothed.
			obs := took * plan.One / cpu
			l.wallPerCPU = clamp((7*l.wallPerCPU+obs)/8, plan.One, 64*plan.One)
		}
		if err != nil && st.err == nil {
			st.err = err
		}
		st.partsLeft--
		if st.partsLeft == 0 {
			l.sampleDone(t.Step, st)
		}
		bs.tasksLeft--
		if bs.tasksLeft == 0 {
			bs.ready, bs.readyAt = true, time.Now()
		}
		l.cond.Broadcast()
	}
}

// runTask decodes one task of a sample and returns the damage the
// decoder concealed in it (decode.Output.Damaged).
func (l *Loader) runTask(ctx context.Context, st *slotState, t step.Task) (damaged int, err error) {
	if st.recErr != nil {
		return 0, st.recErr
	}
	if t.Parts <= 1 {
		out, err := l.dec.Decode(ctx, st.sample, st.rec)
		if err != nil {
			return 0, err
		}
		st.out = out
		return out.Damaged, nil
	}
	tensor := l.allocTensor(st)
	if t.Part == 0 {
		// The first part decodes the clip's audio too (nil when the
		// audio output is off); sampleDone reads it after every part.
		if st.audio, err = l.dec.DecodeAudio(ctx, st.sample, st.rec); err != nil {
			return 0, err
		}
	}
	return l.dec.DecodeClipTask(ctx, st.sample, st.rec.Video, st.tasks[t.Part], tensor.Data)
}

// allocTensor returns the frame tensor a split clip's parts fill.
func (l *Loader) allocTensor(st *slotState) decode.Tensor {
	l.mu.Lock()
	defer l.mu.Unlock()
	if st.tensor.Data == nil {
		st.tensor = decoding.NewTensor(st.shape)
	}
	return st.tensor
}

// sampleDone finishes a sample whose every part ran: it builds a split
// clip's output, feeds the cost model, logs a drop once, and frees the
// compressed bytes. The loader's lock is held.
func (l *Loader) sampleDone(step int64, st *slotState) {
	if st.err == nil && st.out == nil {
		targets := 0
		for _, t := range st.tasks {
			targets += len(t.Targets)
		}
		if f := st.shape[0]; targets < f {
			// A clip of fewer than F distinct frames: repeat them evenly,
			// as a whole-sample decode does.
			video.Spread(st.tensor.Data, f, st.shape[1]*st.shape[2]*3, targets)
		}
		out := &decode.Output{Key: st.sample.Key, Modality: decode.ModalityVideo, Tensors: []decode.Tensor{st.tensor}, Audio: st.audio}
		// Its caption, as a whole sample's decode gives it: text beyond
		// the limit fails the sample.
		if out.Text, out.Tokens, st.err = decoding.SampleText(st.sample, l.dec.Options().Limits); st.err == nil {
			st.out = out
		}
	}
	if st.err == nil && st.rec != nil {
		l.cost.Observe(st.rec, st.decodeUS)
	}
	if st.err != nil && st.recErr == nil && l.logs(st.item.ID) {
		// A record error was logged by the owner when it read the sample.
		l.logDrop(step, st.sample, st.err)
	}
	if st.err == nil && st.damaged > 0 && l.logs(st.item.ID) {
		l.logDamage(step, st.sample, st.damaged)
	}
	l.held -= st.bytes
	st.sample = &decode.Sample{Shard: st.sample.Shard, Key: st.sample.Key} // let the bytes go
	if st.rx != nil {
		st.rx.Release(l.rx)
		st.rx = nil
	}
}

// logs reports whether a failure of the sample with id is for this rank
// to log: one of the epoch the order was in when the loader started, or
// an earlier one. The job serves every
// sample once an epoch, on one rank, and a later epoch meets the same
// bytes again, on whichever rank the order gives it to, so each bad
// sample is logged once a job (a resumed run's first epoch logs those
// its run before had not reached yet). Every draw still counts.
func (l *Loader) logs(id uint64) bool { return int(id>>48) <= l.firstEpoch }

// logDrop logs a dropped sample the first time this rank meets it in
// any loader of the job (logOnce), naming the shard, sample and member
// once: a *decode.SampleError names them itself, other errors are given
// the shard and sample ("shard S: sample "K": err"). The loader's lock
// is held.
func (l *Loader) logDrop(step int64, s *decode.Sample, err error) {
	why, kind := err.Error(), ""
	var se *decode.SampleError
	if !errors.As(err, &se) {
		why = fmt.Sprintf("shard %s: sample %q: %v", s.Shard, s.Key, err)
	} else if se.Kind != nil {
		kind = se.Kind.Error()
	}
	l.logOnce("dropped", kind, s, fmt.Sprintf("datahelix: rank %d: step %d: dropping sample: %s\n",
		l.comm.Rank(), step, why))
}

// logDamage says once per sample and rank (logOnce) that it decoded
// with damage concealed: the training goes on, but the shard's bytes are
// damaged. The loader's lock is held.
func (l *Loader) logDamage(step int64, s *decode.Sample, n int) {
	l.logOnce("damaged", "", s, fmt.Sprintf("datahelix: rank %d: step %d: sample %q of %s decoded with damaged data the decoder concealed (%d damaged packets or undecodable frames): the shard may be corrupt\n",
		l.comm.Rank(), step, s.Key, s.Shard, n))
}

// logOnce writes line to the log the first time this rank meets sample s
// for this reason in any loader of the job, up to maxSampleLines samples
// and then the first of each kind of failure (SampleLog.once).
func (l *Loader) logOnce(reason, kind string, s *decode.Sample, line string) {
	l.logged.once(l.cfg.Log, l.comm.Rank(), reason, kind, s, line)
}

// threadCPU returns the calling thread's CPU time in ns (wall time where
// the thread clock is unavailable).
func threadCPU() int64 {
	if ns, ok := clockNS(unix.CLOCK_THREAD_CPUTIME_ID); ok {
		return ns
	}
	return time.Now().UnixNano()
}

// processCPU returns the process's CPU time in ns, all threads (0 where
// the clock is missing).
func processCPU() int64 {
	ns, _ := clockNS(unix.CLOCK_PROCESS_CPUTIME_ID)
	return ns
}

// clockNS reads a POSIX clock in ns.
func clockNS(id int32) (int64, bool) {
	var ts unix.Timespec
	if err := unix.ClockGettime(id, &ts); err != nil {
		return 0, false
	}
	return ts.Nano(), true
}

func clamp(v, lo, hi int64) int64 { return min(max(v, lo), hi) }
