package realrun

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/datahelix/datahelix/internal/bench/eval"
	"github.com/datahelix/datahelix/internal/bench/workload"
	"github.com/datahelix/datahelix/internal/collectivetest"
	"github.com/datahelix/datahelix/internal/gen"
	"github.com/datahelix/datahelix/internal/metrics"
)

// BridgeConfig sizes the bridge section: examples/train.py trained under
// datahelix train and under stock torch (torch.distributed.run, the
// DataLoader of examples/torch_loader.py) at each of Ranks ranks, for
// Steps steps of Batch samples per rank, with Workers decode workers per
// rank (the DataLoader's workers for torch), F frames of S x S pixels.
type BridgeConfig struct {
	Ranks   []int
	Steps   int
	Batch   int
	Workers int
	Frames  int
	Size    int
	// Data is the dataset both trainers read; "" is the default dataset
	// of the bench's seed, generated once into the cache directory as
	// datahelix run does.
	Data string
	// Python runs the trainers; it needs torch (and PyAV, Pillow and
	// NumPy for the stock loader).
	Python string
	// Examples is the directory of train.py and torchrun.py ("": the
	// repository's examples/ beside the binary's .bin, else under the
	// working directory).
	Examples string
	// Timeout bounds each run, start-up included (0: 90 s plus 3 s a
	// step).
	Timeout time.Duration
}

// DefaultBridge is the bridge section's setting on a 2-core machine:
// about 2 minutes for its four runs.
var DefaultBridge = BridgeConfig{Ranks: []int{2, 4}, Steps: 40, Batch: 4, Workers: 2, Frames: 8, Size: 224, Python: "/usr/bin/python3"}

// MaxBridgeSteps bounds --bridge-steps: a real run of a step or more a
// second, on a machine shared by every rank and trainer.
const MaxBridgeSteps = 100_000

// bridgeLoaders are the section's trainers, in the order each rank count
// runs them: the trainer fed by datahelix train, and stock PyTorch.
var bridgeLoaders = []string{"datahelix", "torch"}

// bridgeThreads is each trainer's torch threads (train.py --threads): one,
// as scripts/bench-train.sh runs them, so that the ranks' trainers leave
// cores to the decoders.
const bridgeThreads = 1

func (c BridgeConfig) withDefaults() BridgeConfig {
	d := DefaultBridge
	if len(c.Ranks) == 0 {
		c.Ranks = d.Ranks
	}
	if c.Steps <= 0 {
		c.Steps = d.Steps
	}
	if c.Batch <= 0 {
		c.Batch = d.Batch
	}
	if c.Workers <= 0 {
		c.Workers = d.Workers
	}
	if c.Frames <= 0 {
		c.Frames = d.Frames
	}
	if c.Size <= 0 {
		c.Size = d.Size
	}
	if c.Python == "" {
		c.Python = d.Python
	}
	if c.Timeout <= 0 {
		c.Timeout = 90*time.Second + time.Duration(c.Steps)*3*time.Second
	}
	return c
}

// Warmup is the steps the steady figures leave out, on both sides: the
// planning horizon datahelix train takes by default, max(2 x W, 8), which
// the simulator's steady figures leave out too (train.py --warmup).
func (c BridgeConfig) Warmup() int { return max(2*c.Workers, 8) }

// Check reports the first setting that cannot run, naming the datahelix
// bench flag that sets it: rank counts of 1 to maxRanks, more steps than
// the warm-up (else no steady figure), and a --bridge-data that exists.
// A zero Steps or an empty Ranks is refused, not taken as the default.
func (c BridgeConfig) Check(maxRanks int) error {
	if len(c.Ranks) == 0 {
		return fmt.Errorf("bench: --bridge-ranks: no rank count given")
	}
	for _, n := range c.Ranks {
		if n < 1 || n > maxRanks {
			return fmt.Errorf("bench: --bridge-ranks %s: want rank counts of 1..%d (4 per core of this machine, at least 8)", intList(c.Ranks), maxRanks)
		}
	}
	if w := c.withDefaults().Warmup(); c.Steps <= w || c.Steps > MaxBridgeSteps {
		return fmt.Errorf("bench: --bridge-steps %d: want %d..%d (more than the warm-up's %d steps, which the steady figures leave out)", c.Steps, w+1, MaxBridgeSteps, w)
	}
	if c.Data != "" {
		if _, err := os.Stat(c.Data); err != nil {
			return fmt.Errorf("bench: --bridge-data: %w", err)
		}
	}
	return nil
}

// ParseRankList reads a comma list of rank counts ("2,4").
func ParseRankList(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("bench: --bridge-ranks %q: want a comma list of rank counts, such as 2,4", s)
		}
		out = append(out, n)
	}
	return out, nil
}

