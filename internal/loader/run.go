package loader

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"syscall"
	"time"

	"github.com/datahelix/datahelix/collective"
	"github.com/datahelix/datahelix/decode"
	"github.com/datahelix/datahelix/internal/metrics"
	"github.com/datahelix/datahelix/internal/reader"
	"github.com/datahelix/datahelix/internal/shard"
	"github.com/datahelix/datahelix/internal/shardindex"
)

// Result is a finished run as rank 0 sees it; other ranks get a Result
// with only their own records.
type Result struct {
	Summary metrics.Summary
	Records []metrics.StepRecord // every rank's, by rank then step (rank 0 only)
}

// Run trains for cfg.Steps steps with a simulated GPU on every rank of
// comm: each step the training loop asks the loader for its batch, the
// GPU computes for the model's time and joins the gradient allreduce.
// Every rank must call it. The records are gathered on rank 0, which
// returns the summary. A run stopped by cancelling ctx returns the cause
// of the cancellation (context.Cause), so that it says why it stopped.
func Run(ctx context.Context, comm collective.Comm, ds *decode.Dataset, cfg Config) (*Result, error) {
	if err := checkEmptyShards(ds); err != nil {
		return nil, err
	}
	if cfg.SampleLog == nil {
		cfg.SampleLog = NewSampleLog()
	}
	if comm.Rank() == 0 && cfg.Log != nil && cfg.SampleLog.firstWarnings() {
		logWarnings(cfg.Log, ds) // once per job: its loaders share one SampleLog
	}
	gcomm, err := comm.Dup()
	if err != nil {
		return nil, err
	}
	l, err := NewLoader(ctx, comm, ds, cfg)
	if err != nil {
		return nil, err
	}
	sim := &simulatedGPU{Model: cfg.GPU, Comm: gcomm}
	var gpuUS []int64 // per delivered batch, in order
	runErr := func() error {
		for {
			b, err := l.Next(ctx)
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return err
			}
			d, err := sim.Step(ctx, b.Contents())
			if err != nil {
				return err
			}
			gpuUS = append(gpuUS, d.Microseconds())
		}
	}()
	end := time.Now()
	if runErr != nil {
		l.Close()
		return nil, runErr
	}
	recs := l.records
	for i := range min(len(recs), len(gpuUS)) {
		recs[i].GPUUS = gpuUS[i]
	}
	return Finish(comm, l, end)
}

// Finish ends a run whose training loop is not Run's (a trainer process
// fed through a bridge): it closes l and gathers every rank's records
// and figures on rank 0, as Run does; end is when the training loop
// finished. Every rank must call it; a loader whose training loop
// stopped before its last step must be quiesced first (Loader.Quiesce).
func Finish(comm collective.Comm, l *Loader, end time.Time) (*Result, error) {
	if err := l.Close(); err != nil {
		return nil, err
	}
	recs := l.records
	if n := len(recs); n > 0 {
		recs[n-1].ComputeUS = max(l.sinceStart(end)-recs[n-1].DeliverUS, 0)
	}
	return gather(comm, l, recs, l.sinceStart(end), l.cfg)
}

// CheckJob checks, before the first loader of a job runs, what would
// otherwise fail the job only when some loader starts, after the loaders
// before it trained for nothing: that the dataset's shards split over the
// ranks of comm (no shard too small to cut into ranges), and that cfg's checkpoint directory suits a
// run of each of kinds (a complete checkpoint of every loader to resume
// from, no earlier run's checkpoints for a new one to mix its own with).
// Every rank must call it with the same arguments; they all return the
// same error, marked collective.AllRanks.
func CheckJob(comm collective.Comm, ds decode.Source, cfg Config, kinds []Kind) error {
	if err := cfg.setDefaults(); err != nil {
		return collective.AllRanks(err)
	}
	if err := checkEmptyShards(ds); err != nil {
		return err
	}
	if _, err := reader.NewOrder(shardSizes(ds), comm.Size()*cfg.Batch, cfg.Streams, cfg.StreamTurns, cfg.Seed, cfg.ShuffleBuffer); err != nil {
		return collective.AllRanks(err)
	}
	return checkStartCheckpoints(comm, ds, cfg, kinds)
}

// logWarnings writes the index warnings of ds's shards to log: members
// the index skipped (no key, not a regular file, sparse) or grouped
// oddly (a repeated extension, a reused key), which would otherwise
// vanish from the training data silently; shardindex.MaxWarningLines of a
// shard, then a count of the rest.
func logWarnings(log io.Writer, ds *decode.Dataset) {
	for _, s := range shard.ShardsOf(ds) {
		for _, line := range shardindex.WarningLines(s.Path(), s.Warnings(), shardindex.MaxWarningLines) {
			fmt.Fprintf(log, "datahelix: %s\n", line)
		}
	}
}

