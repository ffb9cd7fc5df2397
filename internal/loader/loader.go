package loader

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/datahelix/datahelix/collective"
	"github.com/datahelix/datahelix/decode"
	"github.com/datahelix/datahelix/gpu"
	"github.com/datahelix/datahelix/internal/agree"
	"github.com/datahelix/datahelix/internal/costmodel"
	"github.com/datahelix/datahelix/internal/decoding"
	"github.com/datahelix/datahelix/internal/gpulearn"
	"github.com/datahelix/datahelix/internal/metrics"
	"github.com/datahelix/datahelix/internal/reader"
	"github.com/datahelix/datahelix/internal/stall"
	"github.com/datahelix/datahelix/internal/step"
	"github.com/datahelix/datahelix/internal/video"
	"github.com/datahelix/datahelix/internal/wire"
	"github.com/datahelix/datahelix/plan"
)

// Batch is what the training loop gets for one step: this rank's share
// of the global batch, decoded.
type Batch struct {
	Step    int64
	Samples []BatchSample
	// Dropped lists the samples of this rank's share that failed to
	// decode; the batch is delivered without them.
	Dropped []DroppedSample
}

// BatchSample is one decoded sample.
type BatchSample struct {
	ID       uint64
	Shard    string
	Key      string
	Owner    int // rank that read it from its shard
	Modality decode.Modality
	// Tensors are contiguous uint8 buffers: [F,S,S,3] for a clip, [S,S,3]
	// per image.
	Tensors []decode.Tensor
	Text    string
	Tokens  int
	// Audio is the sample's sound when the decoder's audio output is on
	// (decode.Options.AudioRate): a clip's, silence with Missing set for
	// a clip without sound, or an audio sample's; nil otherwise.
	Audio *decoding.Audio
}

// DroppedSample names a sample left out of its batch and why.
type DroppedSample struct {
	ID    uint64
	Shard string
	Key   string
	Err   error
}

// Contents summarizes the batch for the GPU's step-time model.
func (b *Batch) Contents() gpu.Contents {
	c := gpu.Contents{Samples: len(b.Samples)}
	for _, s := range b.Samples {
		for _, t := range s.Tensors {
			if len(t.Shape) == 4 {
				c.Frames += t.Shape[0]
			} else {
				c.Frames++
			}
		}
		c.Tokens += s.Tokens
	}
	return c
}

