package launcher

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/datahelix/datahelix/collective"
	"github.com/datahelix/datahelix/internal/cli"
)

// infoCommand is datahelix info.
var infoCommand = cli.Command{
	Name:    "info",
	Summary: "print where every rank runs (host, local rank, CPU set) and the allgather latency (smoke test of the MPI job)",
	Run:     runInfo,
}

func runInfo(ctx context.Context, stdout, stderr io.Writer, args []string) error {
	var wf worldFlags
	fs := cli.NewFlags("info", "[flags]")
	wf.register(fs)
	bytes := fs.Int("bytes", 1024, fmt.Sprintf("allgather block `size` per rank for the latency measurement, 0..%d (and at most %d MiB times the ranks)", maxInfoBytes, maxInfoGather>>20))
	rounds := fs.Int("rounds", 1000, fmt.Sprintf("allgather `rounds` timed for the latency measurement, 1..%d", maxInfoRounds))
	if err := cli.ParseFlags(fs, args, stdout); err != nil {
		return err
	}
	if *bytes < 0 || *bytes > maxInfoBytes {
		return cli.FlagErrorf("", "bytes", *bytes, "want 0..%d", maxInfoBytes)
	}
	if *rounds < 1 || *rounds > maxInfoRounds {
		return cli.FlagErrorf("", "rounds", *rounds, "want 1..%d (each round keeps a time in memory)", maxInfoRounds)
	}
	// Each rank receives --bytes from every rank: check what the
	// launcher says of the world's size before MPI starts, and the
	// world's own below.
	size := wf.ranks
	if size == 0 {
		size = osLaunchEnv().Size
	}
	if err := checkInfoGather(*bytes, size); err != nil {
		return err
	}
	return runWorld(ctx, wf, stdout, stderr, func(ctx context.Context, c collective.Comm, out, _ io.Writer) error {
		if err := checkInfoGather(*bytes, c.Size()); err != nil {
			return collective.AllRanks(err)
		}
		in := c.Info()
		cpus, err := currentCPUs()
		if err != nil {
			cpus = "unknown"
		}
		// Rank 0 prints every rank's line, in rank order. An MPI rank adds
		// how its binding waits, which its own environment decides
		// (DATAHELIX_MPI_WAIT): a variable that did not reach a node's
		// ranks shows here.
		line := fmt.Sprintf("rank %d/%d local %d host %s cpus %s mpi %q", c.Rank(), c.Size(), in.LocalRank, in.Host, cpus, in.Library)
		if wait, ok := mpiWait(c); ok {
			line += fmt.Sprintf(" wait %s", wait)
		}
		line += "\n"
		lines, err := c.AllgatherVar([]byte(line))
		if err != nil {
			return err
		}
		if c.Rank() == 0 {
			for _, l := range lines {
				if _, err := out.Write(l); err != nil {
					return err
				}
			}
		}
		lat, err := allgatherLatency(ctx, c, *bytes, *rounds)
		if err != nil {
			return err
		}
		if c.Rank() == 0 {
			fmt.Fprintf(out, "allgather latency: %d ranks, %d B per rank, p50 %.1f µs, p99 %.1f µs over %d rounds (thread multiple: %v)\n",
				c.Size(), *bytes, lat.p50, lat.p99, *rounds, in.ThreadMultiple)
		}
		return nil
	})
}

// Bounds of info's flags: a time of 8 bytes per round, and the receive
// buffer of an allgather, --bytes from every rank.
const (
	maxInfoRounds = 10_000_000
	maxInfoBytes  = 64 << 20
	maxInfoGather = 1 << 30
)

// checkInfoGather refuses a --bytes whose allgather over size ranks
// needs a receive buffer of more than maxInfoGather bytes on every rank.
func checkInfoGather(bytes, size int) error {
	if size > 0 && int64(bytes)*int64(size) > maxInfoGather {
		return cli.FlagErrorf("", "bytes", bytes, "%d ranks would each receive %d MiB per allgather; want at most %d MiB (--bytes %d or less)",
			size, int64(bytes)*int64(size)>>20, maxInfoGather>>20, maxInfoGather/size)
	}
	return nil
}

type latency struct{ p50, p99 float64 } // microseconds

// allgatherLatency times rounds allgathers of size bytes per rank after a
// warm-up, as seen by each rank; every rank must call it. It stops with
// ctx's error when ctx is cancelled (a signal): a rank the signal did not
// reach waits in its next allgather until the abort that follows ends it.
func allgatherLatency(ctx context.Context, c collective.Comm, size, rounds int) (latency, error) {
	send := make([]byte, size)
	recv := make([]byte, size*c.Size())
	for i := 0; i < 20; i++ {
		if err := c.Allgather(send, recv); err != nil {
			return latency{}, err
		}
	}
	if err := c.Barrier(); err != nil {
		return latency{}, err
	}
	us := make([]float64, rounds)
	for i := range us {
		// Between rounds, outside the time: ctx.Err costs nanoseconds
		// against the microseconds of an allgather.
		if err := ctx.Err(); err != nil {
			return latency{}, err
		}
		t := time.Now()
		if err := c.Allgather(send, recv); err != nil {
			return latency{}, err
		}
		us[i] = float64(time.Since(t).Nanoseconds()) / 1e3
	}
	slices.Sort(us)
	return latency{p50: us[len(us)/2], p99: us[len(us)*99/100]}, nil
}
