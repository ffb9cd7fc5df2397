package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/datahelix/datahelix/collective"
)

func init() {
	register(command{
		name:    "info",
		summary: "print where every rank runs (host, local rank, CPU set) and the allgather latency (smoke test of the MPI job)",
		run:     runInfo,
	})
}

func runInfo(ctx context.Context, stdout, stderr io.Writer, args []string) error {
	var wf worldFlags
	fs := newFlags("info", "[flags]")
	wf.register(fs)
	bytes := fs.Int("bytes", 1024, "allgather block `size` per rank for the latency measurement")
	rounds := fs.Int("rounds", 1000, "allgather `rounds` timed for the latency measurement")
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	if *bytes < 0 || *bytes > 64<<20 {
		return usagef("--bytes %d: want 0..67108864", *bytes)
	}
	if *rounds < 1 {
		return usagef("--rounds %d: want at least 1", *rounds)
	}
	return runWorld(ctx, wf, stdout, stderr, func(ctx context.Context, c collective.Comm, out io.Writer) error {
		in := c.Info()
		cpus, err := currentCPUs()
		if err != nil {
			cpus = "unknown"
		}
		// Rank 0 prints every rank's line, in rank order. An MPI rank adds
		// how its binding waits and sends, which its own environment
		// decides (DATAHELIX_MPI_WAIT, DATAHELIX_MPI_PARTS): a variable
		// that did not reach a node's ranks shows here.
		line := fmt.Sprintf("rank %d/%d local %d host %s cpus %s mpi %q", c.Rank(), c.Size(), in.LocalRank, in.Host, cpus, in.Library)
		if wait, parts, ok := mpiBinding(c); ok {
			line += fmt.Sprintf(" wait %s parts %s", wait, parts)
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
		lat, err := allgatherLatency(c, *bytes, *rounds)
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

type latency struct{ p50, p99 float64 } // microseconds

// allgatherLatency times rounds allgathers of size bytes per rank after a
// warm-up, as seen by each rank; every rank must call it.
func allgatherLatency(c collective.Comm, size, rounds int) (latency, error) {
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
		t := time.Now()
		if err := c.Allgather(send, recv); err != nil {
			return latency{}, err
		}
		us[i] = float64(time.Since(t).Nanoseconds()) / 1e3
	}
	slices.Sort(us)
	return latency{p50: us[len(us)/2], p99: us[len(us)*99/100]}, nil
}
