package launcher

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"time"

	"github.com/datahelix/datahelix/internal/cli"
	"golang.org/x/sys/unix"
)

// trainer is the training program a rank of datahelix train runs as its
// child: in a process group of its own (so that a signal reaches it and
// whatever it started, DataLoader workers included), killed with its
// parent (PR_SET_PDEATHSIG), with one end of the bridge's socket pair as
// an inherited file.
type trainer struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed once the child was reaped
	state  *os.ProcessState
	err    error // the wait's, or the start's
}

// trainerExitError is a trainer that did not exit with status 0.
type trainerExitError struct {
	rank  int
	state *os.ProcessState
}

func (e trainerExitError) ExitStatus() int { return cli.ExitTrainer }

func (e trainerExitError) Error() string {
	return fmt.Sprintf("the trainer of rank %d (pid %d) %s", e.rank, e.state.Pid(), describeExit(e.state))
}

// describeExit says how a process ended: "exited with status 2", "was
// killed by SIGKILL".
func describeExit(st *os.ProcessState) string {
	ws, ok := st.Sys().(syscall.WaitStatus)
	if ok && ws.Signaled() {
		return "was killed by " + unix.SignalName(ws.Signal())
	}
	return fmt.Sprintf("exited with status %d", st.ExitCode())
}

// startTrainer starts argv with env added to this process's environment
// and extra as its file descriptor 3. Its output goes to stdout and
// stderr. The child is started from an OS thread that stays locked until
// the child is reaped: PR_SET_PDEATHSIG fires when the thread that
// forked the child ends, not the process, and Go ends threads.
func startTrainer(argv, env []string, extra *os.File, stdout, stderr io.Writer) (*trainer, error) {
	t := &trainer{exited: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = append(os.Environ(), env...)
		cmd.Stdin = nil
		cmd.Stdout, cmd.Stderr = stdout, stderr
		cmd.ExtraFiles = []*os.File{extra}
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			started <- err
			close(t.exited)
			return
		}
		t.cmd = cmd
		started <- nil
		t.err = cmd.Wait()
		t.state = cmd.ProcessState
		close(t.exited)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("cannot start the trainer %q: %w", argv[0], err)
	}
	return t, nil
}

// done reports whether the trainer exited.
func (t *trainer) done() bool {
	select {
	case <-t.exited:
		return true
	default:
		return false
	}
}

// exitError is nil when the trainer exited with status 0, and says how it
// ended otherwise. Call it once exited is closed.
func (t *trainer) exitError(rank int) error {
	if t.state == nil {
		return fmt.Errorf("the trainer of rank %d: %w", rank, t.err)
	}
	if t.state.Success() {
		return nil
	}
	return trainerExitError{rank: rank, state: t.state}
}

// signal sends sig to the trainer's process group.
func (t *trainer) signal(sig syscall.Signal) {
	if t.cmd != nil && !t.done() {
		syscall.Kill(-t.cmd.Process.Pid, sig)
	}
}

// stop ends the trainer's process group: sig (SIGTERM), then SIGKILL if
// it has not exited after grace. It returns once the trainer was reaped.
func (t *trainer) stop(sig syscall.Signal, grace time.Duration) {
	if t.done() {
		t.killGroup() // what it started may outlive it
		return
	}
	t.signal(sig)
	select {
	case <-t.exited:
	case <-time.After(grace):
		t.signal(syscall.SIGKILL)
		<-t.exited
	}
	t.killGroup()
}

// killGroup kills whatever is left of the trainer's process group (its
// own children), once the trainer itself exited.
func (t *trainer) killGroup() {
	if t.cmd != nil {
		syscall.Kill(-t.cmd.Process.Pid, syscall.SIGKILL) // ESRCH: nothing was left
	}
}
