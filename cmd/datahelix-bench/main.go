// Command datahelix-bench is the benchmark harness of datahelix: bench,
// bench plan and bench calibrate, with the plotting they need, kept out of
// the datahelix binary that runs jobs. datahelix runs it for those
// commands (it must be installed beside datahelix, or named by
// DATAHELIX_BENCH); it runs datahelix for bench exchange, an MPI job:
//
//	datahelix bench --out bench-out
//	datahelix-bench bench --out bench-out   # the same
package main

import (
	"context"
	"os"

	"github.com/datahelix/datahelix/internal/bench"
	"github.com/datahelix/datahelix/internal/bench/cmdinfo"
	"github.com/datahelix/datahelix/internal/cli"
)

func main() {
	ctx, stop := cli.NotifyInterrupt(context.Background())
	code := cli.Main(ctx, []cli.Command{
		bench.Command, bench.PlanCommand, bench.CalibrateCommand,
		cli.External(cmdinfo.Exchange, cmdinfo.ExchangeSummary, cmdinfo.Main, cmdinfo.MainEnv),
	}, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