// intList prints ns as a comma list.
func intList(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

// BridgeTitle is the bridge section's title in the configured setting.
func BridgeTitle() string {
	c := DefaultBridge
	if re, err := CurrentRealEnv(); err == nil {
		c = re.Bridge
	}
	data := "default dataset"
	if c.Data != "" {
		data = filepath.Base(c.Data)
	}
	ranks := make([]string, len(c.Ranks))
	for i, n := range c.Ranks {
		ranks[i] = strconv.Itoa(n)
	}
	return fmt.Sprintf("Simulator versus real trainers: examples/train.py under datahelix train and stock torch (%s ranks, %s, %d steps)",
		strings.Join(ranks, " and "), data, c.Steps)
}

// TrainerSummary is what examples/train.py --json writes (rank 0, for
// the whole job): the figures the bridge section compares.
type TrainerSummary struct {
	Loader        string  `json:"loader"`
	Ranks         int     `json:"ranks"`
	Steps         int     `json:"steps"`
	Batch         int     `json:"batch"`
	Warmup        int     `json:"warmup"`
	WallS         float64 `json:"wall_s"`
	Samples       int     `json:"samples"`
	ThroughputSPS float64 `json:"throughput_sps"`
	// WaitFrac is the mean rank's input wait (time blocked getting its
	// next batch) over the wall time.
	WaitFrac float64 `json:"wait_frac"`
	// StepMSP50 is the median over ranks of each rank's median step
	// (forward, backward with the gradient allreduce, optimizer), ms.
	StepMSP50 float64 `json:"step_ms_p50"`
	// CPUS is the CPU time of the ranks' trainer processes, all their
	// threads, summed, s (nil from a train.py that did not write it).
	CPUS *float64 `json:"cpu_s"`
	// Steady is the same after Warmup steps; nil when the run was not
	// longer than that.
	Steady *TrainerSteady `json:"steady"`
}

// TrainerSteady is train.py's figures after its warm-up.
type TrainerSteady struct {
	Steps         int     `json:"steps"`
	WallS         float64 `json:"wall_s"`
	ThroughputSPS float64 `json:"throughput_sps"`
	WaitFrac      float64 `json:"wait_frac"`
	// JobStallFrac is the sum over the steps of the largest rank wait
	// over the wall time; StepMSP50 the median over ranks of each rank's
	// median step, ms (each nil from a train.py that did not write it).
	JobStallFrac *float64 `json:"job_stall_frac"`
	StepMSP50    *float64 `json:"step_ms_p50"`
}

// stepMS is the trainer's median step in steady state, ms, or over the
// whole run where train.py did not write that.
func (s *TrainerSummary) stepMS() float64 {
	if s.Steady != nil && s.Steady.StepMSP50 != nil {
		return *s.Steady.StepMSP50
	}
	return s.StepMSP50
}

// ParseTrainerSummary reads examples/train.py's --json file and checks
// that its figures are possible.
func ParseTrainerSummary(data []byte) (*TrainerSummary, error) {
	var s TrainerSummary
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("%w: train.py's summary: %v", ErrReal, err)
	}
	frac := func(x float64) bool { return x >= 0 && x <= 1.000001 }
	pos := func(x float64) bool { return x >= 0 && !math.IsInf(x, 0) }
	switch {
	case !slices.Contains(bridgeLoaders, s.Loader):
		return nil, fmt.Errorf("%w: train.py's summary: loader %q, want datahelix or torch", ErrReal, s.Loader)
	case s.Ranks < 1 || s.Steps < 0 || s.Batch < 0 || s.Samples < 0 || !pos(s.WallS) || !pos(s.ThroughputSPS) || !frac(s.WaitFrac) || !pos(s.StepMSP50) ||
		s.CPUS != nil && !pos(*s.CPUS):
		return nil, fmt.Errorf("%w: train.py's summary is inconsistent: %d ranks, %d steps, wall %v s, %v samples/s, wait %v, step %v ms",
			ErrReal, s.Ranks, s.Steps, s.WallS, s.ThroughputSPS, s.WaitFrac, s.StepMSP50)
	}
	if st := s.Steady; st != nil {
		if st.Steps < 1 || !pos(st.WallS) || !pos(st.ThroughputSPS) || !frac(st.WaitFrac) || st.JobStallFrac != nil && !frac(*st.JobStallFrac) ||
			st.StepMSP50 != nil && !pos(*st.StepMSP50) {
			return nil, fmt.Errorf("%w: train.py's steady figures are inconsistent: %d steps, wall %v s, %v samples/s, wait %v",
				ErrReal, st.Steps, st.WallS, st.ThroughputSPS, st.WaitFrac)
		}
	}
	return &s, nil
}

