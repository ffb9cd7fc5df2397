package launcher

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/datahelix/datahelix/collective"
	"github.com/datahelix/datahelix/decode"
	"github.com/datahelix/datahelix/gpu"
	"github.com/datahelix/datahelix/internal/agree"
	"github.com/datahelix/datahelix/internal/cli"
	"github.com/datahelix/datahelix/internal/gen"
	"github.com/datahelix/datahelix/internal/loader"
	"github.com/datahelix/datahelix/internal/machine"
	"github.com/datahelix/datahelix/internal/metrics"
	"github.com/datahelix/datahelix/internal/shardindex"
	"github.com/datahelix/datahelix/spmd"
)

// runCommand is datahelix run.
var runCommand = cli.Command{
	Name:    "run",
	Summary: "the main job: train with a simulated GPU, comparing loaders on the same data",
	Run:     runRun,
}

func runRun(ctx context.Context, stdout, stderr io.Writer, args []string) error {
	var f runFlags
	fs := cli.NewFlags("run", "[flags]")
	f.register(fs)
	if err := cli.ParseFlags(fs, args, stdout); err != nil {
		return err
	}
	if err := f.resolveDefaultJob(cli.SetFlags(fs, []string{"batch", "steps"})); err != nil {
		return err
	}
	if err := f.validate(); err != nil {
		return err
	}
	f.args = append([]string{"run"}, args...)
	if len(cli.SetFlags(fs, []string{"stall-timeout"})) == 0 {
		f.stallTimeout = f.defaultStallTimeout()
	}
	return runWorld(ctx, f.world, stdout, stderr, func(ctx context.Context, c collective.Comm, out, errOut io.Writer) error {
		return runJob(ctx, c, &f, out, errOut)
	})
}

// defaultDataset makes sure the default dataset exists: the first local
// rank of every node generates it once (deterministically, into a
// temporary directory renamed into place), the others wait.
func defaultDataset(ctx context.Context, c collective.Comm, root string, seed uint64, log io.Writer) (string, error) {
	var genErr error
	if c.Info().LocalRank == 0 {
		if !gen.Current(gen.DefaultDir(root, seed)) {
			genErr = generateDefault(ctx, root, seed, log, c.Rank() == 0)
		}
	}
	// Every rank learns whether any node failed, so none proceeds alone.
	if err := agreeOnError(c, genErr, "failed"); err != nil {
		return "", err
	}
	return gen.DefaultDir(root, seed), nil
}

