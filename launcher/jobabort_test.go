package launcher

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/datahelix/datahelix/internal/cli"
	"github.com/datahelix/datahelix/internal/cli/clitest"
	"github.com/datahelix/datahelix/internal/collectivetest"
	"github.com/datahelix/datahelix/internal/communicator"
	"github.com/datahelix/datahelix/internal/gen/gentest"
	"github.com/datahelix/datahelix/internal/mpinode"
)

// TestKilledRankEndsJob kills one rank of a running 4-rank job and
// checks that the whole job ends within 30 s.
func TestKilledRankEndsJob(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a job for several seconds")
	}
	data := gentest.Tiny(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := collectivetest.MPIRun(ctx, 4, os.Args[0], fastRun(data, "--steps", "100000", "--loader", "helix")...)
	cmd.Env = append(os.Environ(), asMainEnv+"=1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var victim int
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline) && victim == 0; time.Sleep(200 * time.Millisecond) {
		if kids := descendants(cmd.Process.Pid, filepath.Base(os.Args[0])); len(kids) == 4 {
			victim = kids[2]
		}
	}
	if victim == 0 {
		cmd.Process.Kill()
		t.Fatalf("never saw 4 ranks running:\n%s", out.String())
	}
	time.Sleep(3 * time.Second) // let the job get going
	killed := time.Now()
	syscall.Kill(victim, syscall.SIGKILL)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		took := time.Since(killed)
		if err == nil {
			t.Errorf("job exited 0 after a rank was killed")
		}
		if took > 30*time.Second {
			t.Errorf("job took %v to end after the kill, want under 30 s", took)
		}
		t.Logf("job ended %v after the kill: %v", took.Round(time.Millisecond), err)
	case <-time.After(35 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("job still running 35 s after a rank was killed:\n%s", out.String())
	}
}

// descendants lists the pids of processes below pid whose command name
// starts like name (ps truncates it to 15 characters).
func descendants(pid int, name string) []int {
	parent := map[int]int{}
	comm := map[int]string{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(stat)
		open, close := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || close < 0 {
			continue
		}
		fields := strings.Fields(s[close+1:])
		if len(fields) < 2 {
			continue
		}
		pp, _ := strconv.Atoi(fields[1])
		parent[p], comm[p] = pp, s[open+1:close]
	}
	var out []int
	for p := range parent {
		for q := parent[p]; q > 1; q = parent[q] {
			if q == pid {
				if len(name) > 15 {
					name = name[:15]
				}
				if strings.HasPrefix(comm[p], name) {
					out = append(out, p)
				}
				break
			}
		}
	}
	return out
}

// stopOneRank starts a 2-rank helix job under mpirun with extra flags,
// lets it run, stops one rank with SIGSTOP (a rank stuck on a hung file
// system, a swapping node) and returns the job, the other rank's pid and
// the output; the stopped rank is killed when the test ends.
func stopOneRank(t *testing.T, ctx context.Context, extra ...string) (*exec.Cmd, int, *bytes.Buffer) {
	t.Helper()
	data := gentest.Tiny(t)
	cmd := collectivetest.MPIRun(ctx, 2, os.Args[0], fastRun(data, append([]string{"--steps", "100000", "--loader", "helix"}, extra...)...)...)
	cmd.Env = append(os.Environ(), asMainEnv+"=1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var kids []int
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline) && len(kids) != 2; time.Sleep(200 * time.Millisecond) {
		kids = descendants(cmd.Process.Pid, filepath.Base(os.Args[0]))
	}
	if len(kids) != 2 {
		cmd.Process.Kill()
		t.Fatalf("never saw 2 ranks running:\n%s", out.String())
	}
	time.Sleep(3 * time.Second) // let the job get going
	syscall.Kill(kids[1], syscall.SIGSTOP)
	t.Cleanup(func() { syscall.Kill(kids[1], syscall.SIGKILL) })
	return cmd, kids[0], &out
}

// abortGolden compares the first datahelix line of the output out of a
// stopOneRank job run with extra flags, the aborting rank's, with the
// golden name; the line the stopped rank may print once mpirun lets it
// go on is left out. What differs from run to run reads R (the rank
// stopped), N (the step), CALL and T (the collective the other waited
// in, and how long).
func abortGolden(t *testing.T, name, out string, extra ...string) {
	t.Helper()
	data := gentest.Tiny(t)
	tr := newRunTranscript(data).
		Replace(`rank \d+ on HOST`, "rank R on HOST").
		Replace(`after step \d+`, "after step N").
		Replace(`waited in .*? for [0-9.]+[µnm]?s`, "waited in CALL for T") // a collective, or "the sample exchange (WaitAll)"
	first, _, _ := strings.Cut(datahelixLines(out), "\n")
	tr.AddJob(2, fastRun(data, append([]string{"--steps", "100000", "--loader", "helix"}, extra...)...), first+"\n")
	clitest.Golden(t, name, tr.String())
}

