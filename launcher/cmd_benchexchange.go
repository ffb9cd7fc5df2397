package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"path/filepath"

	"github.com/datahelix/datahelix/bench"
	"github.com/datahelix/datahelix/collective"
	"github.com/datahelix/datahelix/decode"
	"github.com/datahelix/datahelix/spmd"
)

func init() {
	register(command{
		name:    "bench exchange",
		summary: "time moving compressed samples between 2 ranks: the exchange path versus bare sends (run under mpirun -np 2)",
		run:     runBenchExchange,
	})
}

func runBenchExchange(ctx context.Context, stdout, stderr io.Writer, args []string) error {
	var wf worldFlags
	fs := newFlags("bench exchange", "[flags]")
	wf.register(fs)
	data := fs.String("data", "", "dataset `path` (default: the default dataset)")
	cacheDir := fs.String("cache-dir", "", "cache `dir`ectory (as for run)")
	samples := fs.Int("samples", 4, "`samples` per message, taken from the first shard")
	rounds := fs.Int("rounds", 50, "`messages` timed per path")
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	if *samples < 1 || *rounds < 1 {
		return usagef("--samples and --rounds must be at least 1")
	}
	if wf.ranks != 0 && wf.ranks != 2 {
		return usagef("bench exchange: --ranks %d: it needs 2 ranks exactly (--ranks 2, or mpirun -np 2)", wf.ranks)
	}
	return runWorld(ctx, wf, stdout, stderr, func(ctx context.Context, c collective.Comm, out io.Writer) error {
		if c.Size() != 2 {
			return collective.AllRanks(fmt.Errorf("bench exchange needs 2 ranks exactly, this job has %d: run it under mpirun -np 2", c.Size()))
		}
		root := cacheRoot(*cacheDir)
		path := *data
		if path == "" {
			var err error
			if path, err = defaultDataset(ctx, c, root, 1, stderr); err != nil {
				return err
			}
		}
		ds, err := decode.OpenDataset(path, filepath.Join(root, "index"))
		if err != nil {
			return collective.AllRanks(err)
		}
		defer ds.Close()
		sh := ds.Shards[0]
		if sh.Len() < *samples {
			return collective.AllRanks(fmt.Errorf("--samples %d: %s holds %d", *samples, sh.Path(), sh.Len()))
		}
		var ss []*decode.Sample
		for i := 0; i < *samples; i++ {
			s, err := sh.ReadSample(i)
			if err != nil {
				return collective.AllRanks(err)
			}
			ss = append(ss, s)
		}
		st, err := spmd.MeasureExchange(c, ss, *rounds)
		if err != nil {
			return err
		}
		if c.Rank() != 0 {
			return nil
		}
		g := roundExchange(bench.NewGoExchange(st, *samples))
		// A readable line first; the JSON line, last, is for scripts and
		// the bench report (which parses it).
		fmt.Fprintf(out, "%d messages of %d samples (%d bytes): exchange path %.2f µs (%.1f MB/s), bare sends %.2f µs (%.1f MB/s), exchange/bare %.3f\n",
			g.Messages, g.Samples, g.Bytes, g.ExchangeUSPer, g.ExchangeMBps, g.BareUSPer, g.BareMBps, g.ExchangeOnBare)
		line, err := json.Marshal(g)
		if err != nil {
			return err
		}
		fmt.Fprintln(out, string(line))
		return nil
	})
}

// roundExchange rounds the measured figures to what they can tell, so the
// JSON line reads 12432.3, not 12432.311280768185: times per message to
// 0.01 µs, rates to 0.1 MB/s, the ratio to 0.001. The rates and the ratio
// are computed from the rounded times, so that they follow from the
// printed figures; a time rounds to at least 0.01 µs, keeping them finite.
func roundExchange(g bench.GoExchange) bench.GoExchange {
	round := func(v, per float64) float64 { return math.Round(v*per) / per } // per: steps per unit
	g.ExchangeUSPer = max(round(g.ExchangeUSPer, 100), 0.01)
	g.BareUSPer = max(round(g.BareUSPer, 100), 0.01)
	g.ExchangeMBps = round(float64(g.Bytes)/g.ExchangeUSPer, 10)
	g.BareMBps = round(float64(g.Bytes)/g.BareUSPer, 10)
	g.ExchangeOnBare = round(g.ExchangeUSPer/g.BareUSPer, 1000)
	return g
}
