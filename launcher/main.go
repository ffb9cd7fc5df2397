// Command datahelix is the data plane's one binary. Every rank of an MPI
// job runs the same command:
//
//	mpirun -np 4 datahelix info
//	srun datahelix run --data /scratch/shards
//
// Run "datahelix help" for the list of commands.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Main runs the command line args and returns the process exit code:
// 0 on success, 2 for a usage error (reported before MPI starts), 1 for
// any other failure.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		if len(args) > 1 {
			c, rest, ok := lookup(args[1:])
			if !ok || len(rest) > 0 {
				fmt.Fprintf(stderr, "datahelix: help: unknown command %q (run \"datahelix help\" for the list)\n", strings.Join(args[1:], " "))
				return 2
			}
			return exit(c.run(ctx, stdout, stderr, []string{"-h"}), stderr)
		}
		printHelp(stdout)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	c, rest, ok := lookup(args)
	if !ok {
		fmt.Fprintf(stderr, "datahelix: unknown command %q (run \"datahelix help\" for the list)\n", args[0])
		return 2
	}
	return exit(c.run(ctx, stdout, stderr, rest), stderr)
}

// exit prints err on one line and maps it to an exit code.
func exit(err error, stderr io.Writer) int {
	var ue usageError
	switch {
	case err == nil, errors.Is(err, errHelp):
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "datahelix: %v\n", err)
		return 2
	case errors.Is(err, errReported):
		return 1
	}
	fmt.Fprintf(stderr, "datahelix: %v\n", err)
	return 1
}

// errReported is returned by commands that already printed their failure.
var errReported = errors.New("error already reported")

func printHelp(w io.Writer) {
	fmt.Fprintln(w, `datahelix keeps GPUs fed in multimodal data-parallel training.
Every rank of an MPI job runs the same command, e.g.

	./mpirun.sh -np 4 datahelix run
	srun datahelix run --data /scratch/shards

commands:`)
	for _, c := range sortedCommands() {
		fmt.Fprintf(w, "  %-14s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, `
"datahelix help COMMAND" or "datahelix COMMAND -h" shows a command's flags.`)
}
