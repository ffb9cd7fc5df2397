package realrun

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/datahelix/datahelix/internal/bench/workload"
)

// testSignal stands for the launcher's interruptedError: the cause a
// signal cancels the command's context with, a context.Canceled.
type testSignal struct{ name string }

func (e testSignal) Error() string { return "interrupted by " + e.name }
func (e testSignal) Unwrap() error { return context.Canceled }

// TestRunCommandInterrupted checks that a real run stopped by a signal
// (the parent context cancelled with a cause while mpirun runs) returns
// a short error that wraps the cause, through the wrapping a real run
// adds, and not an ErrReal with the command line.
func TestRunCommandInterrupted(t *testing.T) {
	if _, err := exec.LookPath("sleep"); err != nil {
		t.Skip("no sleep command")
	}
	parent, cancel := context.WithCancelCause(t.Context())
	defer cancel(nil)
	// As mpiRunStats: the run's own timeout under the command's context.
	ctx, stop := context.WithTimeout(parent, time.Minute)
	defer stop()
	sig := testSignal{"SIGTERM"}
	time.AfterFunc(100*time.Millisecond, func() { cancel(sig) })
	t0 := time.Now()
	_, err := RunCommand(ctx, exec.CommandContext(ctx, "sleep", "30"))
	if time.Since(t0) > 20*time.Second {
		t.Errorf("the command ran %v after the cancellation", time.Since(t0))
	}
	err = fmt.Errorf("bench: workload kinetics: %w", err) // as Evaluate wraps it
	var got testSignal
	if !errors.As(err, &got) || got != sig || !errors.Is(err, context.Canceled) {
		t.Errorf("error %v does not wrap the cause %v", err, sig)
	}
	if errors.Is(err, ErrReal) {
		t.Errorf("error %v is an ErrReal: an interruption is not a failed run", err)
	}
	if want := "bench: workload kinetics: bench: sleep stopped: interrupted by SIGTERM"; err.Error() != want {
		t.Errorf("message %q, want %q", err, want)
	}
}

// TestRunCommandFailed checks the message of a command that failed or
// timed out: an ErrReal naming the command, with the tail of its output
// only when it printed something (no dangling ": ").
func TestRunCommandFailed(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	tests := []struct {
		name    string
		script  string
		timeout time.Duration
		want    string // the message's end
		is      error
	}{
		{"silent", "exit 3", time.Minute, `sh -c "exit 3": exit status 3`, nil},
		{"stderr", "echo out; echo 'no  such\n file' >&2; exit 3", time.Minute, ": exit status 3: no such file", nil},
		{"stdout only", "echo only out; exit 3", time.Minute, ": exit status 3: only out", nil},
		{"timeout", "exec sleep 30", 100 * time.Millisecond, "timed out (context deadline exceeded): signal: killed", context.DeadlineExceeded},
	}
	for _, tt := range tests {
		ctx, cancel := context.WithTimeout(t.Context(), tt.timeout)
		_, err := RunCommand(ctx, exec.CommandContext(ctx, "sh", "-c", tt.script))
		cancel()
		if !errors.Is(err, ErrReal) {
			t.Errorf("%s: error %v, want an ErrReal", tt.name, err)
			continue
		}
		if tt.is != nil && !errors.Is(err, tt.is) {
			t.Errorf("%s: error %v does not wrap %v", tt.name, err, tt.is)
		}
		if msg := err.Error(); !strings.HasSuffix(msg, tt.want) || strings.HasSuffix(msg, ": ") {
			t.Errorf("%s: message %q, want it to end with %q", tt.name, msg, tt.want)
		}
	}
}

func TestParseProcStat(t *testing.T) {
	stat := "cpu  100 5 30 9000 7 1 2 3 40 0\ncpu0 50 2 15 4500 3 0 1 1 0 0\nintr 1 2 3\n"
	if got, ok := parseProcStat([]byte(stat)); !ok || got != (100+5+30+1+2+3)*10*time.Millisecond {
		t.Errorf("got %v, %v; want 1.41 s", got, ok)
	}
	for _, bad := range []string{"", "cpu 1 2 3\n", "intr 1 2 3 4 5 6 7 8 9\n", "cpu a b c d e f g h i\n", "cpu 1 1 1 1 1 1 1 99999999999999999999 1\n",
		// Each fits a uint64, the sum's Duration does not (it came out negative).
		"cpu 1000000000000 0 0 0 0 0 0 0\n", "cpu 600000000000 0 600000000000 0 0 0 0 0\n"} {
		if _, ok := parseProcStat([]byte(bad)); ok {
			t.Errorf("%q accepted", bad)
		}
	}
	if got, ok := parseProcStat([]byte("cpu 900000000000 0 0 0 0 0 0 0\n")); !ok || got != 9e18 {
		t.Errorf("the largest sum that fits: got %v, %v", got, ok)
	}
	if _, ok := machineBusy(); !ok {
		t.Skip("no /proc/stat here")
	}
}

// TestWrapfSaysBenchOnce checks that an error of the package wrapped in
// context says "bench:" once and still matches its sentinel.
func TestWrapfSaysBenchOnce(t *testing.T) {
	inner := fmt.Errorf("%w: mpirun -np 2 datahelix run: exit status 1", ErrReal)
	err := workload.Wrapf(inner, "workload %s", "text")
	if got, want := err.Error(), "bench: workload text: real run failed: mpirun -np 2 datahelix run: exit status 1"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if !errors.Is(err, ErrReal) {
		t.Errorf("%v is not an ErrReal", err)
	}
	other := workload.Wrapf(errors.New("decode: bad sample"), "workload %s", "text")
	if got, want := other.Error(), "bench: workload text: decode: bad sample"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
