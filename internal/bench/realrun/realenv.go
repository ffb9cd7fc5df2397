package realrun

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/datahelix/datahelix/internal/bench/cmdinfo"
	"github.com/datahelix/datahelix/internal/cli"
	"github.com/datahelix/datahelix/internal/collectivetest"
	"github.com/datahelix/datahelix/internal/shardindex"
)

// ErrReal reports a real run or measurement (mpirun, mpicc, ffmpeg, the
// datahelix binary) that failed; the wrapping error names the command
// and ends with the tail of its output.
var ErrReal = errors.New("bench: real run failed")

// RealEnv is what the real runs and the measured sections need from the
// command that runs them: the datahelix binary started under mpirun, the
// cache of generated datasets and the size of the real runs.
type RealEnv struct {
	// Binary is the datahelix executable that mpirun starts ("": this
	// process's executable, right when it is datahelix bench).
	Binary string
	// CacheDir holds the generated datasets (CacheDir/bench/real/...) and
	// shard indexes ("": $DATAHELIX_CACHE, else the user cache
	// directory's datahelix, as datahelix run chooses).
	CacheDir string
	// Scale sizes the real runs (zero fields: DefaultRealScale's).
	Scale RealScale
	// Cores is the CPU count the real runs share (0: runtime.NumCPU()).
	Cores int
	// Bridge sets the bridge section's runs (zero fields: DefaultBridge's).
	Bridge BridgeConfig
	// Log receives progress lines (nil: discarded).
	Log io.Writer
}

var (
	realEnvMu sync.Mutex
	realEnv   RealEnv
)

// SetRealEnv configures the real runs and the measured sections; the
// datahelix bench command calls it before BuildReport.
func SetRealEnv(e RealEnv) {
	realEnvMu.Lock()
	defer realEnvMu.Unlock()
	realEnv = e
}

// CurrentRealEnv returns the configured environment with defaults filled.
func CurrentRealEnv() (RealEnv, error) {
	realEnvMu.Lock()
	e := realEnv
	realEnvMu.Unlock()
	if e.Binary == "" {
		// datahelix, beside datahelix-bench; inside datahelix itself (a
		// test binary standing for it), this executable.
		exe, err := cli.FindBinary(cmdinfo.Main, cmdinfo.MainEnv)
		if err != nil {
			if exe, err = os.Executable(); err != nil {
				return e, fmt.Errorf("%w: cannot find the datahelix binary: %v", ErrReal, err)
			}
		}
		e.Binary = exe
	}
	if e.CacheDir == "" {
		e.CacheDir = shardindex.DefaultCacheDir()
	}
	e.Scale = e.Scale.withDefaults()
	e.Bridge = e.Bridge.withDefaults()
	if e.Cores <= 0 {
		e.Cores = runtime.NumCPU()
	}
	if e.Log == nil {
		e.Log = io.Discard
	}
	return e, nil
}

// Logf writes one progress line.
func (e RealEnv) Logf(format string, args ...any) {
	fmt.Fprintf(e.Log, "bench: "+format+"\n", args...)
}

// MPIRun runs np ranks of the datahelix binary with args under mpirun
// (collectivetest.MPIRun: --oversubscribe, root and container settings)
// with extra environment variables, and returns its standard output.
// A failure names the command and carries the tail of its output.
func (e RealEnv) MPIRun(ctx context.Context, timeout time.Duration, np int, env []string, args ...string) ([]byte, error) {
	out, _, err := e.mpiRunStats(ctx, timeout, np, env, e.Binary, args...)
	return out, err
}

// MPIRunProgram is MPIRun for any program.
func (e RealEnv) MPIRunProgram(ctx context.Context, timeout time.Duration, np int, env []string, prog string, args ...string) ([]byte, error) {
	out, _, err := e.mpiRunStats(ctx, timeout, np, env, prog, args...)
	return out, err
}

// JobStats is how one mpirun job used the shared machine.
type JobStats struct {
	Wall time.Duration
	// CPU is the CPU time of mpirun and the ranks it reaped.
	CPU time.Duration
	// OthersCores is the mean number of cores every other process of the
	// machine kept busy during the job (from /proc/stat, less the job's
	// own CPU time); -1 when unknown.
	OthersCores float64
	// Load is /proc/loadavg's 1-minute figure before and after.
	Load [2]float64
}

// mpiRunStats is mpiRunProgram that also measures the job's CPU time and
// what the rest of the machine used meanwhile.
func (e RealEnv) mpiRunStats(ctx context.Context, timeout time.Duration, np int, env []string, prog string, args ...string) ([]byte, JobStats, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := collectivetest.MPIRun(ctx, np, prog, args...)
	cmd.Env = append(os.Environ(), env...)
	st := JobStats{OthersCores: -1}
	st.Load[0] = loadAvg()
	busy0, ok0 := machineBusy()
	t0 := time.Now()
	out, err := RunCommand(ctx, cmd)
	st.Wall = time.Since(t0)
	busy1, ok1 := machineBusy()
	st.Load[1] = loadAvg()
	if ps := cmd.ProcessState; ps != nil {
		st.CPU = ps.UserTime() + ps.SystemTime()
	}
	if ok0 && ok1 && st.Wall > 0 {
		st.OthersCores = max(float64(busy1-busy0-st.CPU)/float64(st.Wall), 0)
	}
	return out, st, err
}