// checkEmptyShards fails a dataset with a shard the index found no
// sample in, saying why when it skipped members (its first warning).
// Every rank sees every shard's count (the launcher has the ranks agree
// on them), so every rank fails alike.
func checkEmptyShards(src decode.Source) error {
	ds, ok := src.(*decode.Dataset)
	if !ok {
		for i := range src.NumShards() {
			if src.ShardLen(i) == 0 {
				return collective.AllRanks(fmt.Errorf("spmd: shard %s has no samples: the rank reading it would have nothing to train on; remove it from the dataset", src.ShardName(i)))
			}
		}
		return nil
	}
	for _, s := range shard.ShardsOf(ds) {
		if s.Len() > 0 {
			continue
		}
		w := s.Warnings()
		if len(w) == 0 {
			return collective.AllRanks(fmt.Errorf("spmd: shard %s has no samples: the rank reading it would have nothing to train on; remove it from the dataset", s.Path()))
		}
		more := ""
		switch len(w) {
		case 1:
		case 2:
			more = ", and 1 more warning"
		default:
			more = fmt.Sprintf(", and %d more warnings", len(w)-1)
		}
		return collective.AllRanks(fmt.Errorf("spmd: shard %s has no samples (%s%s): the rank reading it would have nothing to train on; remove it from the dataset",
			s.Path(), w[0], more))
	}
	return nil
}

// gather collects every rank's records and figures on rank 0.
func gather(comm collective.Comm, l *Loader, recs []metrics.StepRecord, endUS int64, cfg Config) (*Result, error) {
	mine, err := json.Marshal(recs)
	if err != nil {
		return nil, err
	}
	blocks, err := comm.AllgatherVar(mine)
	if err != nil {
		return nil, fmt.Errorf("gather records: %w", err)
	}
	mape := l.cost.MAPE()
	mapeMicro := int64(-1)
	if !math.IsNaN(mape) {
		mapeMicro = int64(mape * 1e6)
	}
	gpuMicro := int64(-1)
	if g, ok := l.gpuModelError(); ok {
		gpuMicro = int64(g * 1e6)
	}
	// wall, peak RSS, MAPE sum, ranks with a MAPE, the same of the GPU model
	figs := []int64{endUS, peakRSS(), max(mapeMicro, 0), b2i(mapeMicro >= 0), max(gpuMicro, 0), b2i(gpuMicro >= 0)}
	maxFigs := []int64{figs[0], figs[1]}
	if err := comm.AllreduceInt64(maxFigs, collective.OpMax); err != nil {
		return nil, err
	}
	sumFigs := []int64{figs[2], figs[3], figs[4], figs[5]}
	if err := comm.AllreduceInt64(sumFigs, collective.OpSum); err != nil {
		return nil, err
	}
	if comm.Rank() != 0 {
		return &Result{Records: recs}, nil
	}
	var all []metrics.StepRecord
	for r, b := range blocks {
		var rs []metrics.StepRecord
		if err := json.Unmarshal(b, &rs); err != nil {
			return nil, fmt.Errorf("records of rank %d: %w", r, err)
		}
		all = append(all, rs...)
	}
	steps := int(l.next - l.first) // delivered: all of them, unless the trainer stopped early
	wall := maxFigs[0]
	if len(all) > 0 {
		// Wall time runs from the first request of the run.
		first := all[0].RequestUS
		for _, r := range all {
			first = min(first, r.RequestUS)
		}
		wall -= first
	}
	s := metrics.Summarize(cfg.Loader.stepKind(), all, comm.Size(), steps, cfg.Batch, cfg.Workers, l.cfg.Horizon, wall)
	s.FirstStep = int(l.first)
	s.PeakRSSBytes = maxFigs[1]
	if sumFigs[1] > 0 {
		mape := float64(sumFigs[0]) / float64(sumFigs[1]) / 1e6
		s.CostMAPE = &mape
	}
	if sumFigs[3] > 0 {
		mape := float64(sumFigs[2]) / float64(sumFigs[3]) / 1e6
		s.GPUModelMAPE = &mape
	}
	return &Result{Summary: s, Records: all}, nil
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// peakRSS is the process's peak resident set size in bytes.
func peakRSS() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Maxrss * 1024 // KiB on Linux
}

// RunInProcess runs n ranks of Run as goroutines of this process on an
// in-process communicator (collective.RunLocal), each opening the dataset
// at data (shard indexes cached in indexDir). It returns rank 0's result
// and every rank's error; a rank that fails aborts the others, so none
// waits forever: their errors then match collective.ErrAborted and name
// the rank that failed.
func RunInProcess(ctx context.Context, n int, data, indexDir string, cfg Config) (*Result, []error) {
	var res *Result // rank 0's
	errs := collective.RunLocal(ctx, n, func(ctx context.Context, c collective.Comm) error {
		ds, err := decode.OpenDatasetPart(data, indexDir, c.Rank(), c.Size())
		if err != nil {
			return err
		}
		defer ds.Close()
		r, err := Run(ctx, c, ds, cfg)
		if c.Rank() == 0 {
			res = r
		}
		return err
	})
	return res, errs
}
