package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"

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

// exchangeResult is the JSON line rank 0 prints.
type exchangeResult struct {
	Bytes          int64   `json:"bytes"`
	Samples        int     `json:"samples"`
	Messages       int     `json:"messages"`
	ExchangeUSPer  float64 `json:"exchange_us_per_message"`
	BareUSPer      float64 `json:"bare_us_per_message"`
	ExchangeMBps   float64 `json:"exchange_mb_per_s"`
	BareMBps       float64 `json:"bare_mb_per_s"`
	ExchangeOnBare float64 `json:"exchange_over_bare"`
}

func runBenchExchange(ctx context.Context, stdout, stderr io.Writer, args []string) error {
	var wf worldFlags
	fs := newFlags("bench exchange", "[flags]")
	wf.register(fs)
	data := fs.String("data", "", "dataset `path` (default: the default dataset)")
	cacheDir := fs.String("cache-dir", "", "cache `dir`ectory (as for run)")
	samples := fs.Int("samples", 4, "samples per message, taken from the first shard")
	rounds := fs.Int("rounds", 50, "messages timed per path")
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	if *samples < 1 || *rounds < 1 {
		return usagef("--samples and --rounds must be at least 1")
	}
	return runWorld(ctx, wf, stdout, stderr, func(ctx context.Context, c collective.Comm, out io.Writer) error {
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
		per := func(d float64) float64 { return d / float64(st.Messages) / 1e3 }
		r := exchangeResult{Bytes: st.Bytes, Samples: *samples, Messages: st.Messages,
			ExchangeUSPer: per(float64(st.Exchange)), BareUSPer: per(float64(st.Bare))}
		r.ExchangeMBps = float64(st.Bytes) / r.ExchangeUSPer
		r.BareMBps = float64(st.Bytes) / r.BareUSPer
		r.ExchangeOnBare = r.ExchangeUSPer / r.BareUSPer
		line, _ := json.Marshal(r)
		fmt.Fprintln(out, string(line))
		return nil
	})
}