// Loader is one rank's data loader. The training loop calls Next once per
// step; everything else — reading ahead, planning with the other ranks,
// exchanging compressed samples and decoding in deadline order — happens
// in the loader's goroutines. The time between Next calls is the GPU's
// progress, which the loader measures itself.
type Loader struct {
	cfg     Config
	comm    collective.Comm
	ds      decode.Source
	reader  *reader.Reader
	dec     *decoding.Decoder
	cost    *costmodel.Model
	tracker *gpu.Tracker
	start   time.Time
	// cpuAt is the process's CPU time (ns) at the last delivery, for the
	// next record's CPUUS; only Next uses it.
	cpuAt int64
	first int64 // first step this loader delivers (after a resume)
	// sendHdr and sendParts are reused for every step's outgoing
	// messages: sendHdr the samples' headers and their members under
	// wireInlineBelow bytes (it keeps the size of the largest step's),
	// sendParts the parts (header runs and large members' data) that
	// IsendParts sends. Only the control loop uses them, and a step's
	// sends complete before it lays out the next step's. Sending the data
	// where it lies, rather than packed into a send buffer, took a third
	// off a 16-sample message's time (datahelix bench exchange).
	sendHdr   []byte
	sendParts [][]byte

	mu        sync.Mutex
	cond      *sync.Cond
	sched     step.Scheduler
	batches   map[int64]*batchState
	delivered int64 // last step handed to the training loop
	next      int64 // step the next Next call returns
	fatal     error // first error of the control loop or a worker
	closed    bool
	held      int64              // compressed bytes read and not yet decoded or sent
	rx        *wire.Pool         // received messages' buffers, reused once decoded
	snaps     map[int64]snapshot // reader state before reading each step in flight
	logged    *SampleLog         // samples this rank logged, in any loader of the job (logOnce)
	// firstEpoch is the order's epoch when the loader starts: failures
	// of samples of later epochs are counted, not logged (logs).
	firstEpoch int
	dataset    uint64               // agree.DatasetHash of ds, recorded in checkpoints
	records    []metrics.StepRecord // one per delivered step
	bandwidth  int64                // measured exchange bandwidth, fixed-point bytes/µs
	// wallPerCPU is decode wall time over decode CPU time, fixed-point
	// (plan.One when every decode has a core to itself).
	wallPerCPU int64
	latency    int64 // measured per-message latency, µs
	// nodes is every rank's node, the lowest rank on its host; netBW and
	// netLatency are this rank's measured bandwidth (fixed-point
	// bytes/µs) and latency to other nodes, 0 until an exchange crossed
	// the network.
	nodes             []int
	netBW, netLatency int64
	// reportedGPU is the GPU time the trainer reported for the step last
	// delivered (ReportGPUStep), 0 when none; lastContents what that
	// step's batch held, for the learned GPU model.
	reportedGPU  time.Duration
	lastContents gpu.Contents
	learner      *gpulearn.Learner // nil unless Config.LearnGPU
	watch        *stall.Watcher    // nil unless Config.StallTimeout
	// decodeCPU is the CPU time (µs) the workers spent on finished
	// tasks, decodeAt its value at the last delivery, for the next
	// record's DecodeCPUUS.
	decodeCPU, decodeAt int64

	// parked is set while the control loop waits for the window to
	// move (it is in no collective); stopping lifts the compressed-bytes
	// budget so that it parks at the window's edge (Quiesce);
	// controlDone is set once the control loop returned.
	parked, stopping, controlDone bool

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// snapshot is a reader position with the epoch it was taken in.
type snapshot struct {
	reader []byte
}

// batchState is a batch in preparation on this rank.
type batchState struct {
	step      int64
	slots     []*slotState
	tasksLeft int
	ready     bool
	readyAt   time.Time
	rec       metrics.StepRecord // filled as the batch moves through the pipeline
}

// slotState is one sample of a batch in preparation.
type slotState struct {
	item      step.Item
	sample    *decode.Sample
	rec       *decoding.Record
	recErr    error
	tasks     []video.Task    // for split clips, one per part
	tensor    decode.Tensor   // a split clip's frames, filled by its parts
	shape     []int           // a clip's tensor's [F, H, W, 3] (fps sampling and native resizing vary it)
	audio     *decoding.Audio // a split clip's audio, decoded by its first part
	out       *decode.Output
	err       error
	partsLeft int
	decodeUS  int64
	damaged   int       // packets the decoder found damaged (decode.Output.Damaged)
	bytes     int64     // compressed bytes held for it
	rx        *wire.Buf // the received message its bytes alias, if any
}

// newRankReader is this rank's reader of ds at the start of a run (cfg
// with its defaults set). Its errors, an empty shard or shards that do
// not split over the ranks, are every rank's.
func newRankReader(comm collective.Comm, ds decode.Source, cfg Config) (*reader.Reader, error) {
	if err := checkEmptyShards(ds); err != nil {
		return nil, err
	}
	rd, err := reader.New(shardSizes(ds), comm.Rank(), comm.Size(), cfg.Batch, cfg.Seed, cfg.ShuffleBuffer, cfg.Streams, cfg.StreamTurns)
	if err != nil {
		return nil, collective.AllRanks(err)
	}
	return rd, nil
}

// nodesOf returns each rank's node, the lowest rank on its host, from an
// allgather of the ranks' host names: the planner prices a move across
// nodes at the network's bandwidth, within one at memory's. Collective.
func nodesOf(comm collective.Comm) ([]int, error) {
	hosts, err := comm.AllgatherVar([]byte(comm.Info().Host))
	if err != nil {
		return nil, fmt.Errorf("spmd: gather host names: %w", err)
	}
	nodes := make([]int, len(hosts))
	first := map[string]int{}
	for r, h := range hosts {
		if f, ok := first[string(h)]; ok {
			nodes[r] = f
		} else {
			first[string(h)], nodes[r] = r, r
		}
	}
	return nodes, nil
}

// shardSizes is the number of samples in each of ds's shards.
func shardSizes(ds decode.Source) []int {
	sizes := make([]int, ds.NumShards())
	for i := range sizes {
		sizes[i] = ds.ShardLen(i)
	}
	return sizes
}

// NewLoader starts the loader of one rank, reading ds (a *decode.Dataset
// of WebDataset shards, or any decode.Source that every rank sees
// alike). Every rank of comm must call it with the same configuration;
// comm must not be used by anyone else while the loader runs (give the
// training loop's collectives a Dup).
func NewLoader(ctx context.Context, comm collective.Comm, ds decode.Source, cfg Config) (*Loader, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, collective.AllRanks(err)
	}
	reader, err := newRankReader(comm, ds, cfg)
	if err != nil {
		return nil, err
	}

	cal := cfg.Calibration
	if cal == nil {
		cal = costmodel.DefaultCalibration()
	}
	cost := costmodel.New(cal)
	// One seed for the job: the sample order's seeds the transforms too.
	cfg.Decode.Transform.Seed = cfg.Seed
	cost.SetOptions(costmodel.Options{Frames: cfg.Decode.Frames, Size: cfg.Decode.Size, MaxTasks: taskLimit(cfg), Transform: cfg.Decode.Transform, AudioRate: cfg.Decode.AudioRate})
	// Count errors once the model has seen a quarter of the run's samples
	// (at most the model's default 200), so short runs report one too.
	cost.SetWarmup(min(200, max(8, cfg.Steps*cfg.Batch/4)))
	if cfg.SampleLog == nil {
		cfg.SampleLog = NewSampleLog()
	}
	l := &Loader{
		cfg: cfg, comm: comm, ds: ds, reader: reader,
		dec:     decoding.NewDecoder(cfg.Decode),
		cost:    cost,
		tracker: gpu.NewTracker(cfg.priorStep()),
		sched:   cfg.Loader.stepKind().NewScheduler(cfg.Workers, cfg.Prefetch, cfg.DecodedBudget),
		batches: map[int64]*batchState{},
		snaps:   map[int64]snapshot{},
		logged:  cfg.SampleLog,
		dataset: agree.DatasetHash(ds),
		rx:      wire.NewPool(min(cfg.CompressedBudget/4, wire.PoolLimit), cfg.poisonRx),
		// Until measured: 1 GB/s and 50 µs, a conservative intra-node guess.
		bandwidth:  1000 * plan.One,
		latency:    50,
		wallPerCPU: plan.One,
	}
	l.cond = sync.NewCond(&l.mu)
	if cfg.LearnGPU {
		l.learner = gpulearn.New(cfg.GPU)
	}
	switch {
	case cfg.Restore != nil && cfg.Resume:
		return nil, collective.AllRanks(errors.New("spmd: Config.Restore and Config.Resume both set: resume from one"))
	case cfg.Restore != nil:
		step, err := l.restoreState(cfg.Restore)
		if err != nil {
			return nil, err
		}
		l.first = step
	}
	if cfg.Resume {
		step, err := l.restore()
		if err != nil {
			return nil, err
		}
		l.first = step
	}
	l.delivered, l.next = l.first-1, l.first
	l.firstEpoch = l.reader.Order().Epoch()
	if l.nodes, err = nodesOf(comm); err != nil {
		return nil, err
	}
	// From here on a rank that makes no progress ends the job.
	l.watch = stall.Watch(comm, cfg.StallTimeout)
	l.watch.Start(cfg.Loader.String())
	l.comm = l.watch.Watched(comm)
	// Start every rank's clock together.
	if err := l.comm.Barrier(); err != nil {
		l.watch.Stop()
		return nil, err
	}
	l.start, l.cpuAt = time.Now(), processCPU()
	ctx, l.cancel = context.WithCancel(ctx)
	l.wg.Add(1 + cfg.Workers)
	go l.control(ctx)
	for w := 0; w < cfg.Workers; w++ {
		go l.worker(ctx, w)
	}
	return l, nil
}

