package launcher

import (
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/datahelix/datahelix/gpu"
	"github.com/datahelix/datahelix/internal/agree"
	"github.com/datahelix/datahelix/internal/cli"
	"github.com/datahelix/datahelix/internal/loader"
	"github.com/datahelix/datahelix/internal/planlimits"
	"github.com/datahelix/datahelix/internal/step"
	"github.com/datahelix/datahelix/spmd"
)

// loaderList is the repeatable --loader flag.
type loaderList []spmd.Kind

func (l *loaderList) String() string {
	s := make([]string, len(*l))
	for i, k := range *l {
		s[i] = k.String()
	}
	return strings.Join(s, ",")
}

func (l *loaderList) Set(v string) error {
	ks, err := step.ParseKinds(v)
	if err != nil {
		return err
	}
	for _, k := range ks {
		if slices.Contains(*l, spmd.Kind(k)) {
			return fmt.Errorf("loader %s given twice", k)
		}
		*l = append(*l, spmd.Kind(k))
	}
	return nil
}

// runFlags are the flags of datahelix run.
type runFlags struct {
	world          worldFlags
	data, cacheDir string
	loaders        loaderList
	cfg            spmd.Config
	gpuStepMS      float64
	gpuSampleMS    float64
	gpuFrameMS     float64
	gpuTokenUS     float64
	decodedMiB     int64
	compressedMiB  int64
	seed           uint64
	trace, jsonOut string
	quiet          bool
	resume         cli.AutoBool
	stallTimeout   time.Duration
	args           []string // as given, for the --json record
	epochs         int      // --epochs, 0: none
	transform      cli.TransformFlags
	// repeat is --repeat: how many times run trains each loader on each
	// dataset (0 until resolved by resolveDefaultJob).
	repeat int
	// cases are the datasets the job trains on, in order: the one
	// --data names, or the default job's two layouts.
	cases []runCase
}

// runCase is one dataset of a run job.
type runCase struct {
	name  string // "" for --data; skewed or uniform on the default dataset
	about string // what it is, for the table's heading
}

// The default job: what run does with no --data (and no checkpoints).
// It trains on the default dataset in its source-homogeneous layout
// (skewed) and in the same samples dealt across its shards (uniform),
// each loader defaultJobRepeat times in turn, with small batches, as
// video LLMs train, so that the spread over runs shows in about a minute:
// 12 runs of 24 steps of about 146 ms. The steps after the warm-up (8,
// one planning horizon) are the ones compared.
const (
	defaultJobRepeat = 3
	defaultJobBatch  = 2
	defaultJobSteps  = 24
	maxRepeat        = 100
)

// The default job's cases.
var (
	skewedCase  = runCase{name: "skewed", about: "source-homogeneous shards (HD clips, short clips, images, text): the rank streaming the HD shard has ten times the decoding of the next"}
	uniformCase = runCase{name: "uniform", about: "the same samples dealt across the shards: every rank streams the same mixture, only the samples' own variation is left to balance"}
)

// resolveDefaultJob settles --repeat and the datasets: with no --data and
// no --checkpoint-dir, the default job's two cases, --repeat 3, and
// --batch and --steps at the default job's values unless given (set names
// the flags given); otherwise one dataset and --repeat 1 unless given.
func (f *runFlags) resolveDefaultJob(set []string) error {
	defaultJob := f.data == "" && f.cfg.CheckpointDir == ""
	switch {
	case f.repeat < 0 || f.repeat > maxRepeat:
		return cli.FlagErrorf("", "repeat", f.repeat, "want 1..%d (0: %d on the default dataset, else 1)", maxRepeat, defaultJobRepeat)
	case f.repeat > 1 && f.cfg.CheckpointDir != "":
		return cli.FlagErrorf("", "repeat", f.repeat, "each repeat would save and resume the same checkpoints in --checkpoint-dir: want 1 with checkpoints")
	}
	if !defaultJob {
		f.cases = []runCase{{}}
		f.repeat = max(f.repeat, 1)
		return nil
	}
	f.cases = []runCase{skewedCase, uniformCase}
	if f.repeat == 0 {
		f.repeat = defaultJobRepeat
	}
	if !slices.Contains(set, "batch") {
		f.cfg.Batch = defaultJobBatch
	}
	if !slices.Contains(set, "steps") {
		f.cfg.Steps = defaultJobSteps
	}
	return nil
}

