package step

import "sort"

// Torch reproduces how PyTorch's DataLoader (torch/utils/data/dataloader.py,
// _MultiProcessingDataLoaderIter, PyTorch 2.x) prepares batches with
// num_workers = W and the default prefetch_factor = 2:
//
//   - Whole batch per worker: the sampler's batch of indices goes to one
//     worker process, which fetches the samples one after another
//     (_MapDatasetFetcher.fetch: [dataset[i] for i in possibly_batched_index])
//     and returns the collated batch. Torch never splits a sample.
//   - Round-robin: batch k goes to worker k mod W (_try_put_index takes
//     the next worker from itertools.cycle(range(num_workers))).
//   - Prefetch factor 2 per worker: at iterator start _reset calls
//     _try_put_index prefetch_factor * num_workers times, and each batch
//     handed to the training loop (_next_data → _process_data) dispatches
//     one more, so at most 2W batches are outstanding.
//   - FIFO per worker: a worker takes its index_queue in order, so its
//     batches are prepared in dispatch order.
//   - In-order delivery: _next_data returns batch _rcvd_idx only, caching
//     batches that finish early (the loader's Next enforces this).
//
// Task.Order is the sample's position in the sampler's batch.
//
// The first batch added is the iterator's first: a run resumed from a
// checkpoint at step N starts at N, as a fresh PyTorch iterator over the
// rest of the epoch would, with batch N on worker 0.
type Torch struct {
	workers  int
	prefetch int
	begun    bool  // a batch was added: start is set
	start    int64 // step of the first batch added
	consumed int64 // batches below this were released (handed to the training loop)

	added      map[int64][]Task // batches added, not yet dispatched
	dispatched int64            // batches start..dispatched-1 were dispatched
	queues     [][]Task         // per worker: its dispatched tasks, in order
	waiting    int64
	running    int64
}

// NewTorch returns the PyTorch DataLoader policy for W workers with the
// given prefetch factor (PyTorch's default is 2).
func NewTorch(workers, prefetch int) *Torch {
	if workers < 1 {
		workers = 1
	}
	if prefetch < 1 {
		prefetch = 2
	}
	return &Torch{workers: workers, prefetch: prefetch, added: map[int64][]Task{}, queues: make([][]Task, workers)}
}

// Add records the batch; it is dispatched when the prefetch window allows.
// The first batch added sets the step the iterator starts at.
func (t *Torch) Add(step int64, tasks []Task) {
	if !t.begun {
		t.begun, t.start, t.consumed, t.dispatched = true, step, step, step
	}
	ts := append([]Task(nil), tasks...)
	sort.Slice(ts, func(i, j int) bool { return ts[i].Order < ts[j].Order })
	t.added[step] = ts
	for _, x := range ts {
		t.waiting += x.Cost
	}
	t.dispatch()
}

// dispatch sends batches, in step order, to workers round-robin while
// fewer than prefetch*workers are outstanding.
func (t *Torch) dispatch() {
	for t.dispatched < t.consumed+int64(t.prefetch*t.workers) {
		ts, ok := t.added[t.dispatched]
		if !ok {
			return
		}
		delete(t.added, t.dispatched)
		w := t.Worker(t.dispatched)
		t.queues[w] = append(t.queues[w], ts...)
		t.dispatched++
	}
}

// Next gives worker w the next sample of its oldest dispatched batch.
func (t *Torch) Next(w int) (Task, bool) {
	if w < 0 || w >= t.workers || len(t.queues[w]) == 0 {
		return Task{}, false
	}
	x := t.queues[w][0]
	t.queues[w] = t.queues[w][1:]
	t.waiting -= x.Cost
	t.running += x.Cost
	return x, true
}

// Finish accounts a completed sample.
func (t *Torch) Finish(w int, x Task) { t.running -= x.Cost }

// Release counts the batch as consumed and dispatches the next ones.
func (t *Torch) Release(step int64) {
	if step+1 > t.consumed {
		t.consumed = step + 1
	}
	t.dispatch()
}

// Queued returns the estimated cost waiting and running.
func (t *Torch) Queued() (waiting, running int64) { return t.waiting, t.running }

// Worker returns the worker PyTorch gives batch step to: round-robin from
// worker 0 at the first batch added.
func (t *Torch) Worker(step int64) int { return int((step - t.start) % int64(t.workers)) }
