package datacmd

import (
	"context"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/datahelix/datahelix/decode"
	"github.com/datahelix/datahelix/internal/cli"
	"github.com/datahelix/datahelix/internal/costmodel"
	"github.com/datahelix/datahelix/internal/decoding"
	"github.com/datahelix/datahelix/internal/inspect"
)

// CostModel is datahelix costmodel.
var CostModel = cli.Command{
	Name:    "costmodel",
	Summary: "decode a dataset, fit the cost model on a warm-up and print its held-out error per modality and codec",
	Run:     runCostModel,
}

func runCostModel(ctx context.Context, stdout, stderr io.Writer, args []string) error {
	fs := cli.NewFlags("costmodel", "--data DIR [flags]")
	data := fs.String("data", "", "dataset: a `directory` of *.tar shards, a glob or one shard")
	cache := cli.AddIndexCacheFlags(fs)
	warmup := fs.Int("warmup", 200, "`samples` the model learns from before the held-out evaluation (the samples after them are held out; by default two thirds of a dataset of 200 samples or fewer)")
	limit := fs.Int("limit", 0, "decode at most this many `samples`, warm-up included (0: all)")
	var frames, size int
	cli.ShapeFlags(fs, &frames, &size)
	var tf cli.TransformFlags
	tf.Register(fs)
	seed := fs.Uint64("seed", 1, "`seed` of the transforms")
	wall := fs.Bool("wall", false, "measure wall time instead of the decoding thread's CPU time")
	repeat := fs.Int("repeat", 3, "decode each sample this many `times` and keep the fastest (filters interference on shared machines)")
	calIn := fs.String("calibration", "", "warm-start from this calibration `file` (default: the built-in one)")
	calOut := fs.String("calibrate-out", "", "after the evaluation, write the coefficients learned from every sample to this `file`")
	save := fs.String("save", "", "write the model's state after the evaluation to this `file`")
	if err := cli.ParseFlags(fs, args, stdout); err != nil {
		return err
	}
	switch {
	case *data == "":
		return cli.Usagef("costmodel: --data is required")
	case *warmup < 1:
		return cli.FlagErrorf("costmodel", "warmup", *warmup, "want at least 1")
	case *limit < 0:
		return cli.FlagErrorf("costmodel", "limit", *limit, "want 0 or more")
	case *repeat < 1:
		return cli.FlagErrorf("costmodel", "repeat", *repeat, "want at least 1")
	}
	if err := cli.CheckShape(frames, size); err != nil {
		return err
	}
	spec, err := tf.Spec(size)
	if err != nil {
		return err
	}
	spec.Seed = *seed
	indexDir, err := cache.Dir("costmodel")
	if err != nil {
		return err
	}
	cal := costmodel.DefaultCalibration()
	if *calIn != "" {
		if cal, err = costmodel.LoadCalibration(*calIn); err != nil {
			return fmt.Errorf("costmodel: --calibration: %w", err)
		}
	}
	ds, err := decode.OpenDataset(*data, indexDir)
	if err != nil {
		return err
	}
	defer ds.Close()
	// The held-out evaluation needs samples after the warm-up: the
	// default warm-up shrinks to two thirds of a small dataset, while a
	// --warmup given that covers every sample is refused before hours of
	// decoding end in "nothing held out".
	n := ds.Len()
	if *limit > 0 {
		n = min(n, *limit)
	}
	if n <= *warmup {
		if len(cli.SetFlags(fs, []string{"warmup"})) > 0 {
			return cli.FlagErrorf("costmodel", "warmup", *warmup, "covers all %d samples to decode, so nothing would be held out: want fewer than %d", n, n)
		}
		*warmup = max(n*2/3, 1)
		fmt.Fprintf(stderr, "costmodel: %s has %d samples to decode: learning from the first %d, holding out the rest (--warmup sets it)\n", *data, n, *warmup)
	}
	m := costmodel.New(cal)
	m.SetOptions(costmodel.Options{Frames: frames, Size: size, MaxTasks: 1, Transform: spec})
	dec := decoding.NewDecoder(decoding.Options{Frames: frames, Size: size, Transform: spec})
	rep, err := inspect.EvaluateCostModel(ctx, ds, dec, m, inspect.CostEvalOptions{Warmup: *warmup, Limit: *limit, WallClock: *wall, Repeat: *repeat},
		func(done, total int) {
			if done%100 == 0 || done == total {
				fmt.Fprintf(stderr, "\rdecoded %d/%d", done, total)
				if done == total {
					fmt.Fprintln(stderr)
				}
			}
		})
	if err != nil {
		return err
	}
	for _, f := range rep.Failed {
		fmt.Fprintln(stderr, "failed:", f)
	}
	clock := "thread CPU time"
	if *wall {
		clock = "wall time"
	}
	fmt.Fprintf(stdout, "%s: learned from %d samples, held out %d (%s, fastest of %d, F=%d, S=%d), speed factor %.3f\n",
		*data, rep.Warmup, rep.HeldOut, clock, *repeat, frames, size, m.SpeedFactor())
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "model\tsamples\tMAPE %\tonline MAPE %\tmean measured µs\tmean predicted µs\t")
	for _, r := range rep.Rows {
		if r.Count == 0 {
			// No held-out sample: an error of 0 would read as "exact".
			fmt.Fprintf(tw, "%s\t0\tn/a\tn/a\tn/a\tn/a\t\n", r.Key)
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f\t%.0f\t%.0f\t\n", r.Key, r.Count, 100*r.MAPE, 100*r.OnlineMAPE, r.MeanMeasured, r.MeanPredicted)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if rep.HeldOut == 0 {
		fmt.Fprintf(stdout, "nothing held out: --warmup %d covers all %d samples decoded, so there is no error to measure; lower --warmup (e.g. --warmup %d) to hold samples out\n",
			*warmup, rep.Warmup, max(rep.Warmup/2, 1))
	} else {
		fmt.Fprintln(stdout, "MAPE: the model frozen after the warm-up; online MAPE: the model still learning, each sample predicted before it is learned")
	}
	if *calOut != "" {
		host, _ := os.Hostname()
		machine := fmt.Sprintf("%s, %s, %d samples of %s", host, clock, len(rep.Observations), *data)
		if err := m.Calibration(machine).Save(*calOut); err != nil {
			return err
		}
	}
	if *save != "" {
		return m.Save(*save)
	}
	return nil
}
