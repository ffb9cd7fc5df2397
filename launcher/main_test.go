package launcher

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/datahelix/datahelix/collective"
	"github.com/datahelix/datahelix/gpu"
	"github.com/datahelix/datahelix/internal/bench/cmdinfo"
	"github.com/datahelix/datahelix/internal/cli"
	"github.com/datahelix/datahelix/internal/cli/clitest"
	"github.com/datahelix/datahelix/internal/collectivetest"
	"github.com/datahelix/datahelix/internal/gen/gentest"
	"github.com/datahelix/datahelix/spmd"
)

// asMainEnv makes the test binary behave as the datahelix command, so
// that tests can start it under mpirun without a separate build.
const asMainEnv = "DATAHELIX_TEST_AS_MAIN"

// slowRankEnv, "RANK:MS", makes rank RANK's simulated GPU step take MS
// milliseconds (withGPUOverride) in the test binary acting as datahelix.
const slowRankEnv = "DATAHELIX_TEST_SLOW_RANK"

func TestMain(m *testing.M) {
	if os.Getenv(asMainEnv) != "" {
		ctx := context.Background()
		if v := os.Getenv(slowRankEnv); v != "" {
			r, ms, _ := strings.Cut(v, ":")
			rank, err1 := strconv.Atoi(r)
			stepMS, err2 := strconv.Atoi(ms)
			if err1 != nil || err2 != nil {
				panic(slowRankEnv + "=" + v + ": want RANK:MS")
			}
			ctx = withGPUOverride(ctx, func(r int, g gpu.Model) gpu.Model {
				if r == rank {
					g.Base = time.Duration(stepMS) * time.Millisecond
				}
				return g
			})
		}
		commandWith(ctx)
	}
	os.Exit(runWithBench(m))
}

// runWithBench runs the tests with datahelix-bench built for the bench
// commands, which datahelix runs in that binary (DATAHELIX_BENCH names
// it).
func runWithBench(m *testing.M) int {
	dir, err := os.MkdirTemp("", "datahelix-bench")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, cmdinfo.Binary)
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/datahelix/datahelix/cmd/datahelix-bench").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building %s: %v\n%s", cmdinfo.Binary, err, out)
		return 1
	}
	os.Setenv(cmdinfo.BinaryEnv, bin)
	return m.Run()
}

