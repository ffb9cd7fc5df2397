// Package launcher is the datahelix command: its dispatch table, the
// job's bodies (run, train and serve, decode, info, bench exchange), their
// flags, environment detection (mpirun, srun, Slurm, PMIx), CPU pinning
// and start-up errors. cmd/datahelix is its main package:
//
//	mpirun -np 4 datahelix info
//	srun datahelix run --data /scratch/shards
//
// Run "datahelix help" for the list of commands.
package launcher

import (
	"context"
	"io"
	"os"

	"github.com/datahelix/datahelix/internal/bench/cmdinfo"
	"github.com/datahelix/datahelix/internal/cli"
	"github.com/datahelix/datahelix/internal/datacmd"
)

// commands is the dispatch table: every command of datahelix, listed by
// name in the help. Those that run the job live here, those that work on
// a dataset alone in internal/datacmd. bench, bench plan and bench
// calibrate run in datahelix-bench (cmd/datahelix-bench), which holds the
// benchmark harness and its plotting, so that this binary links neither.
var commands = []cli.Command{
	runCommand, trainCommand, serveCommand, decodeCommand, infoCommand, benchExchangeCommand,
	cli.External(cmdinfo.Bench, cmdinfo.BenchSummary, cmdinfo.Binary, cmdinfo.BinaryEnv),
	cli.External(cmdinfo.Plan, cmdinfo.PlanSummary, cmdinfo.Binary, cmdinfo.BinaryEnv),
	cli.External(cmdinfo.Calibrate, cmdinfo.CalibrateSummary, cmdinfo.Binary, cmdinfo.BinaryEnv),
	datacmd.Gen, datacmd.Cache, datacmd.Inspect, datacmd.CostModel,
}

// Command runs the datahelix command line of this process (os.Args) and
// exits with its status; SIGINT and SIGTERM cancel it with their status
// (130, 143), as a shell reports a command they killed.
func Command() { commandWith(context.Background()) }

// commandWith is Command under parent, which may carry what a test injects
// (withGPUOverride).
func commandWith(parent context.Context) {
	ctx, stop := cli.NotifyInterrupt(parent)
	code := Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Main runs the command line args and returns the process exit code:
// 0 on success, 2 for a usage error (reported before MPI starts), 128+N
// when signal N (SIGINT, SIGTERM) cancelled ctx with a
// cli.InterruptedError, the status of its class for the failures
// cli.ExitStatus knows, 1 for any other.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return cli.Main(ctx, commands, args, stdout, stderr)
}