// applyEpochs ends the run after f.epochs epochs of a dataset whose
// shards hold sizes samples, on ranks ranks, if that comes before
// --steps: an epoch is the dataset's samples over the global batch,
// rounded down. It refuses epochs shorter than one step.
func (f *runFlags) applyEpochs(sizes []int, ranks int) error {
	if f.epochs == 0 {
		return nil
	}
	total := 0
	for _, n := range sizes {
		total += n
	}
	g := ranks * f.cfg.Batch
	steps := int64(f.epochs) * int64(total) / int64(g)
	if steps < 1 {
		return cli.FlagErrorf("", "epochs", f.epochs, "%d epochs of %d samples make no global batch of %d (%d ranks x --batch %d)", f.epochs, total, g, ranks, f.cfg.Batch)
	}
	f.cfg.Steps = int(min(steps, int64(f.cfg.Steps)))
	return nil
}

func (f *runFlags) register(fs *flag.FlagSet) {
	f.registerData(fs, 60, fmt.Sprintf("training `steps` per loader (%d on the default dataset)", defaultJobSteps))
	fs.IntVar(&f.repeat, "repeat", 0, fmt.Sprintf("train each loader `N` times in turn, 1..%d, and report the spread over the runs (default %d on the default dataset, else 1)", maxRepeat, defaultJobRepeat))
	fs.Var(&f.loaders, "loader", "loader(s) to run, in order, repeatable or a comma list: torch, local, static, helix, helix-nogate, helix-notrain (default torch,helix)")
	fs.Float64Var(&f.gpuStepMS, "gpu-step-ms", 130, "simulated GPU: base step time in `ms`. The default, with 1 ms per frame, makes a step of about 146 ms on the default job (batch 2, 4 ranks), whose samples need about 243 ms of decode CPU per global step: 2 cores give 1.2x that, the provisioning rule's ratio, but the rank streaming the HD shard needs about 218 ms a step on its one worker, 1.5x a step")
	fs.Float64Var(&f.gpuSampleMS, "gpu-ms-per-sample", 0, "simulated GPU: `ms` per sample of the batch")
	fs.Float64Var(&f.gpuFrameMS, "gpu-ms-per-frame", 1, "simulated GPU: `ms` per decoded frame or image of the batch")
	fs.Float64Var(&f.gpuTokenUS, "gpu-us-per-token", 0, "simulated GPU: `µs` per text token of the batch")
	fs.DurationVar(&f.stallTimeout, "stall-timeout", 0, "abort the job when a rank delivers no step for this `duration` (a rank that makes no progress holds every other in the next collective); 0: never; unless given, 10 minutes or ten GPU steps of a batch of clips, whichever is longer")
}