// RunCommand runs cmd, started with exec.CommandContext(ctx, ...), and
// returns its standard output; when ctx ends, cmd's whole process group
// is killed (stopGroup), mpirun's ranks with it. When ctx was cancelled from outside (a
// signal, another rank's failure), the error is short, names the program
// and wraps the cancellation's cause, so that errors.Is and errors.As
// see what stopped the command (the launcher maps an interruption to
// exit status 130 or 143). Any other failure, a timeout included, is an
// ErrReal that names the command and ends with the tail of its standard
// error (or output), when there is one.
func RunCommand(ctx context.Context, cmd *exec.Cmd) ([]byte, error) {
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	reap := stopGroup(cmd, 0)
	err := cmd.Run()
	reap()
	if err == nil {
		return stdout.Bytes(), nil
	}
	if ctx.Err() != nil {
		cause := context.Cause(ctx)
		if !errors.Is(cause, context.DeadlineExceeded) {
			return nil, fmt.Errorf("bench: %s stopped: %w", filepath.Base(cmd.Args[0]), cause)
		}
		err = fmt.Errorf("timed out (%w): %w", cause, err)
	}
	out := stderr.Bytes()
	if len(bytes.TrimSpace(out)) == 0 {
		out = stdout.Bytes()
	}
	return nil, CommandFailed(cmd, err, out, 600)
}

// CommandFailed is the error of a command that failed with err: ErrReal,
// its command line, err, and the last limit bytes of its output if any.
func CommandFailed(cmd *exec.Cmd, err error, out []byte, limit int) error {
	err = fmt.Errorf("%w: %s: %w", ErrReal, commandLine(cmd), err)
	if t := Tail(out, limit); t != "" {
		err = fmt.Errorf("%w: %s", err, t)
	}
	return err
}

// commandLine is the command as a shell would show it (arguments with
// spaces quoted).
func commandLine(cmd *exec.Cmd) string {
	parts := make([]string, len(cmd.Args))
	for i, a := range cmd.Args {
		if a == "" || strings.ContainsAny(a, " \t\"'") {
			a = fmt.Sprintf("%q", a)
		}
		parts[i] = a
	}
	return strings.Join(parts, " ")
}

// Tail returns the last n bytes of out, trimmed, on one line.
func Tail(out []byte, n int) string {
	out = bytes.TrimSpace(out)
	if len(out) > n {
		out = append([]byte("..."), out[len(out)-n:]...)
	}
	return strings.Join(strings.Fields(string(out)), " ")
}

// clockTicks is USER_HZ, the unit of /proc/stat (100 on Linux).
const clockTicks = 100

// machineBusy returns the CPU time all processes of the machine have
// used since boot (the busy fields of /proc/stat's "cpu" line).
func machineBusy() (time.Duration, bool) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, false
	}
	return parseProcStat(data)
}

// parseProcStat reads the busy time of /proc/stat's first line: user,
// nice, system, irq, softirq and steal (guest time is inside user).
func parseProcStat(data []byte) (time.Duration, bool) {
	line, _, _ := bytes.Cut(data, []byte("\n"))
	f := strings.Fields(string(line))
	if len(f) < 9 || f[0] != "cpu" {
		return 0, false
	}
	// The sum must fit a Duration: about 292 CPU-years of ticks.
	const maxTicks = uint64(math.MaxInt64 / int64(time.Second/clockTicks))
	var ticks uint64
	for _, i := range []int{1, 2, 3, 6, 7, 8} {
		v, err := strconv.ParseUint(f[i], 10, 64)
		if err != nil || v > maxTicks-ticks {
			return 0, false
		}
		ticks += v
	}
	return time.Duration(ticks) * (time.Second / clockTicks), true
}

// loadAvg returns /proc/loadavg's 1-minute figure (-1 when unknown): the
// report states how busy the shared machine was around a real run.
func loadAvg() float64 {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	var l float64
	if _, err := fmt.Sscan(string(data), &l); err != nil {
		return -1
	}
	return l
}

// stopGrace is how long a stopped command's process group has between
// SIGTERM and SIGKILL: mpirun forwards SIGTERM to its ranks, and datahelix
// train gives its trainer bridgeGrace to exit.
var stopGrace = 10 * time.Second

// stopGroup makes cmd, not yet started, the leader of a process group of
// its own, and has the end of its context stop the whole group: SIGTERM,
// then SIGKILL after grace, or SIGKILL at once for a grace of 0. (Killing
// mpirun alone leaves its ranks running, and their trainers with them.) Call the returned reap after
// cmd.Run: when the run was stopped it kills what the group left (a
// trainer that ignored SIGTERM), the group being ours, its leader just
// reaped.
func stopGroup(cmd *exec.Cmd, grace time.Duration) (reap func()) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var mu sync.Mutex
	var kill *time.Timer
	cmd.Cancel = func() error {
		pgid := -cmd.Process.Pid
		if grace == 0 {
			return syscall.Kill(pgid, syscall.SIGKILL)
		}
		mu.Lock()
		kill = time.AfterFunc(grace, func() { _ = syscall.Kill(pgid, syscall.SIGKILL) })
		mu.Unlock()
		return syscall.Kill(pgid, syscall.SIGTERM)
	}
	// A member that outlived the SIGKILL holding the output open (it
	// cannot: a backstop).
	cmd.WaitDelay = max(2*grace, 5*time.Second)
	return func() {
		mu.Lock()
		defer mu.Unlock()
		if kill != nil {
			kill.Stop()
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
	}
}
