package loader

import (
	"fmt"
	"io"
	"time"

	"github.com/datahelix/datahelix/internal/costmodel"
	"github.com/datahelix/datahelix/internal/decoding"
	"github.com/datahelix/datahelix/internal/planlimits"
	"github.com/datahelix/datahelix/internal/reader"

	"github.com/datahelix/datahelix/decode"
	"github.com/datahelix/datahelix/gpu"
	"github.com/datahelix/datahelix/plan"
)

// Config is one loader's configuration. Every rank must use the same
// values (they come from the same command line); the planner's parameters
// are checked across ranks in every allgather.
type Config struct {
	// Loader is helix (the zero value), or a baseline to measure it
	// against (KindTorch, KindLocal, KindStatic, KindHelixNoGate).
	Loader  Kind
	Batch   int // B: samples per rank per step
	Steps   int // steps to deliver (the run ends after them)
	Workers int // W: decode workers per rank
	// Horizon is H, the steps planned ahead; 0 means max(2*W, 8): never
	// less than torch's prefetch looks, and far enough that deadlines,
	// not the window, decide when a heavy sample starts.
	Horizon int
	Seed    uint64
	// Prefetch is torch's prefetch factor (PyTorch's default 2).
	Prefetch int
	// DecodedBudget caps the decoded bytes a rank holds for batches not
	// yet delivered; the earliest batch may always decode. 0 means enough
	// for Horizon batches.
	DecodedBudget int64
	// CompressedBudget caps the compressed bytes a rank holds for
	// batches read but not decoded; reading waits while it is exceeded.
	// 0 means 1 GiB.
	CompressedBudget int64
	// ShuffleBuffer is each stream's shuffle buffer, in samples (0:
	// reader.DefaultShuffleBuffer, 64).
	ShuffleBuffer int
	// Streams is how many streams read the shards, each its own in turn
	// (0: min(shards, ranks x Batch)): the global batch takes a run of
	// positions from each, and a rank its slice of the global batch, so
	// that with as many streams as ranks each rank streams its own shards
	// (WebDataset's split by rank). The order of the global batches
	// depends on the dataset, Seed, ranks x Batch and Streams, never on
	// the world size alone.
	Streams int
	// StreamTurns is T: the streams form Streams/T lanes whose T streams
	// take turns, one filling a lane's whole run of a global batch (0 or
	// 1: none). Streams = ranks x W and StreamTurns = W give each rank's
	// batch whole from one of W streams in turn, as WebDataset under a
	// DataLoader of W workers does.
	StreamTurns int
	// CheckEvery is K: every K steps the ranks compare plan hashes (0: 50).
	CheckEvery int
	// Margin is the transfer-cost gate's margin, µs.
	Margin int64
	// Decode holds F (frames per clip), S (output size) and the limits.
	Decode decode.Options
	// MaxTasks is how many keyframe-aligned tasks a heavy clip may split
	// into (0: W); torch never splits.
	MaxTasks int
	// Calibration is the cost model's starting point (nil: the built-in
	// default).
	Calibration *costmodel.Calibration
	// GPU is the simulated GPU's step model; its step time is also the
	// prior of the progress tracker, and its per-sample, per-frame and
	// per-token times give each sample the GPU time the planner evens out
	// across ranks (plan.Sample.Train). A zero model leaves the samples'
	// GPU time unknown, and the plan balances decoding only.
	GPU gpu.Model
	// LearnGPU learns the GPU time of the samples from the measured
	// steps (a least-squares fit of a gpu.Model over the recent steps,
	// starting from GPU) instead of taking GPU's: for a real trainer,
	// whose model's cost nobody wrote down.
	LearnGPU bool
	// StepHint is the step time the progress tracker assumes before it
	// has measured one, when GPU is zero (0: 100 ms).
	StepHint time.Duration
	// StallTimeout, when positive, has the loader abort the job (the
	// communicator's Abort) when the rank delivers no step for that long
	// (internal/stall): a rank that makes no progress would otherwise hold
	// every other in a collective until the batch system's time limit.
	// A program that runs several loaders in turn can share one
	// stall watch instead (Progress).
	StallTimeout time.Duration
	// Restore, when set, is a Loader.State to continue from: the run
	// starts at its step with the same batches the saved run would have
	// delivered. It must come from a run of the same dataset, seed,
	// batch and world size (ErrState otherwise).
	Restore []byte
	// CheckpointDir and CheckpointEvery save each rank's loader state every
	// K steps; Resume continues from the latest complete checkpoint, which
	// a job of any number of ranks with the same global batch wrote.
	CheckpointDir   string
	CheckpointEvery int
	// CheckpointKeep, when positive, keeps only the newest CheckpointKeep
	// complete checkpoints: each rank removes its own files of older steps
	// after saving one, and those of a resumed job's ranks it has not that
	// fall to it (0: keep every checkpoint).
	CheckpointKeep int
	Resume         bool
	// ResumeIfAny, with Resume, starts a loader that has no complete
	// checkpoint (ErrNoCheckpoint) from step 0 instead of failing, and
	// rank 0 says so in Log: --resume=auto, for requeued batch jobs whose
	// script always asks to resume.
	ResumeIfAny bool
	// Log receives one line per dropped or damaged sample (once per
	// SampleLog, for at most 20 samples), and rank 0's line when
	// ResumeIfAny starts from step 0 (nil: discarded).
	Log io.Writer
	// SampleLog remembers the samples and the dataset warnings this rank
	// logged; the loaders of a job share one, so that a sample each of
	// them drops, and the dataset's index warnings, are logged once (nil:
	// a log of the loader's own).
	SampleLog *SampleLog
	// Progress, when set, is called on the rank after every step it
	// delivers.
	Progress func(step int64)
	// OnPlan, when set, sees every plan a planned loader computes on this
	// rank, with the input it was computed from (the allgathered blocks),
	// from the control loop: to trace plans or compare them with a
	// simulation of the same job. The input and plan are valid only
	// during the call.
	OnPlan func(step int64, in *plan.Input, p *plan.Plan)

	// poisonRx has the loader's receive-buffer pool poison the buffers
	// given back (wire.Pool.Poison): for tests.
	poisonRx bool
	// hashHook, when set, changes the plan hash a rank compares with the
	// others': for tests of a mismatch.
	hashHook func(rank int, h uint64) uint64
	// jobLoaders are the loaders the job runs one after another, nil
	// meaning Loader alone: a message of no checkpoint to resume from
	// points to another loader's checkpoints only if the job does not
	// run it (InJob sets it).
	jobLoaders []Kind
}

