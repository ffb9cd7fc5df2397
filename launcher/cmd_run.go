package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/datahelix/datahelix/bench"
	"github.com/datahelix/datahelix/collective"
	"github.com/datahelix/datahelix/decode"
	"github.com/datahelix/datahelix/decode/gen"
	"github.com/datahelix/datahelix/gpu"
	"github.com/datahelix/datahelix/plan"
	"github.com/datahelix/datahelix/spmd"
)

func init() {
	register(command{
		name:    "run",
		summary: "the main job: train with a simulated GPU, comparing loaders on the same data",
		run:     runRun,
	})
}

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
	ks, err := spmd.ParseKinds(v)
	if err != nil {
		return err
	}
	for _, k := range ks {
		if slices.Contains(*l, k) {
			return fmt.Errorf("loader %s given twice", k)
		}
	}
	*l = append(*l, ks...)
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
	resume         autoBool
	stallTimeout   time.Duration
	args           []string // as given, for the --json record
}

func (f *runFlags) register(fs *flag.FlagSet) {
	f.world.register(fs)
	fs.StringVar(&f.data, "data", "", "`path` of the dataset: a directory of WebDataset tar shards or a glob (default: the embedded default dataset, generated once into the cache)")
	fs.StringVar(&f.cacheDir, "cache-dir", "", "`dir`ectory for the default dataset and shard indexes"+cacheDirDefault)
	fs.Var(&f.loaders, "loader", "loader(s) to run, in order, repeatable or a comma list: torch, local, static, helix, helix-nogate (default torch,helix)")
	fs.IntVar(&f.cfg.Batch, "batch", 4, fmt.Sprintf("per-rank batch size `B`, 1..%d", plan.MaxBatch))
	fs.IntVar(&f.cfg.Steps, "steps", 60, "training `steps` per loader")
	fs.IntVar(&f.cfg.Workers, "workers", 1, "decode workers `W` per rank")
	fs.IntVar(&f.cfg.Horizon, "horizon", 0, "planning horizon `H` in steps (default max(2 x workers, 8): never less than PyTorch's prefetch looks)")
	shapeFlags(fs, &f.cfg.Decode.Frames, &f.cfg.Decode.Size)
	fs.BoolVar(&f.cfg.Decode.CheckHashes, "check-hashes", false, checkHashesUsage)
	fs.Uint64Var(&f.seed, "seed", 1, "`seed` of the sample order (and of the default dataset's content)")
	fs.Float64Var(&f.gpuStepMS, "gpu-step-ms", 120, "simulated GPU: base step time in `ms`. The default, with 1 ms per frame, makes a step of about 152 ms on the default dataset, whose samples need about 228 ms of decode CPU per global step: 2 cores give about 1.3x that before the rest of the job (MPI, reading, the simulated GPUs) takes its share, but the rank reading the heavy video shard needs about 160 ms a step on its one worker, more than a step")
	fs.Float64Var(&f.gpuSampleMS, "gpu-ms-per-sample", 0, "simulated GPU: `ms` per sample of the batch")
	fs.Float64Var(&f.gpuFrameMS, "gpu-ms-per-frame", 1, "simulated GPU: `ms` per decoded frame or image of the batch")
	fs.Float64Var(&f.gpuTokenUS, "gpu-us-per-token", 0, "simulated GPU: `µs` per text token of the batch")
	fs.Int64Var(&f.decodedMiB, "decoded-budget", 0, fmt.Sprintf("`MiB` of decoded samples a rank may hold ahead of the GPU, at most %d (0: horizon x batch clips)", maxBudgetMiB))
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
	fs.DurationVar(&f.stallTimeout, "stall-timeout", 0, "abort the job when a rank delivers no step for this `duration` (a rank that makes no progress holds every other in the next collective); 0: never; unless given, 10 minutes or ten GPU steps of a batch of clips, whichever is longer")
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
	f.cfg.Resume, f.cfg.ResumeIfAny = f.resume != autoFalse, f.resume == autoAuto
	f.cfg.JobLoaders = f.loaders
	for _, k := range f.loaders {
		// What the runtime refuses (batch, steps, workers, horizon,
		// checkpoints, the loader), refused here before MPI starts.
		c := f.cfg
		c.Loader = k
		if err := c.Check(); err != nil {
			return usagef("%v", err)
		}
	}
	switch {
	case f.stallTimeout < 0 || f.stallTimeout > 0 && f.stallTimeout < time.Second:
		return usagef("--stall-timeout %v: want 0 (never) or at least 1s", f.stallTimeout)
	case f.decodedMiB < 0 || f.decodedMiB > maxBudgetMiB:
		return usagef("--decoded-budget %d: want 0..%d MiB", f.decodedMiB, maxBudgetMiB)
	case f.compressedMiB < 0 || f.compressedMiB > maxBudgetMiB:
		return usagef("--compressed-budget %d: want 0..%d MiB", f.compressedMiB, maxBudgetMiB)
	case f.cfg.CheckEvery < 1:
		return usagef("--check-every %d: want at least 1", f.cfg.CheckEvery)
	case f.cfg.Margin < 0:
		return usagef("--margin-us %d: want at least 0", f.cfg.Margin)
	case f.cfg.MaxTasks < 0:
		return usagef("--max-tasks %d: want 0 (as many as --workers) or more", f.cfg.MaxTasks)
	}
	if err := checkShape(f.cfg.Decode.Frames, f.cfg.Decode.Size); err != nil {
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
		{"--gpu-step-ms", f.gpuStepMS, maxGPUMS},
		{"--gpu-ms-per-sample", f.gpuSampleMS, maxGPUMS},
		{"--gpu-ms-per-frame", f.gpuFrameMS, maxGPUMS},
		{"--gpu-us-per-token", f.gpuTokenUS, maxGPUTokenUS},
	} {
		// NaN fails both comparisons, so test for the good range.
		if !(t.v >= 0 && t.v <= t.max) {
			return usagef("%s %v: want a number in 0..%.0f", t.flag, t.v, t.max)
		}
	}
	b, fr := float64(f.cfg.Batch), float64(f.cfg.Decode.Frames)
	if step := f.gpuStepMS + b*(f.gpuSampleMS+fr*f.gpuFrameMS); step > float64(maxGPUStep/time.Millisecond) {
		return usagef("--gpu-step-ms %v, --gpu-ms-per-sample %v and --gpu-ms-per-frame %v model a step of %.0f h for a batch of %d clips of %d frames: want at most %.0f h",
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
		return usagef("--json - and --trace - both write to standard output: give one of them a file")
	}
	if jsonOut == "-" || trace == "-" {
		return nil
	}
	same := false
	a, aerr := filepath.Abs(linkTarget(jsonOut))
	b, berr := filepath.Abs(linkTarget(trace))
	if aerr == nil && berr == nil && a == b {
		same = true
	} else if as, err := os.Stat(jsonOut); err == nil {
		if bs, err := os.Stat(trace); err == nil && os.SameFile(as, bs) {
			same = true
		}
	}
	if same {
		return usagef("--json %s and --trace %s are the same file: the trace would replace the summary; give them different paths", jsonOut, trace)
	}
	return nil
}

// stdoutTaken reports whether --json or --trace writes to standard
// output (-), where the table then must not go.
func (f *runFlags) stdoutTaken() bool { return f.jsonOut == "-" || f.trace == "-" }

func runRun(ctx context.Context, stdout, stderr io.Writer, args []string) error {
	var f runFlags
	fs := newFlags("run", "[flags]")
	f.register(fs)
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	if err := f.validate(); err != nil {
		return err
	}
	f.args = append([]string{"run"}, args...)
	if len(setFlags(fs, []string{"stall-timeout"})) == 0 {
		f.stallTimeout = f.defaultStallTimeout()
	}
	return runWorld(ctx, f.world, stdout, stderr, func(ctx context.Context, c collective.Comm, out, errOut io.Writer) error {
		return runJob(ctx, c, &f, out, errOut)
	})
}

// defaultStallTimeout is --stall-timeout when not given: 10 minutes, or
// ten GPU steps of a batch of clips when the model makes those longer
// (a step of up to a day is allowed).
func (f *runFlags) defaultStallTimeout() time.Duration {
	step := f.cfg.GPU.StepTime(gpu.Contents{Samples: f.cfg.Batch, Frames: f.cfg.Batch * f.cfg.Decode.Frames})
	return max(10*time.Minute, 10*step)
}

// cacheDirDefault ends the help of every --cache-dir: where
// decode.DefaultCacheDir looks (a relative $XDG_CACHE_HOME counts as unset,
// as os.UserCacheDir has it).
const cacheDirDefault = " (default $DATAHELIX_CACHE, else $XDG_CACHE_HOME/datahelix, else ~/.cache/datahelix, else datahelix-cache in the temporary directory)"

// cacheRoot is where the default dataset and shard indexes live: the
// --cache-dir flag, else decode.DefaultCacheDir.
func cacheRoot(flagDir string) string {
	if flagDir != "" {
		return flagDir
	}
	return decode.DefaultCacheDir()
}

// defaultDataset makes sure the default dataset exists: the first local
// rank of every node generates it once (deterministically, into a
// temporary directory renamed into place), the others wait.
func defaultDataset(ctx context.Context, c collective.Comm, root string, seed uint64, log io.Writer) (string, error) {
	dir := filepath.Join(root, gen.CacheName(fmt.Sprintf("default-seed%d", seed)))
	var genErr error
	if c.Info().LocalRank == 0 {
		if !gen.Current(dir) {
			genErr = generateDefault(ctx, dir, seed, log, c.Rank() == 0)
		}
	}
	// Every rank learns whether any node failed, so none proceeds alone.
	if err := agreeOnError(c, genErr, "failed"); err != nil {
		return "", err
	}
	return dir, nil
}

// firstFailedRank tells every rank the lowest rank whose failed is true,
// or -1 when no rank failed, so that the ranks agree on whether to go on
// and on which one reports why. Every rank must call it.
func firstFailedRank(c collective.Comm, failed bool) (int, error) {
	first := []int64{int64(c.Size())}
	if failed {
		first[0] = int64(c.Rank())
	}
	if err := c.AllreduceInt64(first, collective.OpMin); err != nil {
		return 0, err
	}
	if first[0] == int64(c.Size()) {
		return -1, nil
	}
	return int(first[0]), nil
}

func generateDefault(ctx context.Context, dir string, seed uint64, log io.Writer, talk bool) error {
	cfg := gen.Default("")
	cfg.Seed = seed
	if talk {
		fmt.Fprintf(log, "datahelix: generating the default dataset (%s, %d samples in %d shards) into %s, once\n",
			cfg.Preset, cfg.Samples, cfg.Shards, dir)
		cfg.Waiting = func() {
			fmt.Fprintf(log, "datahelix: another job is generating it: waiting for that job\n")
		}
	}
	t0 := time.Now()
	var made bool
	err := withAllCPUs(func(cpus int) error {
		cfg.Workers = cpus
		var err error
		made, err = gen.Ensure(ctx, cfg, dir)
		return err
	})
	if err != nil {
		return fmt.Errorf("generate the default dataset: %w", err)
	}
	if talk && made {
		fmt.Fprintf(log, "datahelix: default dataset ready in %.1fs\n", time.Since(t0).Seconds())
	} else if talk {
		fmt.Fprintf(log, "datahelix: default dataset ready in %.1fs (another job generated it)\n", time.Since(t0).Seconds())
	}
	return nil
}

// testRankGPU is nil but in tests, which set it to change one rank's
// simulated GPU after the ranks have agreed on their flags: a rank made
// busy outside MPI on purpose, as the --gpu-* flags, which must agree,
// no longer can.
var testRankGPU func(rank int, m gpu.Model) gpu.Model

// runJob is the body every rank runs.
func runJob(ctx context.Context, c collective.Comm, f *runFlags, out, errOut io.Writer) error {
	// First, so that every rank calls the same collectives after it.
	if err := spmd.Agree(c, runSettings(f)); err != nil {
		return err
	}
	if testRankGPU != nil {
		f.cfg.GPU = testRankGPU(c.Rank(), f.cfg.GPU)
	}
	outs, err := prepareOutputs(c, f)
	if err != nil {
		return err
	}
	defer outs.discard()
	if c.Rank() == 0 {
		if w := checkpointWarning(f); w != "" {
			fmt.Fprintf(errOut, "datahelix: warning: %s\n", w)
		}
	}
	root := cacheRoot(f.cacheDir)
	data := f.data
	if data == "" {
		var err error
		if data, err = defaultDataset(ctx, c, root, f.seed, errOut); err != nil {
			return err
		}
	}
	// A node may see the data differently (node-local copies, a stale
	// view of a shared file system): the ranks agree before going on.
	// Each rank indexes its own run of the shards first, so that on a
	// cold index cache the ranks share the work of building it.
	ds, err := decode.OpenDatasetPart(data, decode.IndexCacheDir(root), c.Rank(), c.Size())
	if err == nil {
		defer ds.Close()
	}
	if err := agreeOnError(c, err, "cannot open the dataset"); err != nil {
		return err
	}
	if err := spmd.AgreeDataset(c, ds); err != nil {
		return err
	}
	// What would fail a later loader (the shards' split over the ranks,
	// the checkpoints of each loader) fails the job now, before any
	// loader trains.
	if err := spmd.CheckJob(c, ds, f.cfg, f.loaders); err != nil {
		return err
	}
	if c.Rank() == 0 {
		sizes := make([]int, len(ds.Shards))
		for i, sh := range ds.Shards {
			sizes[i] = sh.Len()
		}
		if w := spmd.SplitWarning(sizes, c.Size(), f.cfg.Batch); w != "" {
			fmt.Fprintf(errOut, "datahelix: warning: %s\n", w)
		}
	}
	var bar *progressbar.ProgressBar
	if c.Rank() == 0 && !f.quiet {
		if isTerminal(errOut) {
			bar = newBar(errOut, len(f.loaders)*f.cfg.Steps, "training")
		}
	}
	watch := watchStalls(c, f.stallTimeout)
	defer watch.stop()
	wc := watch.watched(c) // one slot of the watch for every loader's run
	var results []spmd.Summary
	var trace []traceLine
	// This rank's delivered and dropped samples, per loader: summed over
	// the ranks after the last loader, they decide the job's exit.
	counts := make([]int64, 0, 2*len(f.loaders))
	samples := spmd.NewSampleLog() // a bad sample is logged once, not per loader
	for _, k := range f.loaders {
		cfg := f.cfg
		cfg.Loader = k
		cfg.Log, cfg.SampleLog = errOut, samples
		watch.start(k.String())
		cfg.Progress = func(step int64) {
			watch.delivered(step)
			if bar != nil {
				bar.Add(1)
			}
		}
		if bar != nil {
			bar.Describe(k.String())
		}
		res, err := spmd.Run(ctx, wc, ds, cfg)
		if err != nil {
			return fmt.Errorf("loader %s: %w", k, err)
		}
		counts = append(counts, ownSamples(res.Records, c.Rank())...)
		if c.Rank() == 0 {
			results = append(results, res.Summary)
			for _, r := range res.Records {
				trace = append(trace, traceLine{Loader: k.String(), StepRecord: r})
			}
		}
	}
	watch.stop() // writing the outputs is no step
	if bar != nil {
		bar.Finish()
	}
	// One collective every rank calls: the job's totals, the same on
	// every rank, so that all come to the same exit.
	if err := c.AllreduceInt64(counts, collective.OpSum); err != nil {
		return err
	}
	failed := allDroppedError(f.loaders, counts)
	if c.Rank() != 0 {
		return failed
	}
	table := out
	if f.stdoutTaken() {
		table = errOut // standard output holds --json or --trace
	}
	printTable(table, results, c.Size(), f)
	job := &jobInfo{Args: f.args, Data: data, Seed: f.seed, Frames: f.cfg.Decode.Frames, Size: f.cfg.Decode.Size,
		Workers: f.cfg.Workers, MPI: c.Info().Library, Machine: bench.ThisMachine(ctx), Ended: time.Now().UTC().Format(time.RFC3339)}
	job.MPIWait, job.MPIParts, _ = mpiBinding(c)
	// The figures of a failed job are written too: they say how it failed.
	if err := outs.write(out, results, job, trace); err != nil {
		return err
	}
	return failed
}

// ownSamples returns the samples delivered and dropped by rank in
// records (rank 0's Result holds every rank's).
func ownSamples(records []spmd.StepRecord, rank int) []int64 {
	var delivered, dropped int64
	for _, r := range records {
		if r.Rank == rank {
			delivered += int64(r.Samples)
			dropped += int64(r.Dropped)
		}
	}
	return []int64{delivered, dropped}
}

// allDroppedError fails a job in which some loader delivered no sample
// at all and dropped some (every sample failed to decode: a dataset of
// members the decoder does not read, a broken codec), which trained on
// nothing and would otherwise exit as a success with no deadline miss.
// counts holds each loader's job-wide delivered and dropped samples in
// turn. A loader that dropped only some samples does not fail the job:
// the summary counts them. The error is marked AllRanks: every rank has
// the same totals and returns it, and rank 0 prints it.
func allDroppedError(loaders []spmd.Kind, counts []int64) error {
	var which []string
	for i, k := range loaders {
		if delivered, dropped := counts[2*i], counts[2*i+1]; delivered == 0 && dropped > 0 {
			which = append(which, fmt.Sprintf("loader %s dropped all %d samples", k, dropped))
		}
	}
	if len(which) == 0 {
		return nil
	}
	return collective.AllRanks(fmt.Errorf("%s: none decoded, so nothing trained (the ranks' \"dropping sample\" lines say why)",
		strings.Join(which, ", ")))
}

// checkpointWarning says why a --checkpoint-dir will get no checkpoint
// (no --checkpoint-every, or one beyond --steps), which a later --resume
// would find out; "" when checkpoints will be saved, or when the run
// resumes (a resumed run need not save more).
func checkpointWarning(f *runFlags) string {
	c := f.cfg
	switch {
	case c.CheckpointDir == "" || c.Resume || c.SavesCheckpoints():
		return ""
	case c.CheckpointEvery == 0:
		return fmt.Sprintf("--checkpoint-dir %s: no checkpoint will be written (--checkpoint-every 0)", c.CheckpointDir)
	}
	return fmt.Sprintf("--checkpoint-dir %s: no checkpoint will be written (--checkpoint-every %d steps, beyond --steps %d)",
		c.CheckpointDir, c.CheckpointEvery, c.Steps)
}

// jobInfo says what produced a run's figures, so that a result file can
// be compared with another and the run repeated: the command line as
// given, the dataset and the settings its defaults filled in, the MPI
// library, and rank 0's machine and the commit of the code.
type jobInfo struct {
	Args    []string `json:"args"`
	Data    string   `json:"data"`
	Seed    uint64   `json:"seed"`
	Frames  int      `json:"frames"`
	Size    int      `json:"size"`
	Workers int      `json:"workers"`
	MPI     string   `json:"mpi"`
	// MPIWait and MPIParts are how rank 0's MPI binding waited and sent
	// (DATAHELIX_MPI_WAIT, DATAHELIX_MPI_PARTS as in effect); empty in an
	// in-process world.
	MPIWait  string        `json:"mpi_wait,omitempty"`
	MPIParts string        `json:"mpi_parts,omitempty"`
	Machine  bench.Machine `json:"machine"`
	Ended    string        `json:"ended"` // UTC, RFC 3339
}

// runSummary is one loader's object in --json: its summary and, under
// "job", what produced it.
type runSummary struct {
	spmd.Summary
	Job *jobInfo
}

// MarshalJSON writes the summary's fields (by its own MarshalJSON,
// which an embedding struct would otherwise take whole) and "job".
func (r runSummary) MarshalJSON() ([]byte, error) {
	sum, err := json.Marshal(r.Summary)
	if err != nil {
		return nil, err
	}
	job, err := json.Marshal(r.Job)
	if err != nil {
		return nil, err
	}
	out := append(sum[:len(sum)-1:len(sum)-1], `,"job":`...)
	return append(append(out, job...), '}'), nil
}

// runOutputs are the files rank 0 writes at the end of a run, checked
// before it starts (prepareOutputs) so that a bad path fails at once,
// and written, a new file created, only after a successful run (write).
type runOutputs struct {
	outputFiles
	json, trace *outputFile
	// jsonStdout and traceStdout send --json or --trace to standard
	// output (-) instead of a file.
	jsonStdout, traceStdout bool
}

// fileOutput is the file an output flag names: "" for none, and for
// standard output (-), which is not opened.
func fileOutput(path string) string {
	if path == "-" {
		return ""
	}
	return path
}

// prepareOutputs checks --json and --trace on rank 0 (open) and creates
// --checkpoint-dir on every rank (each writes its own checkpoints) before
// any work, so a path that cannot be written ends the job at start-up
// instead of after hours of training. The ranks agree on the outcome
// (agreeOnError): rank 0 prints the lowest failing rank's error and the
// job ends cleanly.
func prepareOutputs(c collective.Comm, f *runFlags) (*runOutputs, error) {
	o, err := openOutputs(c.Rank() == 0, f)
	if err := agreeOnError(c, err, "cannot write its output files"); err != nil {
		o.discard()
		return nil, err
	}
	return o, nil
}

// agreeOnError has the ranks agree on whether any of them got an error
// where only some may (a path one node cannot write, a dataset one node
// sees differently), so that the job ends cleanly instead of the failing
// ranks leaving while the others wait in their next collective. When
// some rank failed, every rank returns the same AllRanks error, which
// rank 0 prints: "rank 3 cannot open the dataset: <rank 3's error>",
// and how many other ranks failed. (The failing rank printing its own
// error left rank 0's line, which mpirun may forward first, pointing at
// a message "above" that was not there yet.) Every rank must call it;
// when none failed it costs one collective.
func agreeOnError(c collective.Comm, err error, what string) error {
	failed, aerr := firstFailedRank(c, err != nil)
	switch {
	case aerr != nil:
		return aerr
	case failed < 0:
		return nil
	}
	// Each failing rank sends its error, the others nothing; the first
	// byte says whether it came from a cancellation (a signal), which
	// the other ranks' errors must then match too (stopReason, exit
	// status 130 or 143).
	var mine []byte
	switch {
	case errors.Is(err, context.Canceled):
		mine = append([]byte{'c'}, err.Error()...)
	case err != nil:
		mine = append([]byte{'!'}, err.Error()...)
	}
	msgs, gerr := c.AllgatherVar(mine)
	if gerr != nil {
		return gerr
	}
	others := -1
	for _, m := range msgs {
		if len(m) > 0 {
			others++
		}
	}
	also := ""
	switch {
	case others == 1:
		also = " (and 1 more rank failed)"
	case others > 1:
		also = fmt.Sprintf(" (and %d more ranks failed)", others)
	}
	if c.Rank() == failed { // keep the chain: errors.Is still sees the cause
		return collective.AllRanks(fmt.Errorf("rank %d %s: %w%s", failed, what, err, also))
	}
	theirs := remoteError{text: string(msgs[failed][1:])}
	if msgs[failed][0] == 'c' {
		theirs.cause = context.Canceled
	}
	return collective.AllRanks(fmt.Errorf("rank %d %s: %w%s", failed, what, theirs, also))
}

// remoteError is another rank's error, as text, and whether it came
// from a cancellation (cause context.Canceled).
type remoteError struct {
	text  string
	cause error
}

func (e remoteError) Error() string { return e.text }
func (e remoteError) Unwrap() error { return e.cause }

// runSettings are the flags every rank of the job must share
// (spmd.Agree): the ones that decide which collectives a rank calls and
// which samples it reads (the dataset itself is compared once open), and
// every one that changes what is trained or how it is timed (the clip
// shape, the simulated GPU, the decode workers and budgets, the
// planning), which the summary reports once, as rank 0's, for the job.
// Where the data, the cache, the checkpoints and the outputs are, the
// stall timeout, --checkpoint-keep and --quiet may differ.
func runSettings(f *runFlags) []spmd.Setting {
	names := make([]string, len(f.loaders))
	for i, k := range f.loaders {
		names[i] = k.String()
	}
	float := func(name string, v float64) spmd.Setting {
		return spmd.Setting{Name: name, Value: math.Float64bits(v), Hashed: true, Text: strconv.FormatFloat(v, 'g', -1, 64)}
	}
	// As the runtime resolves them: --horizon 0 and --horizon 8 are the
	// same with one worker. (The flags were checked before MPI started.)
	r, err := f.cfg.Resolved()
	if err != nil {
		r = f.cfg
	}
	return []spmd.Setting{
		{Name: "--loader", Value: spmd.HashStrings(names), Hashed: true, Text: strings.Join(names, ",")},
		{Name: "--steps", Value: uint64(f.cfg.Steps)},
		{Name: "--batch", Value: uint64(f.cfg.Batch)},
		{Name: "--seed", Value: f.seed},
		{Name: "--check-every", Value: uint64(f.cfg.CheckEvery)},
		{Name: "--margin-us", Value: uint64(f.cfg.Margin)},
		{Name: "--checkpoint-every", Value: uint64(f.cfg.CheckpointEvery)},
		{Name: "--resume (0 false, 1 true, 2 auto)", Value: uint64(f.resume)},
		{Name: "--data (1 given, 0 the default dataset)", Value: map[bool]uint64{true: 1}[f.data != ""]},
		{Name: "--frames", Value: uint64(f.cfg.Decode.Frames)},
		{Name: "--size", Value: uint64(f.cfg.Decode.Size)},
		{Name: "--check-hashes (1 on, 0 off)", Value: map[bool]uint64{true: 1}[f.cfg.Decode.CheckHashes]},
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

// openOutputs opens this rank's outputs: --json and --trace when files
// is set (on rank 0) and they name files, not standard output (-), and
// it checks that --checkpoint-dir can be written
// when checkpoints are on. On an error it still returns what it opened,
// for discard.
func openOutputs(files bool, f *runFlags) (*runOutputs, error) {
	o := &runOutputs{}
	if files {
		var err error
		if o.json, err = o.open("--json", fileOutput(f.jsonOut)); err != nil {
			return o, err
		}
		if o.trace, err = o.open("--trace", fileOutput(f.trace)); err != nil {
			return o, err
		}
		o.jsonStdout, o.traceStdout = f.jsonOut == "-", f.trace == "-"
	}
	if f.cfg.CheckpointEvery > 0 {
		return o, checkWritableDir("--checkpoint-dir", f.cfg.CheckpointDir)
	}
	return o, nil
}

// write replaces the files' contents with the results of a successful
// run, the summaries in --json and the records in --trace, or writes
// them to stdout for -, and closes the files.
func (o *runOutputs) write(stdout io.Writer, results []spmd.Summary, job *jobInfo, trace []traceLine) error {
	if o.json != nil || o.jsonStdout {
		if err := replaceOutput(o.json, stdout, func(w io.Writer) error { return writeJSON(w, results, job) }); err != nil {
			return fmt.Errorf("--json: %w", err)
		}
	}
	if o.trace != nil || o.traceStdout {
		if err := replaceOutput(o.trace, stdout, func(w io.Writer) error { return writeTrace(w, trace) }); err != nil {
			return fmt.Errorf("--trace: %w", err)
		}
	}
	return o.close()
}

// replaceOutput has write fill f (replace), or stdout when f is nil.
func replaceOutput(f *outputFile, stdout io.Writer, write func(io.Writer) error) error {
	if f == nil {
		return write(stdout)
	}
	return f.replace(write)
}

// discard closes the files of a failed run.
func (o *runOutputs) discard() {
	if o != nil {
		o.outputFiles.discard()
	}
}

type traceLine struct {
	Loader string `json:"loader"`
	spmd.StepRecord
}

// writeJSON writes the summaries to w, each with the job's record.
func writeJSON(w io.Writer, results []spmd.Summary, job *jobInfo) error {
	list := make([]runSummary, len(results))
	for i, r := range results {
		list[i] = runSummary{Summary: r, Job: job}
	}
	data, err := json.MarshalIndent(list, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(data, '\n'))
	return err
}

// writeTrace writes one JSON line per record to out.
func writeTrace(out io.Writer, lines []traceLine) error {
	w := bufio.NewWriter(out)
	enc := json.NewEncoder(w)
	for _, l := range lines {
		if err := enc.Encode(l); err != nil {
			return err
		}
	}
	return w.Flush()
}

// printTable prints the loaders side by side, then how the last loader
// compares with the first (helix against torch by default).
func printTable(w io.Writer, rs []spmd.Summary, ranks int, f *runFlags) {
	if len(rs) == 0 {
		return
	}
	fmt.Fprintf(w, "\n%d ranks x %d workers, batch %d per rank, %d steps, F=%d S=%d\n",
		ranks, f.cfg.Workers, f.cfg.Batch, f.cfg.Steps, f.cfg.Decode.Frames, f.cfg.Decode.Size)
	for _, s := range rs {
		if s.FirstStep > 0 {
			fmt.Fprintf(w, "loader %s resumed at step %d: its figures and batches hash cover steps %d-%d only\n",
				s.Loader, s.FirstStep, s.FirstStep, s.FirstStep+s.Steps-1)
		}
	}
	row := func(name string, val func(s spmd.Summary) string) {
		fmt.Fprintf(w, "%-22s", name)
		for _, s := range rs {
			fmt.Fprintf(w, " %14s", val(s))
		}
		fmt.Fprintln(w)
	}
	row("loader", func(s spmd.Summary) string { return s.Loader })
	row("deadline misses", func(s spmd.Summary) string { return fmt.Sprintf("%d (%.1f%%)", s.Misses, 100*s.MissRate) })
	// The mean rank's wait, so that seconds / wall time gives the fraction
	// beside it (the JSON's gpu_wait_s is summed over ranks).
	row("GPU wait per rank", func(s spmd.Summary) string {
		return fmt.Sprintf("%.2fs (%.1f%%)", s.GPUWaitS/float64(max(s.Ranks, 1)), 100*s.GPUWaitFrac)
	})
	row("throughput", func(s spmd.Summary) string { return fmt.Sprintf("%.1f samples/s", s.ThroughputSPS) })
	row("wall time", func(s spmd.Summary) string { return fmt.Sprintf("%.2fs", s.WallS) })
	warm := rs[0].WarmupSteps
	// A loader with no step after the warm-up (a resumed one may have
	// few) shows n/a there; the rows show when any loader has one.
	steady := func(s spmd.Summary) bool { return s.Steps > s.WarmupSteps }
	if slices.ContainsFunc(rs, steady) {
		steadyRow := func(name string, val func(s spmd.Summary) string) {
			row(name, func(s spmd.Summary) string {
				if !steady(s) {
					return "n/a"
				}
				return val(s)
			})
		}
		steadyRow(fmt.Sprintf("after %d steps: misses", warm), func(s spmd.Summary) string { return fmt.Sprintf("%.1f%%", 100*s.SteadyMissRate) })
		steadyRow("             GPU wait", func(s spmd.Summary) string { return fmt.Sprintf("%.1f%%", 100*s.SteadyGPUWaitFrac) })
		steadyRow("             throughput", func(s spmd.Summary) string { return fmt.Sprintf("%.1f samples/s", s.SteadyThroughputSPS) })
	}
	row("moved per step", func(s spmd.Summary) string { return fmt.Sprintf("%.0f KiB", s.BytesMovedPerStep/1024) })
	row("plan p50", func(s spmd.Summary) string { return fmt.Sprintf("%.0f µs", s.PlanUSP50) })
	row("allgather p50", func(s spmd.Summary) string { return fmt.Sprintf("%.0f µs", s.AllgatherUSP50) })
	row("cost model MAPE", func(s spmd.Summary) string {
		if s.CostMAPE == nil {
			return "n/a"
		}
		return fmt.Sprintf("%.1f%%", 100**s.CostMAPE)
	})
	row("dropped samples", func(s spmd.Summary) string { return fmt.Sprint(s.DroppedSamples) })
	row("damaged samples", func(s spmd.Summary) string { return fmt.Sprint(s.DamagedSamples) })
	row("peak RSS", func(s spmd.Summary) string { return fmt.Sprintf("%.0f MiB", float64(s.PeakRSSBytes)/(1<<20)) })
	row("batches hash", func(s spmd.Summary) string { return s.BatchesHash })
	if len(rs) > 1 {
		a, b := rs[0], rs[len(rs)-1]
		fmt.Fprintf(w, "\n%s vs %s: %s, %s, throughput %.2fx\n", b.Loader, a.Loader,
			change("misses", a.MissRate, b.MissRate), change("GPU wait", a.GPUWaitFrac, b.GPUWaitFrac), b.ThroughputSPS/max(a.ThroughputSPS, 1e-9))
		if a.FirstStep != b.FirstStep {
			fmt.Fprintf(w, "(over different steps: %s from step %d, %s from step %d)\n", a.Loader, a.FirstStep, b.Loader, b.FirstStep)
		}
		switch left := min(a.Steps, b.Steps) - warm; {
		case !steady(a) || !steady(b):
		case left < minCompareSteps:
			fmt.Fprintf(w, "after the first %d steps (the warm-up, one planning horizon): %d steps, too few to compare (run more --steps)\n", warm, left)
		default:
			fmt.Fprintf(w, "after the first %d steps (the warm-up, one planning horizon): %s, %s, throughput %.2fx\n", warm,
				change("misses", a.SteadyMissRate, b.SteadyMissRate), change("GPU wait", a.SteadyGPUWaitFrac, b.SteadyGPUWaitFrac),
				b.SteadyThroughputSPS/max(a.SteadyThroughputSPS, 1e-9))
		}
	}
}

// minCompareSteps is the fewest steps after the warm-up for which the
// table compares the loaders' steady-state figures: over one or two steps
// the ratio of two tiny waits is noise.
const minCompareSteps = 5

// change says how the fraction named went from a to b, with both
// values, "GPU wait 0.7% → 1.4% (+100.0%)": a relative change alone
// reads as a verdict even when both are a small part of the wall time.
// The change is that of the values as printed (to 0.1 %), so that the
// line never says "0.1% → 0.1% (+100.0%)".
func change(name string, a, b float64) string {
	// As the table prints it (%.1f of the percentage, which rounds a
	// half to even: 0.2625 is 26.2%), not math.Round's half up.
	round := func(x float64) float64 {
		v, _ := strconv.ParseFloat(strconv.FormatFloat(100*x, 'f', 1, 64), 64)
		return v / 100
	}
	a, b = round(a), round(b)
	return fmt.Sprintf("%s %.1f%% → %.1f%% (%s)", name, 100*a, 100*b, reduction(a, b))
}

// reduction says how much smaller the fraction b is than a, as "-67.8%".
// Fractions that both print as 0.0% are "same": a ratio of two values
// below the table's precision would be noise (0.00001 against 0.00006 is
// "+500%").
func reduction(a, b float64) string {
	const tiny = 0.0005 // rounds to 0.0%
	switch {
	case a < tiny && b < tiny:
		return "same"
	case a < tiny:
		return "more"
	}
	return fmt.Sprintf("%+.1f%%", 100*(b-a)/a)
}