// registerData registers the data-plane flags that run, train and serve
// share: the world's, the data, the batch and steps, the decoding and
// planning, the outputs and the checkpoints.
func (f *runFlags) registerData(fs *flag.FlagSet, steps int, stepsUsage string) {
	f.world.register(fs)
	fs.StringVar(&f.data, "data", "", "`path` of the dataset: a directory of WebDataset tar shards or a glob (default: the embedded default dataset, generated once into the cache)")
	fs.StringVar(&f.cacheDir, "cache-dir", "", "`dir`ectory for the default dataset and shard indexes"+cli.CacheDirDefault)
	fs.IntVar(&f.cfg.Batch, "batch", 4, fmt.Sprintf("per-rank batch size `B`, 1..%d (run's default job: %d)", planlimits.Batch, defaultJobBatch))
	fs.IntVar(&f.cfg.Steps, "steps", steps, stepsUsage)
	fs.IntVar(&f.cfg.Workers, "workers", 1, "decode workers `W` per rank")
	fs.IntVar(&f.cfg.Horizon, "horizon", 0, "planning horizon `H` in steps (default max(2 x workers, 8): never less than PyTorch's prefetch looks)")
	cli.ShapeFlags(fs, &f.cfg.Decode.Frames, &f.cfg.Decode.Size)
	fs.BoolVar(&f.cfg.Decode.CheckHashes, "check-hashes", false, checkHashesUsage)
	f.transform.Register(fs)
	audioFlags(fs, &f.cfg.Decode.AudioRate, &f.cfg.Decode.AudioChannels)
	fs.Uint64Var(&f.seed, "seed", 1, "`seed` of the sample order and the transforms (and of the default dataset's content)")
	fs.IntVar(&f.cfg.ShuffleBuffer, "shuffle-buffer", 64, "samples in each stream's shuffle buffer (WebDataset's shuffle(N))")
	fs.IntVar(&f.cfg.Streams, "streams", 0, "streams reading the shards, each its own in turn, a global batch taking a run of samples from each (default min(shards, ranks x batch): with as many streams as ranks, each rank streams its own shards)")
	fs.IntVar(&f.cfg.StreamTurns, "stream-turns", 1, "streams taking turns `T` at a time: each of --streams/T lanes fills its run of a global batch from one of its T streams in turn (--streams ranks x W --stream-turns W: each rank's batch comes whole from one of W shards in turn, as WebDataset under a DataLoader of W workers)")
	fs.IntVar(&f.epochs, "epochs", 0, "end after `E` epochs of the dataset (or at --steps, if sooner); 0: --steps alone")
	fs.Int64Var(&f.decodedMiB, "decoded-budget", 0, fmt.Sprintf("`MiB` of decoded samples a rank may hold ahead of the GPU, at most %d (0: horizon x batch clips, with the audio limit's PCM under --audio-rate)", maxBudgetMiB))
	fs.Int64Var(&f.compressedMiB, "compressed-budget", 1024, fmt.Sprintf("`MiB` of compressed samples a rank may hold before decoding, at most %d (0: 1024)", maxBudgetMiB))
	fs.IntVar(&f.cfg.CheckEvery, "check-every", 50, "compare plan hashes across ranks every `K` steps")
	fs.Int64Var(&f.cfg.Margin, "margin-us", 200, "transfer-cost gate margin in `µs`")
	fs.IntVar(&f.cfg.MaxTasks, "max-tasks", 0, "split a heavy clip into at most `N` keyframe-aligned tasks (default: workers)")
	fs.StringVar(&f.cfg.CheckpointDir, "checkpoint-dir", "", "`dir`ectory for per-rank loader checkpoints")
	fs.IntVar(&f.cfg.CheckpointEvery, "checkpoint-every", 0, "save a checkpoint every `K` steps (needs --checkpoint-dir)")
	fs.IntVar(&f.cfg.CheckpointKeep, "checkpoint-keep", 0, "keep only the newest `N` checkpoints every rank completed (0: every one)")
	fs.Var(&f.resume, "resume", "resume each loader from its latest complete checkpoint in --checkpoint-dir: --resume or --resume=true fails when there is none, --resume=auto starts from step 0 then (for requeued jobs whose script always passes it)")
	fs.StringVar(&f.trace, "trace", "", "write per-rank per-step records as JSON lines to `file` (- for standard output, the table then going to standard error)")
	fs.StringVar(&f.jsonOut, "json", "", "write the summary, one object per loader, to `file` (- for standard output, the table then going to standard error)")
	fs.BoolVar(&f.quiet, "quiet", false, "no progress bar")
}