func runMain(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = Main(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

// TestUsageErrors checks bad command lines: each is a usage error (exit
// status 2, one line, nothing on stdout), a cli.FlagError naming the flag
// where one flag's value is at fault, and reads as
// testdata/usage_errors.golden says.
func TestUsageErrors(t *testing.T) {
	tests := []struct {
		args []string
		flag string // the cli.FlagError's flag, "" for another usage error
	}{
		{[]string{"frobnicate"}, ""},
		{[]string{"info", "--bogus"}, ""},
		{[]string{"info", "--ranks", "-3"}, "ranks"},
		{[]string{"info", "--ranks", "2", "--profile", "gpu"}, "profile"},
		{[]string{"info", "--bytes", "-1", "--ranks", "2"}, "bytes"},
		{[]string{"info", "extra"}, ""},
		{[]string{"info", "--pin=maybe"}, ""},
		// A boolean flag's value after a space, a duration without a
		// unit, in every command.
		{[]string{"info", "--pin", "false"}, ""},
		{[]string{"run", "--quiet", "false"}, ""},
		{[]string{"run", "--check-hashes", "true", "--steps", "3"}, ""},
		{[]string{"bench", "--quiet", "0"}, ""},
		{[]string{"run", "--stall-timeout", "5"}, "stall-timeout"},
		{[]string{"run", "-stall-timeout=ten"}, "stall-timeout"},
		{[]string{"info", "--rounds", "0"}, "rounds"},
		{[]string{"run", "--max-tasks", "-2"}, "max-tasks"},
		{[]string{"run", "--stream-turns", "0"}, "stream-turns"},
		{[]string{"run", "--streams", "3", "--stream-turns", "2"}, "streams"},
		{[]string{"train", "--ring-slots", "1", "--", "python3", "train.py"}, "ring-slots"},
		{[]string{"train", "--ring-slot-mib", "-1", "--", "python3", "train.py"}, "ring-slot-mib"},
		{[]string{"help", "bogus"}, ""},
		{[]string{"help", "info", "extra"}, ""},
		{[]string{"-h", "bogus"}, ""},
	}
	tr := clitest.NewTranscript()
	for _, tt := range tests {
		tr.Add(tt.args, usageLine(t, tt.args...))
		if tt.flag == "" {
			continue
		}
		var fe cli.FlagError
		if err := commandErr(t, tt.args...); !errors.As(err, &fe) || fe.Flag != tt.flag || !errors.Is(err, cli.ErrUsage) {
			t.Errorf("%q: error %#v, want a usage error about --%s", tt.args, err, tt.flag)
		}
	}
	clitest.Golden(t, "usage_errors.golden", tr.String())
}

// TestInfoCaps checks that info refuses what it could not allocate as
// usage errors: --rounds 2000000000 allocated 16 GB and died with Go's
// fatal error. A separate process, as the launcher of a 32-rank job
// sees it, so that a failure cannot take the tests' memory.
func TestInfoCaps(t *testing.T) {
	for _, tt := range []struct {
		args []string
		env  []string
		want string
	}{
		{[]string{"info", "--rounds", "2000000000"}, nil, "datahelix: --rounds 2000000000: want 1..10000000 (each round keeps a time in memory)\n"},
		{[]string{"info", "--bytes", "67108864"}, []string{"OMPI_COMM_WORLD_SIZE=32", "OMPI_COMM_WORLD_RANK=0"},
			"datahelix: --bytes 67108864: 32 ranks would each receive 2048 MiB per allgather; want at most 1024 MiB (--bytes 33554432 or less)\n"},
		{[]string{"info", "--ranks", "4096", "--bytes", "1048576"}, nil,
			"datahelix: --bytes 1048576: 4096 ranks would each receive 4096 MiB per allgather; want at most 1024 MiB (--bytes 262144 or less)\n"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cmd := exec.CommandContext(ctx, os.Args[0], tt.args...)
		cmd.Env = cleanEnv(tt.env...)
		out, err := cmd.CombinedOutput()
		cancel()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || string(out) != tt.want {
			t.Errorf("%q: %v, output %q; want exit 2 and %q", tt.args, err, out, tt.want)
		}
	}
}

// TestHelpColumns checks that the command list keeps a gap between
// every name and its summary, and starts the summaries in one column
// ("bench calibrate" was one character wider than the column).
func TestHelpColumns(t *testing.T) {
	code, stdout, _ := runMain("help")
	if code != 0 {
		t.Fatalf("help: exit %d", code)
	}
	col := -1
	for _, c := range commands {
		prefix := "  " + c.Name + " "
		var line string
		for _, l := range strings.Split(stdout, "\n") {
			if strings.HasPrefix(l, prefix) && strings.HasSuffix(l, c.Summary) {
				line = l
			}
		}
		if line == "" {
			t.Errorf("help: no line %q...%q:\n%s", prefix, c.Summary, stdout)
			continue
		}
		at := len(line) - len(c.Summary)
		if line[at-2:at] != "  " {
			t.Errorf("help: %q: want two spaces or more between the name and the summary", line)
		}
		if col >= 0 && at != col {
			t.Errorf("help: %q: the summary starts at column %d, others at %d", line, at, col)
		}
		col = at
	}
}

// TestHelp pins what help and -h print in testdata/help.golden: the
// command list, a command's flags (a boolean flag such as -pin or -md5
// bare, without a metavar taken from its sentence, one "(default ...)"
// each), and a command's subcommands (bench's, not info's). Help and
// -h succeed and print nothing on standard error.
func TestHelp(t *testing.T) {
	tr := clitest.NewTranscript()
	for _, args := range [][]string{
		{"help"},
		{"info", "-h"},
		{"help", "bench", "plan"},
		{"bench", "-h"},
		{"decode", "-h"},
		{"gen", "-h"},
	} {
		if code, stdout, stderr := tr.Run(runMain, args...); code != 0 || stderr != "" || stdout == "" {
			t.Errorf("%q: exit %d, stderr %q; want 0, the help on stdout", args, code, stderr)
		}
	}
	// "help CMD" is "CMD -h".
	_, help, _ := runMain("help", "info")
	if _, h, _ := runMain("info", "-h"); help != h {
		t.Errorf("help info:\n%s\ndiffers from info -h:\n%s", help, h)
	}
	// A flag's default said twice: once by the flag package, once in
	// its help.
	if twice := regexp.MustCompile(`\(default [^)\n]*\) \(default`).FindString(tr.String()); twice != "" {
		t.Errorf("help says a default twice: %q", twice)
	}
	clitest.Golden(t, "help.golden", tr.String())
}

var rankLine = regexp.MustCompile(`(?m)^rank (\d+)/(\d+) local (\d+) host \S+ cpus ([0-9,-]+) mpi "([^"]+)"(?: wait (block|sleep))?$`)
var latencyLine = regexp.MustCompile(`(?m)^allgather latency: (\d+) ranks, 1024 B per rank, p50 [0-9.]+ µs`)

// checkInfo asserts n rank lines in rank order followed by one latency
// line, and returns the rank lines' submatches.
func checkInfo(t *testing.T, out string, n int) [][]string {
	t.Helper()
	lines := rankLine.FindAllStringSubmatch(out, -1)
	for i, m := range lines {
		if m[1] != fmt.Sprint(i) || m[2] != fmt.Sprint(n) {
			t.Errorf("rank line %d is %q, want rank %d/%d", i, m[0], i, n)
		}
	}
	if len(lines) != n {
		t.Errorf("got %d rank lines, want %d:\n%s", len(lines), n, out)
	}
	lat := latencyLine.FindAllStringSubmatchIndex(out, -1)
	if len(lat) != 1 || out[lat[0][2]:lat[0][3]] != fmt.Sprint(n) {
		t.Errorf("want one latency line for %d ranks:\n%s", n, out)
	} else if last := rankLine.FindAllStringIndex(out, -1); len(last) > 0 && last[len(last)-1][0] > lat[0][0] {
		t.Errorf("rank lines after the latency line:\n%s", out)
	}
	return lines
}

func TestInfoInProcess(t *testing.T) {
	code, stdout, stderr := runMain("info", "--ranks", "4", "--rounds", "50")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	checkInfo(t, stdout, 4)
}

// mpirunMain runs the test binary as datahelix under mpirun.
func mpirunMain(t *testing.T, np int, args ...string) (string, error) {
	t.Helper()
	if _, err := exec.LookPath("mpirun"); err != nil {
		t.Fatal("mpirun not found: install openmpi-bin")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := collectivetest.MPIRun(ctx, np, os.Args[0], args...)
	cmd.Env = append(os.Environ(), asMainEnv+"=1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("mpirun -np %d %q still running after 2 minutes:\n%s", np, args, out.String())
	}
	return out.String(), err
}

func TestInfoUnderMPIRun(t *testing.T) {
	// Each rank reports the binding's settings its environment chose.
	t.Setenv("DATAHELIX_MPI_WAIT", "sleep")
	out, err := mpirunMain(t, 4, "info", "--rounds", "200")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, m := range checkInfo(t, out, 4) {
		if m[5] == "in-process" {
			t.Errorf("rank line %q reports no MPI library", m[0])
		}
		if m[6] != "sleep" {
			t.Errorf("rank line %q: want wait sleep, as the environment sets", m[0])
		}
	}
}

// TestInfoPinUnderMPIRun checks that a bare --pin pins each rank to its
// own CPUs and that info shows them.
func TestInfoPinUnderMPIRun(t *testing.T) {
	var all unix.CPUSet
	if err := unix.SchedGetaffinity(0, &all); err != nil || all.Count() < 2 {
		t.Skip("needs two CPUs")
	}
	out, err := mpirunMain(t, 2, "info", "--pin", "--rounds", "50")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	lines := checkInfo(t, out, 2)
	if len(lines) != 2 {
		return
	}
	cpus := [2]string{lines[0][4], lines[1][4]}
	for _, c := range cpus {
		if c == cpuList(&all) {
			t.Errorf("a pinned rank runs on all the CPUs (%s), want its share:\n%s", c, out)
		}
	}
	if cpus[0] == cpus[1] {
		t.Errorf("both ranks run on CPUs %s, want a share each:\n%s", cpus[0], out)
	}
}

// TestBadFlagUnderMPIRunEndsJob checks that a bad flag ends a job with
// the status of a usage error, the ranks saying so in one line
// (testdata/bad_flag_mpirun.golden).
func TestBadFlagUnderMPIRunEndsJob(t *testing.T) {
	args := []string{"info", "--bogus"}
	out, err := mpirunMain(t, 4, args...)
	if code := exitCode(err); code != cli.ExitUsage {
		t.Errorf("exit %d (%v), want %d:\n%s", code, err, cli.ExitUsage, out)
	}
	// The ranks' lines, once each: mpirun ends the job when the first
	// rank exits, so as many ranks as got there print theirs.
	lines := strings.SplitAfter(sortLines(datahelixLines(out)), "\n")
	tr := clitest.NewTranscript()
	tr.AddJob(4, args, strings.Join(slices.Compact(lines), ""))
	clitest.Golden(t, "bad_flag_mpirun.golden", tr.String())
}

// TestMPIRunScript runs the script users run, as the README says.
func TestMPIRunScript(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "../mpirun.sh", "-np", "4", "datahelix", "info", "--rounds", "100")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("./mpirun.sh -np 4 datahelix info: %v\n%s", err, out)
	}
	checkInfo(t, string(out), 4)
	help, err := exec.Command("../mpirun.sh", "-h").CombinedOutput()
	if err != nil || !strings.Contains(string(help), "--oversubscribe") { // the flag the wrapper adds to mpirun
		t.Errorf("mpirun.sh -h: %v\n%s", err, help)
	}
}

func TestExitStatus(t *testing.T) {
	term := cli.InterruptedError{Sig: syscall.SIGTERM}
	intr := cli.InterruptedError{Sig: syscall.SIGINT}
	tests := []struct {
		name  string
		cause error // the context's, nil for a context that runs
		err   error
		code  int
		out   string
	}{
		{"success", nil, nil, 0, ""},
		{"failure", nil, errors.New("disk on fire"), 1, "datahelix: disk on fire\n"},
		{"usage", nil, cli.Usagef("--steps 0: want 1 or more"), 2, "datahelix: --steps 0: want 1 or more\n"},
		{"reported", nil, cli.Reported(errors.New("disk on fire")), 1, ""},
		{"reported sentinel", nil, cli.ErrReported, 1, ""},
		// A command that saw only ctx.Err() says what stopped it.
		{"SIGTERM", term, fmt.Errorf("gen: %w", context.Canceled), 143, "datahelix: interrupted by SIGTERM\n"},
		{"SIGINT", intr, fmt.Errorf("gen: %w", context.Canceled), 130, "datahelix: interrupted by SIGINT\n"},
		{"SIGTERM with context", term, fmt.Errorf("loader helix: %w", term), 143, "datahelix: loader helix: interrupted by SIGTERM\n"},
		{"SIGTERM reported", term, cli.Reported(term), 143, ""},
		// A plan mismatch has its class, also from another rank.
		{"plan mismatch", nil, fmt.Errorf("loader helix: %w", spmd.ErrPlanMismatch), cli.ExitPlan, "datahelix: loader helix: " + spmd.ErrPlanMismatch.Error() + "\n"},
		{"another rank's plan mismatch", nil, collective.AllRanks(fmt.Errorf("rank 1 failed: %w", remoteError{text: "plan mismatch", status: cli.ExitPlan})), cli.ExitPlan, "datahelix: rank 1 failed: plan mismatch\n"},
		// An error of its own while the signal arrived stays one.
		{"failure while stopping", term, errors.New("disk on fire"), 1, "datahelix: disk on fire\n"},
	}
	for _, tt := range tests {
		ctx, cancel := context.WithCancelCause(context.Background())
		if tt.cause != nil {
			cancel(tt.cause)
		}
		var out bytes.Buffer
		if code := cli.Exit(ctx, tt.err, &out); code != tt.code || out.String() != tt.out {
			t.Errorf("%s: got status %d and %q, want %d and %q", tt.name, code, out.String(), tt.code, tt.out)
		}
		cancel(nil)
	}
}

// TestInterruptInProcessRanks stops a --ranks 2 run as the signal handler
// does: the run reports the signal once, with its exit status.
func TestInterruptInProcessRanks(t *testing.T) {
	data := gentest.Tiny(t)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		ctx, cancel := context.WithCancelCause(context.Background())
		time.AfterFunc(500*time.Millisecond, func() { cancel(cli.InterruptedError{Sig: sig}) })
		var out, errb bytes.Buffer
		code := Main(ctx, fastRun(data, "--ranks", "2", "--steps", "1000000", "--loader", "helix"), &out, &errb)
		want := "interrupted by " + unix.SignalName(sig) + "\n"
		if code != 128+int(sig) || strings.Count(errb.String(), "\n") != 1 || !strings.HasSuffix(errb.String(), want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and one line ending %q", sig, code, errb.String(), 128+int(sig), want)
		}
	}
}

// signalMain starts the test binary as datahelix with args (under
// mpirun when np > 0), sends sig to it (to mpirun under mpirun) once
// started reports true, and returns its exit status and output.
func signalMain(t *testing.T, np int, sig syscall.Signal, started func() bool, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	if np > 0 {
		cmd = collectivetest.MPIRun(ctx, np, os.Args[0], args...)
	}
	cmd.Env = cleanEnv()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Started, and past its start-up: a process that has run 200 ms on
	// a CPU has installed its signal handler long since, however loaded
	// the machine (before it, SIGINT kills the process outright).
	for !started() || (np == 0 && processCPU(cmd.Process.Pid) < 200*time.Millisecond) {
		if ctx.Err() != nil {
			t.Fatalf("not started after 2 minutes:\n%s", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	sent := time.Now()
	if err := cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	if ctx.Err() != nil {
		t.Fatalf("still running after 2 minutes:\n%s", out.String())
	}
	t.Logf("ended %v after %v: %v", time.Since(sent).Round(time.Millisecond), sig, err)
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), out.String()
}

// processCPU is the CPU time process pid has used, user and system (0
// if it cannot be read).
func processCPU(pid int) time.Duration {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command name, which may hold spaces: state is
	// the first, utime and stime the 12th and 13th.
	_, rest, _ := bytes.Cut(stat, []byte(") "))
	f := strings.Fields(string(rest))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	k, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+k) * time.Second / 100 // USER_HZ
}

// after reports true once d has passed since its call.
func after(d time.Duration) func() bool {
	end := time.Now().Add(d)
	return func() bool { return time.Now().After(end) }
}

// TestSignalEndsInfo sends SIGINT to info while it times allgathers,
// in a one-rank MPI world and in in-process ranks: it stops at once with
// the signal's status (it used to run every round, then exit 0).
func TestSignalEndsInfo(t *testing.T) {
	for _, args := range [][]string{
		{"info", "--rounds", "10000000", "--bytes", "65536"},
		{"info", "--ranks", "2", "--rounds", "10000000", "--bytes", "65536"},
	} {
		start := time.Now()
		code, out := signalMain(t, 0, syscall.SIGINT, after(time.Second), args...)
		if code != 130 || !strings.HasSuffix(out, "datahelix: interrupted by SIGINT\n") {
			t.Errorf("%q: exit %d, output %q; want 130 and a line \"interrupted by SIGINT\"", args, code, out)
		}
		if took := time.Since(start); took > 20*time.Second {
			t.Errorf("%q: ended %v after its start, want soon after the signal", args, took.Round(time.Millisecond))
		}
	}
}

// TestSignalEndsRun sends SIGTERM and SIGINT to a --ranks 2 run: one
// line says so (naming the loader if the signal came after its start),
// and the exit status is the shell's 128 + signal number.
func TestSignalEndsRun(t *testing.T) {
	data := gentest.Tiny(t)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		code, out := signalMain(t, 0, sig, after(time.Second), fastRun(data, "--ranks", "2", "--steps", "1000000", "--loader", "helix")...)
		want := regexp.MustCompile(`^datahelix: (loader helix: )?interrupted by ` + unix.SignalName(sig) + "\n$")
		if code != 128+int(sig) || !want.MatchString(out) {
			t.Errorf("%v: exit %d, output %q; want %d and one line matching %s", sig, code, out, 128+int(sig), want)
		}
	}
}

// TestSignalEndsMPIRun sends SIGTERM to mpirun, which forwards it to
// the ranks: each aborts saying it was interrupted, and the job fails.
func TestSignalEndsMPIRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a job for several seconds")
	}
	data := gentest.Tiny(t)
	// Signalled once both ranks have saved a checkpoint, so that it
	// reaches running ranks on a loaded machine too, not an mpirun still
	// launching them (which exits 1 and prints nothing).
	ckpt := t.TempDir()
	started := func() bool {
		m, _ := filepath.Glob(filepath.Join(ckpt, "helix", "step-*", "rank-*.json"))
		return len(m) >= 2
	}
	code, out := signalMain(t, 2, syscall.SIGTERM, started, fastRun(data, "--steps", "1000000", "--loader", "helix",
		"--checkpoint-dir", ckpt, "--checkpoint-every", "20")...)
	// The signal's name, and not context.Canceled's text, which would
	// hide the cause.
	if code == 0 || !strings.Contains(out, "SIGTERM") || strings.Contains(out, context.Canceled.Error()) {
		t.Errorf("exit %d; want a failure and \"interrupted by SIGTERM\", no \"context canceled\":\n%s", code, out)
	}
}