// bridgeRun is one real training run of the section and its simulation.
type bridgeRun struct {
	loader string // "datahelix" or "torch"
	ranks  int
	// trainer is train.py's summary; server datahelix train's (nil for
	// torch).
	trainer *TrainerSummary
	server  *metrics.Summary
	wall    time.Duration // the command's, start-up included
	err     error         // why the run (or its simulation) failed
	// others is the cores the trainers kept busy, which the simulation
	// puts beside the decoders; sim its result (nil when not simulated).
	others float64
	sim    *eval.Result
}

// bridgeFiles are where a run writes.
type bridgeFiles struct{ trainer, server string }

// trainerArgs are examples/train.py's arguments for loader (datahelix or
// torch), common to both but the torch loader's data and decode flags.
func (c BridgeConfig) trainerArgs(loader, data string, seed uint64, jsonFile string) []string {
	a := []string{filepath.Join(c.Examples, "train.py"), "--loader", loader, "--steps", strconv.Itoa(c.Steps), "--batch", strconv.Itoa(c.Batch),
		"--warmup", strconv.Itoa(c.Warmup()), "--threads", strconv.Itoa(bridgeThreads), "--log-every", "0",
		"--seed", strconv.FormatUint(seed, 10), "--json", jsonFile}
	if loader == "torch" {
		a = append(a, "--data", data, "--workers", strconv.Itoa(c.Workers), "--frames", strconv.Itoa(c.Frames), "--size", strconv.Itoa(c.Size))
	}
	return a
}

// datahelixArgs are datahelix train's arguments (under mpirun) for the
// trainer fed by datahelix: its default loader (helix), the section's
// batch, workers, shape and seed.
func (c BridgeConfig) datahelixArgs(data, cacheDir string, seed uint64, f bridgeFiles) []string {
	a := []string{"train", "--quiet", "--grace", bridgeGrace, "--data", data, "--cache-dir", cacheDir, "--steps", strconv.Itoa(c.Steps), "--batch", strconv.Itoa(c.Batch),
		"--workers", strconv.Itoa(c.Workers), "--frames", strconv.Itoa(c.Frames), "--size", strconv.Itoa(c.Size),
		"--seed", strconv.FormatUint(seed, 10), "--json", f.server, "--", c.Python}
	return append(a, c.trainerArgs("datahelix", data, seed, f.trainer)...)
}

// torchArgs are the stock launcher's arguments (examples/torchrun.py runs
// torch.distributed.run, mending it where torch < 2.0 on Python 3.11
// breaks it) for ranks trainers of the stock loader. The rendezvous takes
// a free port (--standalone always takes 29400, which another job may
// hold).
func (c BridgeConfig) torchArgs(ranks int, data string, seed uint64, f bridgeFiles, id string) []string {
	a := []string{filepath.Join(c.Examples, "torchrun.py"), "--nnodes", "1", "--nproc_per_node", strconv.Itoa(ranks),
		"--rdzv_backend", "c10d", "--rdzv_endpoint", "localhost:0", "--rdzv_id", id}
	return append(a, c.trainerArgs("torch", data, seed, f.trainer)...)
}

// pythonModules are what each trainer imports beyond the standard
// library: the stock loader decodes with PyAV and Pillow.
var pythonModules = map[string]string{"datahelix": "torch", "torch": "torch, av, PIL, numpy"}

// checkPython reports whether python imports what loader's trainer
// needs, with the reason when it does not.
func checkPython(ctx context.Context, python, loader string) error {
	mods := pythonModules[loader]
	out, err := runGroup(ctx, time.Minute, func(ctx context.Context) *exec.Cmd {
		return exec.CommandContext(ctx, python, "-c", "import "+mods)
	})
	if err != nil {
		return fmt.Errorf("%s cannot import %s: %w", python, mods, commandError(err, out))
	}
	return nil
}