// taskLimit is how many tasks a clip may split into under cfg.
func taskLimit(cfg Config) int {
	if !cfg.Loader.stepKind().Splits() {
		return 1
	}
	return cfg.MaxTasks
}

// sinceStart returns µs on the loader's clock.
func (l *Loader) sinceStart(t time.Time) int64 { return t.Sub(l.start).Microseconds() }

// fail records the first fatal error and wakes everyone.
func (l *Loader) fail(err error) {
	l.mu.Lock()
	if l.fatal == nil && err != nil {
		l.fatal = err
	}
	l.cond.Broadcast()
	l.mu.Unlock()
}

// Next returns the batch of the next step, waiting until it is decoded.
// It returns io.EOF after the configured steps, and the loader's error if
// the loader failed (the job should then end: other ranks depend on this
// one).
func (l *Loader) Next(ctx context.Context) (*Batch, error) {
	l.mu.Lock()
	t := l.next
	if t >= int64(l.cfg.Steps) {
		l.mu.Unlock()
		return nil, io.EOF
	}
	l.mu.Unlock()
	request := time.Now()
	l.tracker.Requested(t, request)
	stop := context.AfterFunc(ctx, func() { l.mu.Lock(); l.cond.Broadcast(); l.mu.Unlock() })
	defer stop()

	l.mu.Lock()
	for {
		if l.fatal != nil {
			err := l.fatal
			l.mu.Unlock()
			return nil, err
		}
		if err := context.Cause(ctx); err != nil {
			l.mu.Unlock()
			return nil, err
		}
		if b := l.batches[t]; b != nil && b.ready {
			break
		}
		l.cond.Wait()
	}
	deliver := time.Now()
	bs := l.batches[t]
	out := batchOf(bs)
	rec := bs.rec
	for _, s := range bs.slots {
		if s.err != nil {
			continue
		}
		rec.Hash += metrics.IDDigest(s.item.ID)
		if s.damaged > 0 {
			rec.Damaged++
		}
	}
	for _, d := range out.Dropped {
		rec.Hash += metrics.IDDigest(d.ID) // the sample belonged to the step, decoded or not
	}
	rec.Step, rec.Rank = t, l.comm.Rank()
	rec.RequestUS, rec.DeliverUS = l.sinceStart(request), l.sinceStart(deliver)
	rec.ReadyUS = l.sinceStart(bs.readyAt)
	rec.WaitUS = max(rec.DeliverUS-rec.RequestUS, 0)
	rec.TolUS = metrics.Tolerance(l.tracker.StepTime().Microseconds())
	rec.Miss = rec.ReadyUS-rec.RequestUS > rec.TolUS
	rec.Samples, rec.Dropped = len(out.Samples), len(out.Dropped)
	rec.DecodeCPUUS, l.decodeAt = l.decodeCPU-l.decodeAt, l.decodeCPU
	delete(l.batches, t)
	l.sched.Release(t)
	l.delivered = t
	l.next = t + 1
	l.cond.Broadcast()
	l.mu.Unlock()

	l.tracker.Delivered(t, deliver)
	cpu := processCPU()
	rec.CPUUS = (cpu - l.cpuAt) / 1000
	l.cpuAt += rec.CPUUS * 1000 // the remainder counts in the next record
	if n := len(l.records); n > 0 {
		// The previous step's compute time is now known.
		l.records[n-1].ComputeUS = max(rec.RequestUS-l.records[n-1].DeliverUS, 0)
		l.observeStep(&l.records[n-1])
	}
	l.mu.Lock()
	l.lastContents = out.Contents()
	l.mu.Unlock()
	l.records = append(l.records, rec)
	if l.cfg.CheckpointEvery > 0 && (t+1)%int64(l.cfg.CheckpointEvery) == 0 && t+1 < int64(l.cfg.Steps) {
		if err := l.checkpoint(t + 1); err != nil {
			return nil, err
		}
	}
	l.watch.Delivered(t)
	if l.cfg.Progress != nil {
		l.cfg.Progress(t)
	}
	return out, nil
}