// interleavedDefault makes sure the uniform layout of the default dataset
// of seed in the cache root exists (gen.EnsureInterleaved), made once per
// node after the dataset, and returns its path.
func interleavedDefault(c collective.Comm, root string, seed uint64) (string, error) {
	var err error
	if c.Info().LocalRank == 0 {
		if _, err = gen.EnsureInterleaved(root, seed); err != nil {
			err = fmt.Errorf("interleave the default dataset: %w", err)
		}
	}
	if err := agreeOnError(c, err, "failed"); err != nil {
		return "", err
	}
	return gen.InterleavedDir(root, seed), nil
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

func generateDefault(ctx context.Context, root string, seed uint64, log io.Writer, talk bool) error {
	var waiting func()
	if talk {
		d := gen.Default("")
		fmt.Fprintf(log, "datahelix: generating the default dataset (%s, %d samples in %d shards) into %s, once\n",
			d.Preset, d.Samples, d.Shards, gen.DefaultDir(root, seed))
		waiting = func() {
			fmt.Fprintf(log, "datahelix: another job is generating it: waiting for that job\n")
		}
	}
	t0 := time.Now()
	var made bool
	err := withAllCPUs(func(cpus int) error {
		var err error
		_, made, err = gen.EnsureDefault(ctx, root, seed, cpus, waiting)
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

// gpuOverride changes a rank's simulated GPU after the ranks have agreed
// on their flags: tests make one rank busy outside MPI on purpose with
// it, as the --gpu-* flags, which must agree, no longer can. Only a
// context given to the command (withGPUOverride) carries one.
type gpuOverride func(rank int, m gpu.Model) gpu.Model

type gpuOverrideKey struct{}

// withGPUOverride returns ctx carrying o for the jobs run under it.
func withGPUOverride(ctx context.Context, o gpuOverride) context.Context {
	return context.WithValue(ctx, gpuOverrideKey{}, o)
}

// jobData is what every rank of a job opens before its loaders run.
type jobData struct {
	outs *runOutputs
	data string // the dataset's path
	ds   *decode.Dataset
}

// close releases what openJob opened; the outputs are discarded unless
// written.
func (j *jobData) close() {
	j.outs.discard()
	if j.ds != nil {
		j.ds.Close()
	}
}

// openJob has the ranks agree on their flags, checks the outputs, opens
// the dataset (generating the default one first) and checks it suits
// every loader of the job, on every rank alike. Every rank must call it.
func openJob(ctx context.Context, c collective.Comm, f *runFlags, errOut io.Writer) (*jobData, error) {
	// First, so that every rank calls the same collectives after it.
	if err := agree.Agree(c, runSettings(f)); err != nil {
		return nil, withStatusAllRanks(cli.ExitDisagree, err)
	}
	if o, ok := ctx.Value(gpuOverrideKey{}).(gpuOverride); ok {
		f.cfg.GPU = o(c.Rank(), f.cfg.GPU)
	}
	outs, err := prepareOutputs(c, f)
	if err != nil {
		return nil, err
	}
	j := &jobData{outs: outs}
	if c.Rank() == 0 {
		if w := checkpointWarning(f); w != "" {
			fmt.Fprintf(errOut, "datahelix: warning: %s\n", w)
		}
	}
	root := cli.CacheRoot(f.cacheDir)
	j.data = f.data
	if j.data == "" {
		if j.data, err = defaultDataset(ctx, c, root, f.seed, errOut); err != nil {
			j.close()
			return nil, err
		}
	}
	if j.ds, err = openData(c, f, root, j.data); err != nil {
		j.close()
		return nil, err
	}
	return j, nil
}

// openData opens the dataset at path on every rank, checks that every
// rank sees it alike and that it suits every loader of the job, and
// settles --epochs on it. Every rank must call it.
func openData(c collective.Comm, f *runFlags, root, path string) (*decode.Dataset, error) {
	// A node may see the data differently (node-local copies, a stale
	// view of a shared file system): the ranks agree before going on.
	// Each rank indexes its own run of the shards first, so that on a
	// cold index cache the ranks share the work of building it.
	ds, err := decode.OpenDatasetPart(path, shardindex.Dir(root), c.Rank(), c.Size())
	if err := agreeOnError(c, err, "cannot open the dataset"); err != nil {
		if ds != nil {
			ds.Close()
		}
		return nil, withStatusAllRanks(cli.ExitBadInput, err)
	}
	fail := func(err error) (*decode.Dataset, error) {
		ds.Close()
		return nil, err
	}
	if err := agree.AgreeDataset(c, ds); err != nil {
		return fail(withStatusAllRanks(cli.ExitDisagree, err))
	}
	sizes := make([]int, ds.NumShards())
	for i := range sizes {
		sizes[i] = ds.ShardLen(i)
	}
	if err := f.applyEpochs(sizes, c.Size()); err != nil {
		return fail(collective.AllRanks(err))
	}
	// What would fail a later loader (an epoch shorter than a global
	// batch, the checkpoints of each loader) fails the job now, before
	// any loader trains.
	if err := loader.CheckJob(c, ds, f.cfg, f.loaders); err != nil {
		return fail(withStatusAllRanks(cli.ExitBadInput, err))
	}
	return ds, nil
}

// runJob is the body every rank runs.
func runJob(ctx context.Context, c collective.Comm, f *runFlags, out, errOut io.Writer) error {
	j, err := openJob(ctx, c, f, errOut)
	if err != nil {
		return err
	}
	defer j.close()
	if err := shareCores(c, f.cfg.Workers, false); err != nil {
		return err
	}
	// The datasets, in order: the one opened, and on the default job its
	// uniform layout too.
	cases := make([]caseResults, len(f.cases))
	for i, rc := range f.cases {
		cases[i] = caseResults{runCase: rc, data: j.data, ds: j.ds}
	}
	if len(cases) > 1 {
		root := cli.CacheRoot(f.cacheDir)
		u := &cases[1]
		if u.data, err = interleavedDefault(c, root, f.seed); err != nil {
			return err
		}
		if u.ds, err = openData(c, f, root, u.data); err != nil {
			return err
		}
		defer u.ds.Close()
	}
	var bar *progressbar.ProgressBar
	if c.Rank() == 0 && !f.quiet {
		if cli.IsTerminal(errOut) {
			bar = cli.NewBar(errOut, len(cases)*f.repeat*len(f.loaders)*f.cfg.Steps, "training")
		}
	}
	watch := watchStalls(c, f.stallTimeout)
	defer watch.Stop()
	wc := watch.Watched(c) // one slot of the watch for every loader's run
	var trace []traceLine
	// This rank's delivered and dropped samples, per run: summed over the
	// ranks after the last run, they decide the job's exit.
	var counts []int64
	var runs []spmd.Kind // the loader of each run, in counts' order
	for ci := range cases {
		cr := &cases[ci]
		samples := loader.NewSampleLog() // a bad sample is logged once, not per loader
		for r := range f.repeat {
			var row []metrics.Summary
			for _, k := range f.loaders {
				cfg := loader.InJob(f.cfg, f.loaders...)
				cfg.Loader = k
				cfg.Log, cfg.SampleLog = errOut, samples
				watch.Start(k.String())
				cfg.Progress = func(step int64) {
					watch.Delivered(step)
					if bar != nil {
						bar.Add(1)
					}
				}
				if bar != nil {
					bar.Describe(cr.label(k, r, f.repeat))
				}
				res, err := loader.Run(ctx, wc, cr.ds, cfg)
				if err != nil {
					// What every rank finds alike in a run (a shard without
					// samples, checkpoints it cannot resume from) is its input.
					return withStatusAllRanks(cli.ExitBadInput, fmt.Errorf("loader %s: %w", k, err))
				}
				counts = append(counts, ownSamples(res.Records, c.Rank())...)
				runs = append(runs, k)
				if c.Rank() == 0 {
					row = append(row, res.Summary)
					for _, rec := range res.Records {
						trace = append(trace, traceLine{Loader: k.String(), Case: cr.name, Repeat: repeatNumber(r, f.repeat), StepRecord: rec})
					}
				}
			}
			cr.runs = append(cr.runs, row)
		}
	}
	watch.Stop() // writing the outputs is no step
	if bar != nil {
		bar.Finish()
	}
	// One collective every rank calls: the job's totals, the same on
	// every rank, so that all come to the same exit.
	if err := c.AllreduceInt64(counts, collective.OpSum); err != nil {
		return err
	}
	failed := allDroppedError(runs, counts)
	if c.Rank() != 0 {
		return failed
	}
	return reportJob(ctx, c, f, j, cases, trace, out, errOut, failed)
}

// repeatNumber is run r's number (from 1) among repeat runs, or 0 when
// the loaders ran once: the JSON and trace then carry none.
func repeatNumber(r, repeat int) int {
	if repeat == 1 {
		return 0
	}
	return r + 1
}

// caseResults are one dataset's runs: runs[r][l] is the summary of loader
// l in repeat r (rank 0's, which holds every rank's figures).
type caseResults struct {
	runCase
	data string          // the dataset's path
	ds   *decode.Dataset // open while the job runs
	runs [][]metrics.Summary
}

// label names loader k's run r for the progress bar.
func (cr *caseResults) label(k spmd.Kind, r, repeat int) string {
	l := k.String()
	if cr.name != "" {
		l = cr.name + " " + l
	}
	if repeat > 1 {
		l += fmt.Sprintf(" %d/%d", r+1, repeat)
	}
	return l
}

// reportJob prints rank 0's tables and writes the job's outputs; it
// returns failed, or the outputs' error.
func reportJob(ctx context.Context, c collective.Comm, f *runFlags, j *jobData, cases []caseResults, trace []traceLine, out, errOut io.Writer, failed error) error {
	table := out
	if f.stdoutTaken() {
		table = errOut // standard output holds --json or --trace
	}
	var results []runSummary
	for _, cr := range cases {
		printCase(table, cr, c.Size(), f)
		for r, row := range cr.runs {
			for _, s := range row {
				results = append(results, runSummary{Summary: s, Case: cr.name, Repeat: repeatNumber(r, len(cr.runs))})
			}
		}
	}
	printDefaultJob(table, cases)
	job := &jobInfo{Args: f.args, Data: j.data, Seed: f.seed, Frames: f.cfg.Decode.Frames, Size: f.cfg.Decode.Size,
		Workers: f.cfg.Workers, MPI: c.Info().Library, Machine: machine.This(ctx), Ended: time.Now().UTC().Format(time.RFC3339)}
	if len(cases) > 1 {
		for _, cr := range cases {
			job.Cases = append(job.Cases, jobCase{Name: cr.name, Data: cr.data})
		}
	}
	job.MPIWait, _ = mpiWait(c)
	// The figures of a failed job are written too: they say how it failed.
	if err := j.outs.write(out, results, job, trace); err != nil {
		return err
	}
	return failed
}

// ownSamples returns the samples delivered and dropped by rank in
// records (rank 0's Result holds every rank's).
func ownSamples(records []metrics.StepRecord, rank int) []int64 {
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
	return cli.WithStatus(cli.ExitBadInput, collective.AllRanks(fmt.Errorf("%s: none decoded, so nothing trained (the ranks' \"dropping sample\" lines say why)",
		strings.Join(which, ", "))))
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
	// the other ranks' errors must then match too (cli.StopReason, exit
	// status 130 or 143), the second its exit status, which every rank
	// then exits with.
	var mine []byte
	switch {
	case errors.Is(err, context.Canceled):
		mine = append([]byte{'c', byte(cli.ExitStatus(err))}, err.Error()...)
	case err != nil:
		mine = append([]byte{'!', byte(cli.ExitStatus(err))}, err.Error()...)
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
	theirs := remoteError{text: string(msgs[failed][2:]), status: int(msgs[failed][1])}
	if msgs[failed][0] == 'c' {
		theirs.cause = context.Canceled
	}
	return collective.AllRanks(fmt.Errorf("rank %d %s: %w%s", failed, what, theirs, also))
}

// remoteError is another rank's error, as text, its exit status, and
// whether it came from a cancellation (cause context.Canceled).
type remoteError struct {
	text   string
	status int
	cause  error
}

func (e remoteError) Error() string   { return e.text }
func (e remoteError) Unwrap() error   { return e.cause }
func (e remoteError) ExitStatus() int { return e.status }