// Bounds of the run flags that the runtime does not check itself before
// MPI starts.
const (
	// maxBudgetMiB keeps a budget in MiB convertible to bytes in an int64
	// with room to spare: 8 TiB.
	maxBudgetMiB = 1 << 23
	// maxGPUMS bounds each simulated GPU time in ms (one hour), and
	// maxGPUStep the modelled step of a batch of B clips of F frames (a
	// day), so no time overflows time.Duration.
	maxGPUMS   = 3.6e6
	maxGPUStep = 24 * time.Hour
	// maxGPUTokenUS bounds the per-token time: real models spend
	// microseconds or less per token, and a batch may hold millions.
	maxGPUTokenUS = 1000
)

func (f *runFlags) validate() error {
	if len(f.loaders) == 0 {
		f.loaders = loaderList{spmd.KindTorch, spmd.KindHelix}
	}
	f.cfg.Resume, f.cfg.ResumeIfAny = f.resume != cli.AutoFalse, f.resume == cli.AutoAuto
	spec, err := f.transform.Spec(f.cfg.Decode.Size)
	if err != nil {
		return err
	}
	f.cfg.Decode.Transform = spec
	for _, k := range f.loaders {
		// What the runtime refuses (batch, steps, workers, horizon,
		// checkpoints, the loader), refused here before MPI starts.
		c := f.cfg
		c.Loader = k
		if err := c.Check(); err != nil {
			return cli.Usagef("%w", err)
		}
	}
	switch {
	case f.stallTimeout < 0 || f.stallTimeout > 0 && f.stallTimeout < time.Second:
		return cli.FlagErrorf("", "stall-timeout", f.stallTimeout, "want 0 (never) or at least 1s")
	case f.decodedMiB < 0 || f.decodedMiB > maxBudgetMiB:
		return cli.FlagErrorf("", "decoded-budget", f.decodedMiB, "want 0..%d MiB", maxBudgetMiB)
	case f.compressedMiB < 0 || f.compressedMiB > maxBudgetMiB:
		return cli.FlagErrorf("", "compressed-budget", f.compressedMiB, "want 0..%d MiB", maxBudgetMiB)
	case f.cfg.CheckEvery < 1:
		return cli.FlagErrorf("", "check-every", f.cfg.CheckEvery, "want at least 1")
	case f.cfg.Margin < 0:
		return cli.FlagErrorf("", "margin-us", f.cfg.Margin, "want at least 0")
	case f.epochs < 0:
		return cli.FlagErrorf("", "epochs", f.epochs, "want 0 (--steps alone) or more")
	case f.cfg.ShuffleBuffer < 1:
		return cli.FlagErrorf("", "shuffle-buffer", f.cfg.ShuffleBuffer, "want at least 1")
	case f.cfg.StreamTurns < 1:
		return cli.FlagErrorf("", "stream-turns", f.cfg.StreamTurns, "want at least 1")
	case f.cfg.Streams > 0 && f.cfg.Streams%f.cfg.StreamTurns != 0:
		return cli.FlagErrorf("", "streams", f.cfg.Streams, "want a multiple of --stream-turns %d", f.cfg.StreamTurns)
	case f.cfg.MaxTasks < 0:
		return cli.FlagErrorf("", "max-tasks", f.cfg.MaxTasks, "want 0 (as many as --workers) or more")
	}
	if err := cli.CheckShape(f.cfg.Decode.Frames, f.cfg.Decode.Size); err != nil {
		return err
	}
	if err := checkAudioFlags("", f.cfg.Decode.AudioRate, f.cfg.Decode.AudioChannels); err != nil {
		return err
	}
	if err := checkOutputPaths(f.jsonOut, f.trace); err != nil {
		return err
	}
	for _, t := range []struct {
		flag string
		v    float64
		max  float64
	}{
		{"gpu-step-ms", f.gpuStepMS, maxGPUMS},
		{"gpu-ms-per-sample", f.gpuSampleMS, maxGPUMS},
		{"gpu-ms-per-frame", f.gpuFrameMS, maxGPUMS},
		{"gpu-us-per-token", f.gpuTokenUS, maxGPUTokenUS},
	} {
		// NaN fails both comparisons, so test for the good range.
		if !(t.v >= 0 && t.v <= t.max) {
			return cli.FlagErrorf("", t.flag, t.v, "want a number in 0..%.0f", t.max)
		}
	}
	b, fr := float64(f.cfg.Batch), float64(f.cfg.Decode.Frames)
	if step := f.gpuStepMS + b*(f.gpuSampleMS+fr*f.gpuFrameMS); step > float64(maxGPUStep/time.Millisecond) {
		return cli.Usagef("--gpu-step-ms %v, --gpu-ms-per-sample %v and --gpu-ms-per-frame %v model a step of %.0f h for a batch of %d clips of %d frames: want at most %.0f h",
			f.gpuStepMS, f.gpuSampleMS, f.gpuFrameMS, step/3.6e6, f.cfg.Batch, f.cfg.Decode.Frames, maxGPUStep.Hours())
	}
	ms := func(v float64) time.Duration { return time.Duration(math.Round(v * float64(time.Millisecond))) }
	f.cfg.GPU = gpu.Model{Base: ms(f.gpuStepMS), PerSample: ms(f.gpuSampleMS), PerFrame: ms(f.gpuFrameMS),
		PerToken: time.Duration(math.Round(f.gpuTokenUS * float64(time.Microsecond)))}
	f.cfg.Seed = f.seed
	f.cfg.DecodedBudget = f.decodedMiB << 20
	f.cfg.CompressedBudget = f.compressedMiB << 20
	return nil
}