// InJob returns c for a loader of a job that runs the loaders kinds one
// after another over the same checkpoint directory, as datahelix run
// does: when this loader has no checkpoint to resume from, the message
// points to another loader's checkpoints only if the job does not run
// that loader itself.
func InJob(c Config, kinds ...Kind) Config {
	c.jobLoaders = kinds
	return c
}

// Check returns the first setting Run would refuse, naming its flag,
// without running anything, so that a command can refuse it before MPI
// starts.
func (c Config) Check() error { return c.setDefaults() }

// Resolved returns c with the defaults a loader fills in (a zero Horizon
// is max(2 x Workers, 8), a zero MaxTasks is Workers, the budgets...), so
// that settings are compared as the loader will use them; or the first
// setting it would refuse.
func Resolved(c Config) (Config, error) {
	err := c.setDefaults()
	return c, err
}

func (c *Config) setDefaults() error {
	if c.Batch < 1 || c.Batch > planlimits.Batch {
		return fmt.Errorf("--batch %d: want 1..%d", c.Batch, planlimits.Batch)
	}
	if c.Steps < 1 {
		return fmt.Errorf("--steps %d: want at least 1", c.Steps)
	}
	if c.Workers < 1 || c.Workers > 1024 {
		return fmt.Errorf("--workers %d: want 1..1024", c.Workers)
	}
	if c.Horizon == 0 {
		c.Horizon = max(2*c.Workers, 8)
	}
	if c.Horizon < 1 {
		return fmt.Errorf("--horizon %d: want at least 1 (or 0 for the default)", c.Horizon)
	}
	if c.Prefetch <= 0 {
		c.Prefetch = 2
	}
	if c.ShuffleBuffer <= 0 {
		c.ShuffleBuffer = reader.DefaultShuffleBuffer
	}
	if c.CheckEvery <= 0 {
		c.CheckEvery = 50
	}
	if c.CompressedBudget <= 0 {
		c.CompressedBudget = 1 << 30
	}
	if c.Decode.Frames <= 0 {
		c.Decode.Frames = decode.DefaultFrames
	}
	if c.Decode.Size <= 0 {
		c.Decode.Size = decode.DefaultSize
	}
	if c.MaxTasks <= 0 {
		c.MaxTasks = c.Workers
	}
	if c.DecodedBudget <= 0 {
		perSample := int64(c.Decode.Frames)*int64(c.Decode.Size)*int64(c.Decode.Size)*3 + decoding.MaxAudioBytes(c.Decode)
		c.DecodedBudget = int64(c.Horizon) * int64(c.Batch) * perSample
	}
	if c.Streams < 0 {
		return fmt.Errorf("--streams %d: want 0 (min(shards, global batch)) or more", c.Streams)
	}
	if c.StreamTurns < 0 {
		return fmt.Errorf("--stream-turns %d: want 1 or more", c.StreamTurns)
	}
	if c.CheckpointEvery < 0 {
		return fmt.Errorf("--checkpoint-every %d: want 0 (never) or more", c.CheckpointEvery)
	}
	if c.CheckpointKeep < 0 {
		return fmt.Errorf("--checkpoint-keep %d: want 0 (every checkpoint) or more", c.CheckpointKeep)
	}
	if (c.CheckpointEvery > 0 || c.Resume) && c.CheckpointDir == "" {
		return fmt.Errorf("--checkpoint-every and --resume need --checkpoint-dir")
	}
	if c.Loader.stepKind().SimOnly() {
		return fmt.Errorf("--loader %s exists only in simulation (datahelix bench)", c.Loader)
	}
	if err := c.Decode.Transform.Check(); err != nil {
		return err // a *transform.FlagError naming the flag
	}
	if err := c.Decode.Transform.CheckSize(c.Decode.Size); err != nil {
		return err
	}
	return c.GPU.Validate()
}

// priorStep is the step time the tracker assumes before measuring one:
// the simulated GPU's time for a batch of clips.
func (c *Config) priorStep() time.Duration {
	d := c.GPU.StepTime(gpu.Contents{Samples: c.Batch, Frames: c.Batch * c.Decode.Frames})
	if d <= 0 {
		d = c.StepHint
	}
	if d <= 0 {
		d = 100 * time.Millisecond
	}
	return d
}