// batchOf is the training loop's view of a decoded batch.
func batchOf(bs *batchState) *Batch {
	out := &Batch{Step: bs.step}
	for _, s := range bs.slots {
		if s.err != nil {
			out.Dropped = append(out.Dropped, DroppedSample{ID: s.item.ID, Shard: s.sample.Shard, Key: s.sample.Key, Err: s.err})
			continue
		}
		out.Samples = append(out.Samples, BatchSample{
			ID: s.item.ID, Shard: s.sample.Shard, Key: s.sample.Key, Owner: s.item.Owner,
			Modality: s.out.Modality, Tensors: s.out.Tensors, Text: s.out.Text, Tokens: s.out.Tokens, Audio: s.out.Audio,
		})
	}
	return out
}

// Quiesce prepares a loader whose training loop stopped asking before
// its last step for Close: it waits until the control loop has planned
// the whole window ahead of the last delivered step and waits for the
// window to move, in no collective. Every rank's loop stops at the same
// step when every rank delivered the same steps, so that each rank may
// then Close without leaving another in a collective. Ranks that
// delivered different steps must not Close (their loops may wait in a
// collective for each other): end the job instead.
func (l *Loader) Quiesce() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stopping = true
	l.cond.Broadcast()
	for !l.parked && !l.controlDone && l.fatal == nil && !l.closed {
		l.cond.Wait()
	}
}

// Delivered is the number of steps the loader delivered.
func (l *Loader) Delivered() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.next - l.first
}

// Close stops the loader's goroutines and returns the first error they
// met, if any.
func (l *Loader) Close() error {
	l.mu.Lock()
	l.closed = true
	l.cond.Broadcast()
	l.mu.Unlock()
	l.cancel()
	l.wg.Wait()
	l.watch.Stop()
	l.mu.Lock()
	defer l.mu.Unlock()
	// A fatal error that is only the cancellation (Close's own, or the
	// caller's with a cause that is a context.Canceled, as
	// collective.RankFailedError and the command's signal cause are) is
	// not a failure of the loader.
	if l.fatal != nil && !errors.Is(l.fatal, context.Canceled) {
		return l.fatal
	}
	return nil
}
