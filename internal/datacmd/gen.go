package datacmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/datahelix/datahelix/internal/cli"
	"github.com/datahelix/datahelix/internal/gen"
)

// Gen is datahelix gen.
var Gen = cli.Command{
	Name:    "gen",
	Summary: "generate WebDataset shards of real encoded media (ffmpeg) following public dataset statistics",
	Run:     runGen,
}

// genDefaultIgnores are the flags that --default replaces with the
// default dataset's own values (gen.Default), so giving one with it is a
// mistake, not a request.
var genDefaultIgnores = []string{"preset", "samples", "shards", "duration-scale", "size-scale"}

func runGen(ctx context.Context, stdout, stderr io.Writer, args []string) error {
	d := gen.Default("")
	fs := cli.NewFlags("gen", "--preset NAME --samples N --out DIR [--shards K] [flags]")
	preset := fs.String("preset", "", "dataset `name`: "+strings.Join(gen.Presets(), ", "))
	samples := fs.Int("samples", 0, "`samples` to generate in all")
	shards := fs.Int("shards", 1, "`shards` to spread the samples over, 1..samples")
	out := fs.String("out", "", "output `directory`")
	seed := fs.Uint64("seed", 1, "random `seed`: the same seed gives the same bytes")
	durScale := fs.Float64("duration-scale", 0, "multiply clip durations by `x` (0: preset default, 0.1 for activitynet)")
	sizeScale := fs.Float64("size-scale", 0, "multiply picture sizes by `x` (0: 1)")
	workers := fs.Int("workers", 0, "ffmpeg `processes` at once (0: one per CPU)")
	quiet := fs.Bool("quiet", false, "no progress on stderr")
	def := fs.Bool("default", false, fmt.Sprintf("generate the runtime's default dataset (%s, %d samples, %d shards, for --seed) into --out; takes none of --%s",
		d.Preset, d.Samples, d.Shards, strings.Join(genDefaultIgnores, ", --")))
	if err := cli.ParseFlags(fs, args, stdout); err != nil {
		return err
	}
	if *out == "" {
		return cli.Usagef("gen: --out is required")
	}
	cfg := gen.Default(*out)
	cfg.Seed = *seed
	if *def {
		if set := cli.SetFlags(fs, genDefaultIgnores); len(set) > 0 {
			return cli.Usagef("gen: --default generates the fixed default dataset (%s, %d samples, %d shards) and takes no --%s",
				d.Preset, d.Samples, d.Shards, strings.Join(set, ", --"))
		}
	} else {
		if *preset == "" || *samples <= 0 {
			return cli.Usagef("gen: --preset and a positive --samples are required (or --default)")
		}
		cfg = gen.Config{Preset: *preset, Samples: *samples, Shards: *shards, Out: *out, Seed: *seed,
			DurationScale: *durScale, SizeScale: *sizeScale}
	}
	if !*def {
		if err := checkGenFlags(*samples, *shards, *durScale, *sizeScale); err != nil {
			return err
		}
	}
	if *workers < 0 {
		return cli.FlagErrorf("gen", "workers", *workers, "want 0 (one per CPU) or more")
	}
	cfg.Workers = *workers
	start := time.Now()
	var finish func()
	if !*quiet {
		cfg.Progress, finish = genProgress(stderr, cfg.Preset, start)
	}
	paths, err := gen.Generate(ctx, cfg)
	if finish != nil {
		finish()
	}
	if errors.Is(err, gen.ErrConfig) || errors.Is(err, gen.ErrPreset) {
		// A preset, count or scale the flags gave: a usage error.
		return cli.Usagef("%w", err)
	}
	if err != nil {
		return err
	}
	var total int64
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return err
		}
		total += st.Size()
		fmt.Fprintln(stdout, p)
	}
	fmt.Fprintf(stderr, "gen: %s: %d samples in %s, %.1f MB, %.1f s\n",
		cfg.Preset, cfg.Samples, cli.Plural(len(paths), "shard", "shards"), float64(total)/1e6, time.Since(start).Seconds())
	return nil
}

// checkGenFlags checks --samples, --shards, --duration-scale and
// --size-scale against gen's bounds, naming the flag, before any work
// (a count that cannot be met ran out of memory, a scale beyond what
// datahelix decodes wrote samples run refused).
func checkGenFlags(samples, shards int, durScale, sizeScale float64) error {
	switch {
	case samples > gen.MaxSamples:
		return cli.FlagErrorf("gen", "samples", samples, "want 1..%d", gen.MaxSamples)
	case shards > gen.MaxShards:
		return cli.FlagErrorf("gen", "shards", shards, "want at most %d", gen.MaxShards)
	case shards < 1 || shards > samples:
		return cli.FlagErrorf("gen", "shards", shards, "want 1..%d (--samples)", samples)
	// NaN fails every comparison: test for the good range.
	case !(durScale >= 0 && durScale <= gen.MaxDurationScale):
		return cli.FlagErrorf("gen", "duration-scale", durScale, "want a number in 0..%v (0: the preset's default; clips are capped at 3600 s, and no preset's is shorter than 1 s)",
			gen.MaxDurationScale)
	case !(sizeScale >= 0 && sizeScale <= gen.MaxSizeScale):
		return cli.FlagErrorf("gen", "size-scale", sizeScale, "want a number in 0..%v (0: 1; at most %v, so that the largest pictures, 3840 px web images, stay within the 8192 x 8192 pixels datahelix decodes, which run would refuse them beyond)",
			gen.MaxSizeScale, gen.MaxSizeScale)
	}
	return nil
}

// genProgress returns gen's progress hook and the function to call when
// generation ends: a bar when stderr is a terminal, else progressLines
// (batch logs keep every line, so a bar's redraws would flood them).
func genProgress(stderr io.Writer, preset string, start time.Time) (func(done, total int), func()) {
	if cli.IsTerminal(stderr) {
		var bar *progressbar.ProgressBar
		progress := func(done, total int) {
			if bar == nil {
				bar = cli.NewBar(stderr, total, "generating "+preset)
			}
			bar.Set(done)
		}
		return progress, func() {
			if bar != nil {
				bar.Finish()
			}
		}
	}
	return progressLines(stderr, preset, start), func() {}
}

// progressLines returns a progress hook that writes one line each time
// the count done passes another tenth of total (and at the end), with the
// time since start. Generate calls it under its lock, in order.
func progressLines(w io.Writer, preset string, start time.Time) func(done, total int) {
	last := 0 // tenths reported
	return func(done, total int) {
		tenths := done * 10 / total // 10 only at the end
		if tenths == last {
			return
		}
		last = tenths
		fmt.Fprintf(w, "gen: %s: %d/%d samples (%d%%), %.0f s\n", preset, done, total, done*100/total, time.Since(start).Seconds())
	}
}