// TestStalledRankEndsJob stops one rank of a job run with a short
// --stall-timeout: the other waits in a collective for it, and with no
// watchdog the job sat there until the batch system's time limit. It
// must abort the job about the timeout later, saying why.
func TestStalledRankEndsJob(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a job for several seconds")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const timeout = 3 * time.Second
	cmd, _, out := stopOneRank(t, ctx, "--stall-timeout", timeout.String())
	stopped := time.Now()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		took := time.Since(stopped)
		t.Logf("job ended %v after a rank stopped: %v", took.Round(time.Millisecond), err)
		// The job ends with the stall's status (MPICH's mpiexec may
		// report the stopped rank's SIGKILL first, as below).
		if code := exitCode(err); code != cli.ExitStall && !(mpinode.Flavor() == "mpich" && code == 9) {
			t.Errorf("exit status %d (%v), want %d for a stall:\n%s", code, err, cli.ExitStall, out.String())
		}
		// The running rank waits in MPI for the stopped one, and says
		// so, naming the timeout and the loader
		// (testdata/jobabort_stall.golden).
		abortGolden(t, "jobabort_stall.golden", out.String(), "--stall-timeout", timeout.String())
		// The clock runs from the last step delivered, just before the
		// stop; a rank waiting in MPI gives a busy one a second more.
		if took < timeout-time.Second || took > timeout+20*time.Second {
			t.Errorf("job ended %v after a rank stopped, want about %v", took, timeout)
		}
	case <-time.After(timeout + 40*time.Second):
		cmd.Process.Kill()
		t.Fatalf("job still running %v after a rank stopped:\n%s", timeout+40*time.Second, out.String())
	}
}

// TestSignalEndsJobWithAStuckRank stops one rank of a 2-rank job
// (SIGSTOP: a rank stuck on a hung file system, a swapping node) and sends
// SIGTERM to the other, as scancel does. That rank waits in a collective
// for the stopped one and never saw its context's cancellation: the job
// ran on until SIGKILL. It must abort the job itself, communicator.StuckGrace later.
func TestSignalEndsJobWithAStuckRank(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a job for several seconds")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd, other, out := stopOneRank(t, ctx)
	time.Sleep(500 * time.Millisecond) // the other rank now waits for it
	sent := time.Now()
	syscall.Kill(other, syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		took := time.Since(sent)
		t.Logf("job ended %v after SIGTERM: %v", took.Round(time.Millisecond), err)
		// MPICH's mpiexec exits with the status of whichever process
		// it saw end first: the aborting rank's 143, or the stopped
		// rank's 9 once it has killed it.
		code := cmd.ProcessState.ExitCode()
		okCode := code == 143 || mpinode.Flavor() == "mpich" && code == 9
		if !okCode {
			t.Errorf("exit %d, want 143:\n%s", code, out.String())
		}
		// The rank that was sent SIGTERM says it waits still
		// (testdata/jobabort_sigterm.golden).
		abortGolden(t, "jobabort_sigterm.golden", out.String())
		if took < communicator.StuckGrace || took > communicator.StuckGrace+20*time.Second {
			t.Errorf("job ended %v after SIGTERM, want about %v", took, communicator.StuckGrace)
		}
	case <-time.After(communicator.StuckGrace + 40*time.Second):
		cmd.Process.Kill()
		t.Fatalf("job still running %v after SIGTERM to a rank whose peer is stopped:\n%s", communicator.StuckGrace+40*time.Second, out.String())
	}
}

// TestBusyRankNamesItself runs a 2-rank job whose rank 1 takes ten
// minutes over a step outside MPI (its simulated GPU; a hung read looks
// the same to the watch) while rank 0 waits for it in the allreduce:
// the stall abort must come from rank 1 and say that it is the one busy,
// so that the operator looks at the right node.
func TestBusyRankNamesItself(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a job for several seconds")
	}
	data := gentest.Tiny(t)
	// The ranks must agree on --gpu-step-ms: rank 1 is made slow
	// behind the flags' back.
	t.Setenv(slowRankEnv, "1:600000")
	start := time.Now()
	out, err := mpirunMain(t, 2, fastRun(data, "--loader", "helix", "--steps", "50", "--stall-timeout", "2s")...)
	took := time.Since(start)
	t.Logf("%v after %v", err, took.Round(time.Millisecond))
	want := regexp.MustCompile(`rank 1 on \S+ aborting the job: no step delivered for 2s \(--stall-timeout\), loader helix after step \d+: this rank is busy outside MPI`)
	if err == nil || !want.MatchString(out) {
		t.Errorf("%v; want the busy rank 1 to abort, naming itself:\n%s", err, out)
	}
	if took > time.Minute {
		t.Errorf("the job took %v to end", took)
	}
}
