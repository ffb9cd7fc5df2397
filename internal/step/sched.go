package step

// Task is one unit of decode work on a rank: a whole sample, or one
// keyframe-aligned part of a clip split so that several workers can decode
// it at once.
type Task struct {
	Step  int64 // batch the sample trains in
	Slot  int   // position of the sample in the rank's batch, 0..B-1
	Part  int   // part of a split clip, 0..Parts-1
	Parts int   // parts the sample was split into (1 when not split)
	// Order is the sample's position in the rank's decode order for the
	// batch (0 first): the plan's order for planned loaders, the
	// sampler's order for torch.
	Order int
	Cost  int64 // estimated preparation cost, µs of reference CPU
	// Mem is the decoded bytes the sample's output holds; a sample is
	// charged against the memory budget when its first part starts and
	// freed when its batch is released.
	Mem int64
}

// Scheduler decides which decode task an idle worker runs next. It is the
// policy half of a rank's decode pool, shared by the runtime (real workers
// and clock) and the simulator (virtual ones): it holds no clock and starts
// no goroutines, and the caller serializes calls.
type Scheduler interface {
	// Add makes the tasks of batch step runnable. Batches are added in
	// increasing step order, and the first batch added is the first the
	// run delivers (0, or the step a resumed run starts at).
	Add(step int64, tasks []Task)
	// Next returns the task idle worker w should start, or false when it
	// should wait for an Add, Finish or Release.
	Next(w int) (Task, bool)
	// Finish records that worker w completed t.
	Finish(w int, t Task)
	// Release records that batch step was delivered and the memory of its
	// decoded samples given back.
	Release(step int64)
	// Queued returns the summed estimated cost of the tasks added but not
	// started, and of those started but not finished.
	Queued() (waiting, running int64)
}