// runBridge runs one training run of loader at ranks ranks and reads its
// summaries. A run that fails comes back with its error, never hung: the
// run is stopped at cfg.Timeout.
func (c BridgeConfig) runBridge(ctx context.Context, re RealEnv, loader string, ranks int, data string, seed uint64, tmp string) *bridgeRun {
	run := &bridgeRun{loader: loader, ranks: ranks}
	f := bridgeFiles{trainer: filepath.Join(tmp, fmt.Sprintf("%s-%d.json", loader, ranks)), server: filepath.Join(tmp, fmt.Sprintf("%s-%d.server.json", loader, ranks))}
	os.Remove(f.trainer)
	os.Remove(f.server)
	mk := func(ctx context.Context) *exec.Cmd {
		if loader == "datahelix" {
			return collectivetest.MPIRun(ctx, ranks, re.Binary, c.datahelixArgs(data, re.CacheDir, seed, f)...)
		}
		id := fmt.Sprintf("datahelix-bench-%d-%d", os.Getpid(), time.Now().UnixNano())
		cmd := exec.CommandContext(ctx, c.Python, c.torchArgs(ranks, data, seed, f, id)...)
		cmd.Env = append(os.Environ(), "PYTHONUNBUFFERED=1")
		return cmd
	}
	t0 := time.Now()
	out, err := runGroup(ctx, c.Timeout, mk)
	run.wall = time.Since(t0)
	if err != nil {
		run.err = commandError(err, out)
		return run
	}
	raw, err := os.ReadFile(f.trainer)
	if err != nil {
		run.err = fmt.Errorf("train.py wrote no summary: %w (output: %s)", err, Tail(out, 300))
		return run
	}
	if run.trainer, err = ParseTrainerSummary(raw); err != nil {
		run.err = err
		return run
	}
	switch t := run.trainer; {
	case t.Ranks != ranks || t.Loader != loader:
		run.err = fmt.Errorf("%w: train.py summarized %d ranks of %s, want %d of %s", ErrReal, t.Ranks, t.Loader, ranks, loader)
		return run
	case t.Steady == nil:
		run.err = fmt.Errorf("%w: train.py trained %d steps, no more than its warm-up of %d: no steady figures", ErrReal, t.Steps, t.Warmup)
		return run
	}
	if loader == "datahelix" {
		raw, err := os.ReadFile(f.server)
		if err != nil {
			run.err = fmt.Errorf("datahelix train wrote no summary: %w", err)
			return run
		}
		ss, err := ParseRunSummaries(raw)
		if err != nil {
			run.err = err
			return run
		}
		run.server = &ss[0]
	}
	return run
}

// runGroup runs the command mk makes, in a process group of its own, and
// returns its output (standard output and error together). At timeout,
// or when ctx ends, the group gets SIGTERM (mpirun passes it on to its
// ranks, which are in groups of their own, and datahelix train to its
// trainer; torch.distributed.run's trainers and their DataLoader workers
// are in the group), then stopGrace later SIGKILL. A timeout is an error
// that says so; an interruption wraps ctx's cause.
func runGroup(ctx context.Context, timeout time.Duration, mk func(context.Context) *exec.Cmd) ([]byte, error) {
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := mk(rctx)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	reap := stopGroup(cmd, stopGrace)
	err := cmd.Run()
	reap()
	name := filepath.Base(cmd.Args[0])
	switch {
	case err == nil:
		return out.Bytes(), nil
	case ctx.Err() != nil:
		return out.Bytes(), fmt.Errorf("bench: %s stopped: %w", name, context.Cause(ctx))
	case rctx.Err() != nil:
		return out.Bytes(), fmt.Errorf("%w: %s timed out after %s: %w", ErrReal, name, timeout, err)
	}
	return out.Bytes(), fmt.Errorf("%w: %s: %w", ErrReal, name, err)
}

// bridgeGrace is datahelix train's --grace in the section's runs: a
// stopped run saves nothing.
const bridgeGrace = "5s"

// commandError is err with the tail of the command's output, the reason
// a failed run shows.
func commandError(err error, out []byte) error {
	if t := Tail(out, 400); t != "" {
		return fmt.Errorf("%w: %s", err, t)
	}
	return err
}

// bridgeData returns the dataset of the section: c.Data, or the default
// dataset of the seed under the cache directory (launcher's
// defaultDataset: the same directory and configuration, so datahelix run
// and train find it made), generated once.
func (c BridgeConfig) bridgeData(ctx context.Context, re RealEnv, seed uint64) (string, error) {
	if c.Data != "" {
		return filepath.Abs(c.Data)
	}
	if dir := gen.DefaultDir(re.CacheDir, seed); gen.Current(dir) {
		return dir, nil
	}
	d := gen.Default("")
	re.Logf("bridge: generating the default dataset (%s, %d samples in %d shards) into %s", d.Preset, d.Samples, d.Shards, gen.DefaultDir(re.CacheDir, seed))
	dir, _, err := gen.EnsureDefault(ctx, re.CacheDir, seed, runtime.NumCPU(), nil)
	if err != nil {
		return "", workload.Wrapf(err, "generate the default dataset")
	}
	return dir, nil
}

// examplesDir finds the directory of train.py and torchrun.py: c.Examples,
// else examples/ in the repository the binary was built in (.bin/datahelix,
// as mpirun.sh builds it), else under the working directory.
func (c BridgeConfig) examplesDir(binary string) (string, error) {
	dirs := []string{c.Examples}
	if c.Examples == "" {
		dirs = []string{filepath.Join(filepath.Dir(filepath.Dir(binary)), "examples"), "examples"}
	}
	for _, d := range dirs {
		_, err1 := os.Stat(filepath.Join(d, "train.py"))
		_, err2 := os.Stat(filepath.Join(d, "torchrun.py"))
		if err1 == nil && err2 == nil {
			return filepath.Abs(d)
		}
	}
	return "", errors.New("no examples/train.py and examples/torchrun.py beside the binary or in the working directory (run from the repository)")
}
