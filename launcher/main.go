// Package launcher is the datahelix command: its flags, the commands'
// bodies, environment detection (mpirun, srun, Slurm, PMIx), CPU pinning
// and start-up errors. cmd/datahelix is its main package:
//
//	mpirun -np 4 datahelix info
//	srun datahelix run --data /scratch/shards
//
// Run "datahelix help" for the list of commands.
package launcher

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Command runs the datahelix command line of this process (os.Args) and
// exits with its status; SIGINT and SIGTERM cancel it with their status
// (130, 143), as a shell reports a command they killed.
func Command() { commandWith(context.Background()) }

// commandWith is Command under parent, which may carry what a test injects
// (withGPUOverride).
func commandWith(parent context.Context) {
	ctx, stop := notifyInterrupt(parent)
	code := Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// notifyInterrupt returns a context that SIGINT or SIGTERM cancels with
// an interruptedError as its cause, and a function that stops listening.
// The first signal also gives the signals their default action back, so
// that a second Ctrl-C ends a command whose shutdown is stuck.
func notifyInterrupt(parent context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(parent)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case sig := <-sigs:
			signal.Stop(sigs)
			cancel(interruptedError{sig: sig.(syscall.Signal)})
		case <-done:
		}
	}()
	return ctx, func() {
		signal.Stop(sigs)
		close(done)
		cancel(nil)
	}
}

// interruptedError is the cause of the command's context when a signal
// stops it. It reads "interrupted by SIGTERM", is a context.Canceled for
// code that checks for cancellation, and gives the shell's exit status
// for a death by that signal.
type interruptedError struct{ sig syscall.Signal }

func (e interruptedError) Error() string { return "interrupted by " + unix.SignalName(e.sig) }
func (e interruptedError) Unwrap() error { return context.Canceled }

// status is 128 plus the signal's number: 130 for SIGINT, 143 for
// SIGTERM, as a shell reports a command the signal killed.
func (e interruptedError) status() int { return 128 + int(e.sig) }

// Main runs the command line args and returns the process exit code:
// 0 on success, 2 for a usage error (reported before MPI starts), 128+N
// when signal N (SIGINT, SIGTERM) cancelled ctx with an interruptedError,
// the status of its class for the failures exitStatus knows, 1 for any
// other.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		if len(args) > 1 {
			c, rest, ok := lookup(args[1:])
			if !ok || len(rest) > 0 {
				fmt.Fprintf(stderr, "datahelix: help: unknown command %q (run \"datahelix help\" for the list)\n", strings.Join(args[1:], " "))
				return exitUsage
			}
			return exit(ctx, c.run(ctx, stdout, stderr, []string{"-h"}), stderr)
		}
		printHelp(stdout)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	c, rest, ok := lookup(args)
	if !ok {
		fmt.Fprintf(stderr, "datahelix: unknown command %q (run \"datahelix help\" for the list)\n", args[0])
		return exitUsage
	}
	return exit(ctx, c.run(ctx, stdout, stderr, rest), stderr)
}

// exit prints err on one line, unless it was reported already, and maps
// it to an exit code. An error that is only the consequence of ctx's
// cancellation is replaced by the cause, which says what stopped the
// command.
func exit(ctx context.Context, err error, stderr io.Writer) int {
	err = stopReason(ctx, err)
	status := exitStatus(err)
	if status != exitOK && (status == exitUsage || !errors.Is(err, errReported)) {
		fmt.Fprintf(stderr, "datahelix: %v\n", err)
	}
	return status
}

// stopReason returns err, or the cause of ctx's cancellation when err is
// a consequence of it that does not say why (a context.Canceled from
// ctx.Err() somewhere below).
func stopReason(ctx context.Context, err error) error {
	if err == nil || ctx.Err() == nil || !errors.Is(err, context.Canceled) {
		return err
	}
	if cause := context.Cause(ctx); !errors.Is(err, cause) {
		return cause
	}
	return err
}

// interrupted returns the interruption err comes from, if any.
func interrupted(err error) (interruptedError, bool) {
	var ie interruptedError
	ok := errors.As(err, &ie)
	return ie, ok
}

// errReported matches errors that commands return after printing them;
// reported makes one.
var errReported = errors.New("error already reported")

// reported marks err as printed already: exit maps it to its status
// without printing it again.
func reported(err error) error { return reportedError{err} }

type reportedError struct{ err error }

func (e reportedError) Error() string        { return e.err.Error() }
func (e reportedError) Unwrap() error        { return e.err }
func (e reportedError) Is(target error) bool { return target == errReported }

func printHelp(w io.Writer) {
	fmt.Fprintln(w, `datahelix keeps GPUs fed in multimodal data-parallel training.
Every rank of an MPI job runs the same command, e.g.

	./mpirun.sh -np 4 datahelix run
	srun datahelix run --data /scratch/shards

commands:`)
	cmds := sortedCommands()
	width := 0
	for _, c := range cmds {
		width = max(width, len(c.name))
	}
	for _, c := range cmds {
		fmt.Fprintf(w, "  %-*s  %s\n", width, c.name, c.summary)
	}
	fmt.Fprintln(w, `
"datahelix help COMMAND" or "datahelix COMMAND -h" shows a command's flags.`)
}