// checkOutputPaths refuses a --json and a --trace that name the same
// file, however spelled (./x and x, a link to x), where the trace would
// replace the summary, and both writing to standard output (-).
func checkOutputPaths(jsonOut, trace string) error {
	if jsonOut == "" || trace == "" {
		return nil
	}
	if jsonOut == "-" && trace == "-" {
		return cli.Usagef("--json - and --trace - both write to standard output: give one of them a file")
	}
	if jsonOut == "-" || trace == "-" {
		return nil
	}
	same := false
	a, aerr := filepath.Abs(cli.LinkTarget(jsonOut))
	b, berr := filepath.Abs(cli.LinkTarget(trace))
	if aerr == nil && berr == nil && a == b {
		same = true
	} else if as, err := os.Stat(jsonOut); err == nil {
		if bs, err := os.Stat(trace); err == nil && os.SameFile(as, bs) {
			same = true
		}
	}
	if same {
		return cli.Usagef("--json %s and --trace %s are the same file: the trace would replace the summary; give them different paths", jsonOut, trace)
	}
	return nil
}

// stdoutTaken reports whether --json or --trace writes to standard
// output (-), where the table then must not go.
func (f *runFlags) stdoutTaken() bool { return f.jsonOut == "-" || f.trace == "-" }

// defaultStallTimeout is --stall-timeout when not given: 10 minutes, or
// ten GPU steps of a batch of clips when the model makes those longer
// (a step of up to a day is allowed).
func (f *runFlags) defaultStallTimeout() time.Duration {
	step := f.cfg.GPU.StepTime(gpu.Contents{Samples: f.cfg.Batch, Frames: f.cfg.Batch * f.cfg.Decode.Frames})
	return max(10*time.Minute, 10*step)
}

// checkpointWarning says why a --checkpoint-dir will get no checkpoint
// (no --checkpoint-every, or one beyond --steps), which a later --resume
// would find out; "" when checkpoints will be saved, or when the run
// resumes (a resumed run need not save more).
func checkpointWarning(f *runFlags) string {
	c := f.cfg
	switch {
	case c.CheckpointDir == "" || c.Resume || loader.SavesCheckpoints(c):
		return ""
	case c.CheckpointEvery == 0:
		return fmt.Sprintf("--checkpoint-dir %s: no checkpoint will be written (--checkpoint-every 0)", c.CheckpointDir)
	}
	return fmt.Sprintf("--checkpoint-dir %s: no checkpoint will be written (--checkpoint-every %d steps, beyond --steps %d)",
		c.CheckpointDir, c.CheckpointEvery, c.Steps)
}

