package launcher

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/datahelix/datahelix/collective"
	"github.com/datahelix/datahelix/decode"
	"github.com/datahelix/datahelix/internal/bench/cmdinfo"
	"github.com/datahelix/datahelix/internal/cli"
	"github.com/datahelix/datahelix/internal/shard"
	"github.com/datahelix/datahelix/internal/shardindex"
	"github.com/datahelix/datahelix/internal/wire"
)

// benchExchangeCommand is datahelix bench exchange.
var benchExchangeCommand = cli.Command{
	Name:    cmdinfo.Exchange,
	Summary: cmdinfo.ExchangeSummary,
	Run:     runBenchExchange,
}

func runBenchExchange(ctx context.Context, stdout, stderr io.Writer, args []string) error {
	var wf worldFlags
	fs := cli.NewFlags("bench exchange", "[flags]")
	wf.register(fs)
	data := fs.String("data", "", "dataset `path` (default: the default dataset)")
	cacheDir := fs.String("cache-dir", "", "cache `dir`ectory (as for run)")
	samples := fs.Int("samples", 4, "`samples` per message, taken from the first shard")
	rounds := fs.Int("rounds", 50, "`messages` timed per path")
	if err := cli.ParseFlags(fs, args, stdout); err != nil {
		return err
	}
	switch {
	case *samples < 1:
		return cli.FlagErrorf("bench exchange", "samples", *samples, "want at least 1")
	case *rounds < 1:
		return cli.FlagErrorf("bench exchange", "rounds", *rounds, "want at least 1")
	case wf.ranks != 0 && wf.ranks != 2:
		return cli.FlagErrorf("bench exchange", "ranks", wf.ranks, "it needs 2 ranks exactly (--ranks 2, or mpirun -np 2)")
	}
	// The world's size is the launcher's: known before MPI starts. With
	// no launcher, the job is this one process.
	if env := osLaunchEnv(); wf.ranks == 0 && (env.Launcher == "" || env.Size > 0 && env.Size != 2) {
		n := max(env.Size, 1)
		return cli.Usagef("bench exchange: it needs 2 ranks exactly, this job has %d: run it under mpirun -np 2, or with --ranks 2", n)
	}
	// A --data dataset is checked before the world starts: its first
	// shard must hold --samples samples.
	if *data != "" {
		if err := exchangeDataHolds(*data, cli.CacheRoot(*cacheDir), *samples); err != nil {
			return err
		}
	}
	return runWorld(ctx, wf, stdout, stderr, func(ctx context.Context, c collective.Comm, out, errOut io.Writer) error {
		if c.Size() != 2 {
			return collective.AllRanks(fmt.Errorf("bench exchange: it needs 2 ranks exactly, this job has %d: run it under mpirun -np 2", c.Size()))
		}
		root := cli.CacheRoot(*cacheDir)
		path := *data
		if path == "" {
			var err error
			if path, err = defaultDataset(ctx, c, root, 1, errOut); err != nil {
				return err
			}
		}
		ds, err := decode.OpenDataset(path, shardindex.Dir(root))
		if err != nil {
			return collective.AllRanks(err)
		}
		defer ds.Close()
		if err := firstShardHolds(ds, *samples); err != nil {
			return collective.AllRanks(err)
		}
		sh := shard.ShardsOf(ds)[0]
		var ss []*decode.Sample
		for i := 0; i < *samples; i++ {
			s, err := sh.ReadSample(i)
			if err != nil {
				return collective.AllRanks(err)
			}
			ss = append(ss, s)
		}
		st, err := wire.MeasureExchange(c, ss, *rounds)
		if err != nil {
			return err
		}
		if c.Rank() != 0 {
			return nil
		}
		g := st.Report(*samples)
		// A readable line first; the JSON line, last, is for scripts and
		// the bench report (which parses it).
		fmt.Fprintf(out, "%d messages of %d samples (%d bytes): exchange path %.2f µs (%.1f MB/s), packed first %.2f µs (%.1f MB/s), bare sends %.2f µs (%.1f MB/s), exchange/bare %.3f, exchange/packed %.3f\n",
			g.Messages, g.Samples, g.Bytes, g.ExchangeUSPer, g.ExchangeMBps, g.PackedUSPer, g.PackedMBps, g.BareUSPer, g.BareMBps, g.ExchangeOnBare, g.ExchangeOnPacked)
		line, err := json.Marshal(g)
		if err != nil {
			return err
		}
		fmt.Fprintln(out, string(line))
		return nil
	})
}

// exchangeDataHolds checks, as a usage error, that the dataset at path
// opens and that its first shard holds samples samples (what bench
// exchange sends).
func exchangeDataHolds(path, root string, samples int) error {
	ds, err := decode.OpenDataset(path, shardindex.Dir(root))
	if err != nil {
		return cli.Usagef("bench exchange: --data: %w", err)
	}
	defer ds.Close()
	if ds.NumShards() == 0 {
		return cli.FlagErrorf("bench exchange", "data", path, "no shards")
	}
	if sh := shard.ShardsOf(ds)[0]; sh.Len() < samples {
		return cli.FlagErrorf("bench exchange", "samples", samples, "the first shard of --data, %s, holds %d", sh.Path(), sh.Len())
	}
	return nil
}

// firstShardHolds checks that the first shard of ds holds samples
// samples, what bench exchange sends.
func firstShardHolds(ds *decode.Dataset, samples int) error {
	if sh := shard.ShardsOf(ds)[0]; sh.Len() < samples {
		return fmt.Errorf("bench exchange: --samples %d: the first shard, %s, holds %d", samples, sh.Path(), sh.Len())
	}
	return nil
}
