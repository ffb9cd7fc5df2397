package cli

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/datahelix/datahelix/spmd"
)

// The exit statuses of the datahelix command, one per class of failure,
// so that a script (a Slurm epilogue, a requeue rule) can tell a bad
// dataset from a lost node without reading the message. They are a
// promise: docs/failures.md#exit-statuses lists them, and a new class
// takes a new number rather than reusing one.
const (
	ExitOK       = 0
	ExitFailure  = 1 // anything not in a class below
	ExitUsage    = 2 // a bad flag or argument, before MPI starts
	ExitBadInput = 3 // the dataset, a shard or a checkpoint cannot be used
	ExitLaunch   = 4 // MPI's world is not the one the launcher started (srun without --mpi=pmix)
	ExitDisagree = 5 // the ranks were started with different settings or data
	ExitPlan     = 6 // the ranks' plans diverged while training
	ExitStall    = 7 // no step delivered for --stall-timeout
	ExitPeerLost = 8 // a rank unreachable for --peer-timeout
	ExitTrainer  = 9 // a trainer failed: exited, was killed, never connected
	// A signal N ends the command with 128+N (130 for SIGINT, 143 for
	// SIGTERM), as a shell reports a command the signal killed.
)

// Statuser is an error that carries its exit status.
type Statuser interface{ ExitStatus() int }

// statusError gives err the exit status of its class; errors.Is and
// errors.As see err through it.
type statusError struct {
	status int
	err    error
}

func (e statusError) Error() string   { return e.err.Error() }
func (e statusError) Unwrap() error   { return e.err }
func (e statusError) ExitStatus() int { return e.status }

// WithStatus returns err with the exit status status, or nil for nil.
func WithStatus(status int, err error) error {
	if err == nil {
		return nil
	}
	return statusError{status: status, err: err}
}

// ExitStatus maps the error a command returned to the process's exit
// status (see the constants above). A signal wins over the class of the
// error it caused; the outermost status an error carries wins over those
// it wraps.
func ExitStatus(err error) int {
	if err == nil || errors.Is(err, ErrHelp) {
		return ExitOK
	}
	if errors.Is(err, ErrUsage) {
		return ExitUsage
	}
	if ie, ok := Interrupted(err); ok {
		return ie.Status()
	}
	var st Statuser
	if errors.As(err, &st) {
		return st.ExitStatus()
	}
	if errors.Is(err, spmd.ErrPlanMismatch) {
		return ExitPlan
	}
	return ExitFailure
}

// ErrReported matches errors that commands return after printing them;
// Reported makes one.
var ErrReported = errors.New("error already reported")

// Reported marks err as printed already: Main maps it to its status
// without printing it again.
func Reported(err error) error { return reportedError{err} }

type reportedError struct{ err error }

func (e reportedError) Error() string        { return e.err.Error() }
func (e reportedError) Unwrap() error        { return e.err }
func (e reportedError) Is(target error) bool { return target == ErrReported }

// NotifyInterrupt returns a context that SIGINT or SIGTERM cancels with
// an InterruptedError as its cause, and a function that stops listening.
// The first signal also gives the signals their default action back, so
// that a second Ctrl-C ends a command whose shutdown is stuck.
func NotifyInterrupt(parent context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(parent)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case sig := <-sigs:
			signal.Stop(sigs)
			cancel(InterruptedError{Sig: sig.(syscall.Signal)})
		case <-done:
		}
	}()
	return ctx, func() {
		signal.Stop(sigs)
		close(done)
		cancel(nil)
	}
}

// InterruptedError is the cause of the command's context when a signal
// stops it. It reads "interrupted by SIGTERM", is a context.Canceled for
// code that checks for cancellation, and gives the shell's exit status
// for a death by that signal.
type InterruptedError struct{ Sig syscall.Signal }

func (e InterruptedError) Error() string { return "interrupted by " + unix.SignalName(e.Sig) }
func (e InterruptedError) Unwrap() error { return context.Canceled }

// Status is 128 plus the signal's number: 130 for SIGINT, 143 for
// SIGTERM, as a shell reports a command the signal killed.
func (e InterruptedError) Status() int { return 128 + int(e.Sig) }

// Interrupted returns the interruption err comes from, if any.
func Interrupted(err error) (InterruptedError, bool) {
	var ie InterruptedError
	ok := errors.As(err, &ie)
	return ie, ok
}

// StopReason returns err, or the cause of ctx's cancellation when err is
// a consequence of it that does not say why (a context.Canceled from
// ctx.Err() somewhere below).
func StopReason(ctx context.Context, err error) error {
	if err == nil || ctx.Err() == nil || !errors.Is(err, context.Canceled) {
		return err
	}
	if cause := context.Cause(ctx); !errors.Is(err, cause) {
		return cause
	}
	return err
}