// runSettings are the flags every rank of the job must share
// (agree.Agree): the ones that decide which collectives a rank calls and
// which samples it reads (the dataset itself is compared once open), and
// every one that changes what is trained or how it is timed (the clip
// shape, the simulated GPU, the decode workers and budgets, the
// planning), which the summary reports once, as rank 0's, for the job.
// Where the data, the cache, the checkpoints and the outputs are, the
// stall timeout, --checkpoint-keep and --quiet may differ.
func runSettings(f *runFlags) []agree.Setting {
	names := make([]string, len(f.loaders))
	for i, k := range f.loaders {
		names[i] = k.String()
	}
	float := func(name string, v float64) agree.Setting {
		return agree.Setting{Name: name, Value: math.Float64bits(v), Hashed: true, Text: strconv.FormatFloat(v, 'g', -1, 64)}
	}
	// As the runtime resolves them: --horizon 0 and --horizon 8 are the
	// same with one worker. (The flags were checked before MPI started.)
	r, err := loader.Resolved(f.cfg)
	if err != nil {
		r = f.cfg
	}
	return []agree.Setting{
		{Name: "--loader", Value: agree.HashStrings(names), Hashed: true, Text: strings.Join(names, ",")},
		{Name: "--steps", Value: uint64(f.cfg.Steps)},
		{Name: "--batch", Value: uint64(f.cfg.Batch)},
		{Name: "--seed", Value: f.seed},
		{Name: "--streams (0 is min(shards, global batch))", Value: uint64(f.cfg.Streams)},
		{Name: "--stream-turns", Value: uint64(f.cfg.StreamTurns)},
		{Name: "--shuffle-buffer", Value: uint64(f.cfg.ShuffleBuffer)},
		{Name: "--epochs", Value: uint64(f.epochs)},
		{Name: "--audio-rate", Value: uint64(f.cfg.Decode.AudioRate)},
		{Name: "--audio-channels", Value: uint64(f.cfg.Decode.AudioChannels)},
		{Name: "--check-every", Value: uint64(f.cfg.CheckEvery)},
		{Name: "--margin-us", Value: uint64(f.cfg.Margin)},
		{Name: "--checkpoint-every", Value: uint64(f.cfg.CheckpointEvery)},
		{Name: "--resume (0 false, 1 true, 2 auto)", Value: uint64(f.resume)},
		{Name: "--data (1 given, 0 the default dataset)", Value: map[bool]uint64{true: 1}[f.data != ""]},
		// After --data, which decides its default: that one differs says more.
		{Name: "--repeat", Value: uint64(f.repeat)},
		{Name: "--frames", Value: uint64(f.cfg.Decode.Frames)},
		{Name: "--size", Value: uint64(f.cfg.Decode.Size)},
		{Name: "--check-hashes (1 on, 0 off)", Value: map[bool]uint64{true: 1}[f.cfg.Decode.CheckHashes]},
		transformSetting(f.cfg.Decode.Transform),
		float("--gpu-step-ms", f.gpuStepMS),
		float("--gpu-ms-per-sample", f.gpuSampleMS),
		float("--gpu-ms-per-frame", f.gpuFrameMS),
		float("--gpu-us-per-token", f.gpuTokenUS),
		{Name: "--workers", Value: uint64(f.cfg.Workers)},
		{Name: "--horizon (0 is max(2 x workers, 8))", Value: uint64(r.Horizon)},
		{Name: "--max-tasks (0 is workers)", Value: uint64(r.MaxTasks)},
		{Name: "--decoded-budget (bytes; 0 is horizon x batch clips)", Value: uint64(r.DecodedBudget)},
		{Name: "--compressed-budget (bytes; 0 is 1024 MiB)", Value: uint64(r.CompressedBudget)},
	}
}
