package spmd

import (
	"context"
	"time"

	"github.com/datahelix/datahelix/collective"
	"github.com/datahelix/datahelix/decode"
	"github.com/datahelix/datahelix/internal/loader"
)

// Config is one loader's configuration: the Loader (Kind) and the
// per-rank batch size B, the steps to deliver, the decode workers W, the
// steps planned ahead (Horizon, 0: max(2W, 8)), the seed, the decoding
// options (frames per clip, output size, limits), the budgets of decoded
// and compressed bytes held, the shuffle buffer and the streams that
// read the shards, the GPU's step model (or LearnGPU, to learn it from
// the measured steps), a stall timeout, and checkpoints (CheckpointDir,
// CheckpointEvery, CheckpointKeep, Resume, or a Restore state). Every rank
// must use the same values; the planner's parameters are checked across
// ranks in every allgather. Check returns the first setting NewLoader
// would refuse, naming its flag.
type Config = loader.Config

// Kind selects a loader: helix, or a baseline to measure it against.
// Every kind sees the same global batch each step; they differ only in
// where and in what order samples are prepared. Its String method gives
// the name used in flags and tables ("helix", "torch", ...).
type Kind = loader.Kind

// The loaders: helix, the zero value, then the baselines (see
// docs/design.md).
const (
	KindHelix       = loader.KindHelix       // deadline- and progress-driven balancing with the transfer gate
	KindTorch       = loader.KindTorch       // PyTorch's DataLoader: count-based split, in-order delivery
	KindLocal       = loader.KindLocal       // rank-local, earliest deadline first, heavy clips split
	KindStatic      = loader.KindStatic      // balanced from the records alone, without progress
	KindHelixNoGate = loader.KindHelixNoGate // helix without the transfer gate
)

// Batch is what the training loop gets for one step: this rank's share
// of the global batch, decoded (Samples), and the samples of that share
// that failed to decode (Dropped); the batch is delivered without them.
// Its Contents method summarizes it for a GPU step-time model.
type Batch = loader.Batch

// BatchSample is one decoded sample: its ID, Shard and Key, its Owner
// (the rank that read it from its shard), its Modality, its Tensors
// (contiguous uint8 buffers: [F,S,S,3] for a clip, [S,S,3] per image),
// and its Text with its estimated Tokens.
type BatchSample = loader.BatchSample

// DroppedSample names a sample left out of its batch (ID, Shard, Key) and
// why (Err, a *decode.SampleError for a sample that failed to decode).
type DroppedSample = loader.DroppedSample

// Errors a Loader returns; test with errors.Is.
var (
	// ErrPlanMismatch matches the error a Loader returns when the ranks no
	// longer plan alike: their allgathered blocks carry other planner
	// parameters, or the hashes of their plans differ at a check step.
	// Every rank plans from the same bytes, so either means a rank runs
	// other settings or another build; retrying the job will not help.
	ErrPlanMismatch = loader.ErrPlanMismatch
	// ErrDelivered is Peek's error for a step Next delivered already.
	ErrDelivered = loader.ErrDelivered
	// ErrState matches a Config.Restore that this run cannot continue: it
	// does not parse, or was saved for another dataset, seed, global
	// batch, stream count or shuffle buffer (the error names which).
	ErrState = loader.ErrState
	// ErrNoCheckpoint matches the error of Config.Resume, and of
	// LatestCheckpoint, when there is no complete checkpoint to resume.
	ErrNoCheckpoint = loader.ErrNoCheckpoint
)

// Loader is one rank's data loader. The training loop calls Next once per
// step; everything else — reading ahead, planning with the other ranks,
// exchanging compressed samples and decoding in deadline order — happens
// in the loader's goroutines. The time between Next calls is the GPU's
// progress, which the loader measures itself.
type Loader struct {
	l *loader.Loader
}

// NewLoader starts the loader of one rank, reading ds (a *decode.Dataset
// of WebDataset shards, or any decode.Source that every rank sees
// alike). Every rank of comm must call it with the same configuration;
// comm must not be used by anyone else while the loader runs (give the
// training loop's collectives a Dup).
func NewLoader(ctx context.Context, comm collective.Comm, ds decode.Source, cfg Config) (*Loader, error) {
	l, err := loader.NewLoader(ctx, comm, ds, cfg)
	if err != nil {
		return nil, err
	}
	return &Loader{l: l}, nil
}

// Next returns the batch of the next step, waiting until it is decoded.
// It returns io.EOF after the configured steps, and the loader's error if
// the loader failed (the job should then end: other ranks depend on this
// one).
func (l *Loader) Next(ctx context.Context) (*Batch, error) { return l.l.Next(ctx) }

// Peek waits until the batch of step is decoded and returns it without
// delivering it: the loader's clocks and records are Next's. A server
// that hands batches to another process copies them out ahead of the
// request with it. It returns ErrDelivered once Next took step, io.EOF
// for a step past the last, and the loader's error if it failed.
func (l *Loader) Peek(ctx context.Context, step int64) (*Batch, error) { return l.l.Peek(ctx, step) }

// ReportGPUStep records the GPU's own time for the step last delivered,
// as the trainer measured it (CUDA events): the progress tracker then
// predicts deadlines from it rather than from the host's requests, and
// the step's record holds it.
func (l *Loader) ReportGPUStep(d time.Duration) { l.l.ReportGPUStep(d) }

// State returns the loader's state before its next step, as JSON: what
// Config.Restore takes to continue with the same batches. Every rank's is
// the same at the same step, so any rank's resumes the whole job, at any
// world size with the same global batch.
func (l *Loader) State() []byte { return l.l.State() }

// Delivered is the number of steps the loader delivered.
func (l *Loader) Delivered() int64 { return l.l.Delivered() }

// Quiesce prepares a loader whose training loop stopped asking before
// its last step for Close: it waits until the loader has planned the
// whole window ahead of the last delivered step, in no collective. Every
// rank's loader stops at the same step when every rank delivered the
// same steps, so that each rank may then Close without leaving another
// in a collective. Ranks that delivered different steps must not Close
// (their loaders may wait in a collective for each other): end the job
// instead.
func (l *Loader) Quiesce() { l.l.Quiesce() }

// Close stops the loader's goroutines and returns the first error they
// met, if any.
func (l *Loader) Close() error { return l.l.Close() }

// LatestCheckpoint returns the step of the newest checkpoint of loader k
// in dir that every rank of the job that wrote it completed, whatever
// that job's number of ranks: a job of any number resumes it if its
// global batch (ranks x batch) is the same. A step directory missing
// some rank's file (a job killed while saving it) does not count: the
// one before it does. It is a collective call: rank 0 reads the
// directory and broadcasts the step, so every rank returns the same
// step, or the same error, even if their views of a shared file system
// differ. With no complete checkpoint the error wraps ErrNoCheckpoint
// and is marked collective.AllRanks.
func LatestCheckpoint(comm collective.Comm, dir string, k Kind) (int64, error) {
	return loader.LatestCheckpoint(comm, dir, k)
}
