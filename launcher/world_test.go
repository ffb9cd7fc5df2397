package launcher

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/datahelix/datahelix/collective"
	"github.com/datahelix/datahelix/internal/cli"
	"github.com/datahelix/datahelix/internal/cli/clitest"
	"github.com/datahelix/datahelix/internal/collectivetest"
	"github.com/datahelix/datahelix/internal/gen/gentest"
	"github.com/datahelix/datahelix/internal/mpinode"
)

func TestPinFlag(t *testing.T) {
	tests := []struct {
		args      []string
		want      cli.AutoBool
		wantRanks int
		wantErr   bool // a usage error (testdata/usage_errors.golden has their lines)
		kept      bool // the flags are set despite it: an argument left over
	}{
		{nil, cli.AutoAuto, 0, false, false},
		{[]string{"--pin"}, cli.AutoTrue, 0, false, false},
		{[]string{"-pin"}, cli.AutoTrue, 0, false, false},
		{[]string{"--pin=true"}, cli.AutoTrue, 0, false, false},
		{[]string{"--pin=false"}, cli.AutoFalse, 0, false, false},
		{[]string{"--pin=auto"}, cli.AutoAuto, 0, false, false},
		{[]string{"--pin=1"}, cli.AutoTrue, 0, false, false},
		{[]string{"--pin=0"}, cli.AutoFalse, 0, false, false},
		{[]string{"--pin=false", "--pin"}, cli.AutoTrue, 0, false, false}, // the last one wins
		// A bare --pin does not swallow the next flag.
		{[]string{"--pin", "--ranks", "3"}, cli.AutoTrue, 3, false, false},
		{[]string{"--pin=maybe"}, cli.AutoAuto, 0, true, false},
		{[]string{"--pin="}, cli.AutoAuto, 0, true, false},
		// A boolean flag's value must be joined with "=": the message
		// says so.
		{[]string{"--pin", "false"}, cli.AutoTrue, 0, true, true},
		{[]string{"--pin", "auto", "--ranks", "2"}, cli.AutoTrue, 0, true, true},
		{[]string{"--pin", "extra"}, cli.AutoTrue, 0, true, true},
	}
	for _, tt := range tests {
		var f worldFlags
		fs := cli.NewFlags("info", "[flags]")
		f.register(fs)
		err := cli.ParseFlags(fs, tt.args, new(bytes.Buffer))
		if (err != nil) != tt.wantErr || err != nil && !errors.Is(err, cli.ErrUsage) {
			t.Errorf("%q: got error %v, want a usage error: %v", tt.args, err, tt.wantErr)
		}
		if err != nil && !tt.kept {
			continue // the value is not set
		}
		if f.pin != tt.want || f.ranks != tt.wantRanks {
			t.Errorf("%q: got pin %v ranks %d, want pin %v ranks %d", tt.args, f.pin.String(), f.ranks, tt.want.String(), tt.wantRanks)
		}
	}
}

func TestAutoBoolStringRoundTrip(t *testing.T) {
	for _, m := range []cli.AutoBool{cli.AutoAuto, cli.AutoTrue, cli.AutoFalse} {
		var got cli.AutoBool = 42
		if err := got.Set(m.String()); err != nil || got != m {
			t.Errorf("Set(%q): got %v (%v), want %v", m.String(), got.String(), err, m.String())
		}
	}
	var zero cli.AutoBool
	if zero.String() != "false" {
		t.Errorf("zero cli.AutoBool: got %q, want false", zero.String())
	}
	var f worldFlags
	f.register(cli.NewFlags("info", ""))
	if f.pin != cli.AutoAuto {
		t.Errorf("--pin defaults to %v, want auto", f.pin.String())
	}
}

func TestPinWithInProcessRanks(t *testing.T) {
	var fe cli.FlagError
	if err := commandErr(t, "info", "--ranks", "2", "--pin", "--rounds", "5"); !errors.As(err, &fe) || fe.Flag != "pin" || cli.ExitStatus(err) != cli.ExitUsage {
		t.Errorf("--ranks 2 --pin: %v; want a usage error about --pin", err)
	}
	code, stdout, stderr := runMain("info", "--ranks", "2", "--pin=false", "--rounds", "5")
	if code != 0 {
		t.Fatalf("--ranks 2 --pin=false: exit %d: %s", code, stderr)
	}
	checkInfo(t, stdout, 2)
}

// cleanEnv is this process's environment without any launcher's
// variables, with the test binary told to act as datahelix.
func cleanEnv(extra ...string) []string {
	launcherVar := func(kv string) bool {
		for _, p := range []string{"OMPI_", "PMI_", "PMIX_", "SLURM_", "MPI_LOCAL"} {
			if strings.HasPrefix(kv, p) {
				return true
			}
		}
		return false
	}
	env := slices.DeleteFunc(os.Environ(), launcherVar)
	return append(append(env, asMainEnv+"=1"), extra...)
}

// TestSlurmWithoutMPIFails starts the command as srun would without
// --mpi=pmix: Slurm's variables say task 2 of 4, while MPI, finding no
// process manager, starts a singleton.
func TestSlurmWithoutMPIFails(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "info", "--rounds", "10")
	cmd.Env = cleanEnv("SLURM_STEP_ID=0", "SLURM_NTASKS=4", "SLURM_PROCID=2", "SLURM_LOCALID=2", "SLURM_NTASKS_PER_NODE=4")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("still running after a minute:\n%s%s", stdout.String(), stderr.String())
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != cli.ExitLaunch {
		t.Errorf("got %v, want exit status %d (launch)", err, cli.ExitLaunch)
	}
	plugin := map[bool]string{true: "pmi2", false: "pmix"}[mpinode.Flavor() == "mpich"]
	want := regexp.MustCompile(`datahelix: srun started 4 tasks \(SLURM_NTASKS\) but MPI sees a 1-rank world: this binary uses .+?: launch with srun --mpi=` +
		plugin + ` \(srun --mpi=list shows the plugins this cluster has; see docs/failures.md\)\n`)
	if !want.MatchString(stderr.String()) {
		t.Errorf("stderr %q, want it to contain %q", stderr.String(), want)
	}
	if stdout.Len() != 0 {
		t.Errorf("stdout %q, want nothing: the rank must stop before its work", stdout.String())
	}
}

// TestRankMismatchUnderMPIRunEndsJob changes what one rank of a 2-rank
// mpirun job reads as its rank: that rank must end the whole job, and the
// other, which agrees with its launcher, must not be left waiting.
func TestRankMismatchUnderMPIRunEndsJob(t *testing.T) {
	if mpinode.Flavor() != "openmpi" {
		t.Skip("rewrites Open MPI's OMPI_COMM_WORLD_RANK")
	}
	wrap := filepath.Join(t.TempDir(), "wrap.sh")
	script := "#!/bin/sh\n[ \"$OMPI_COMM_WORLD_RANK\" = 1 ] && export OMPI_COMM_WORLD_RANK=3\nexec \"$@\"\n"
	if err := os.WriteFile(wrap, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := collectivetest.MPIRun(ctx, 2, wrap, os.Args[0], "info", "--rounds", "1000000")
	cmd.Env = cleanEnv()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("job still running after 2 minutes:\n%s", out.String())
	}
	if err == nil {
		t.Errorf("job succeeded:\n%s", out.String())
	}
	want := regexp.MustCompile(`rank 1 on \S+ aborting the job: Open MPI's mpirun made this process rank 3 \(OMPI_COMM_WORLD_RANK\) but MPI made it rank 1 of 2`)
	if !want.MatchString(out.String()) {
		t.Errorf("output lacks %q:\n%s", want, out.String())
	}
	if rankLine.MatchString(out.String()) {
		t.Errorf("info printed its rank lines although rank 1 failed:\n%s", out.String())
	}
	t.Logf("job ended in %v", time.Since(start).Round(time.Millisecond))
}

// TestRunLocalReportsTheFailedRankOnce fails rank 1 of an in-process
// world while rank 2 waits in a collective and ranks 0 and 3 wait on the
// context: the log must hold rank 1's error alone, and the waiting ranks'
// context must say that rank 1 failed.
func TestRunLocalReportsTheFailedRankOnce(t *testing.T) {
	boom := errors.New("disk on fire")
	var mu sync.Mutex
	causes := map[int]error{}
	body := func(ctx context.Context, c collective.Comm, out, _ io.Writer) error {
		switch c.Rank() {
		case 1:
			return boom
		case 2:
			return c.Barrier() // ranks 0 and 3 never join it
		}
		<-ctx.Done()
		mu.Lock()
		causes[c.Rank()] = context.Cause(ctx)
		mu.Unlock()
		return fmt.Errorf("waiting for a batch: %w", ctx.Err())
	}
	var stderr bytes.Buffer
	err := runLocal(context.Background(), worldFlags{ranks: 4}, io.Discard, &stderr, body)
	if got, want := stderr.String(), "datahelix: rank 1: disk on fire\n"; got != want {
		t.Errorf("stderr %q, want %q", got, want)
	}
	if !errors.Is(err, cli.ErrReported) || !errors.Is(err, boom) {
		t.Errorf("got %v, want rank 1's error marked as reported", err)
	}
	var out bytes.Buffer
	if code := cli.Exit(context.Background(), err, &out); code != 1 || out.Len() != 0 {
		t.Errorf("exit: got status %d and %q, want 1 and nothing printed again", code, out.String())
	}
	for _, r := range []int{0, 3} {
		var failed collective.RankFailedError
		if !errors.As(causes[r], &failed) || failed.Rank != 1 {
			t.Errorf("rank %d: cause %v, want rank 1's failure", r, causes[r])
		}
	}
	if got, want := (collective.RankFailedError{Rank: 1}).Error(), "stopped because rank 1 failed"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestRunOneRankFails fails rank 1's checkpoint in a 4-rank run, with an
// unplanned loader (the others wait for batches) and a planned one (they
// wait in the allgather): the job exits 1 with rank 1's error as its one
// line, and no rank says "context canceled".
func TestRunOneRankFails(t *testing.T) {
	data := gentest.Tiny(t)
	for _, loader := range []string{"torch", "helix"} {
		ck := t.TempDir()
		failCheckpoint(t, ck, loader, 1)
		code, _, stderr := runMain(fastRun(data, "--ranks", "4", "--steps", "6", "--loader", loader,
			"--checkpoint-dir", ck, "--checkpoint-every", "2")...)
		want := "datahelix: rank 1: loader " + loader + ": checkpoint: "
		if code != 1 || strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, want) {
			t.Errorf("%s: exit %d, stderr %q; want 1 and one line starting %q", loader, code, stderr, want)
		}
	}
}

// TestRunOneRankFailsUnderMPIRun is TestRunOneRankFails under MPI: rank 1
// aborts the job with its error; what the other rank prints is up to
// mpirun (Open MPI sends it SIGTERM), but never "context canceled".
func TestRunOneRankFailsUnderMPIRun(t *testing.T) {
	data := gentest.Tiny(t)
	ck := t.TempDir()
	failCheckpoint(t, ck, "torch", 1)
	log, err := mpirunMain(t, 2, fastRun(data, "--steps", "6", "--loader", "torch",
		"--checkpoint-dir", ck, "--checkpoint-every", "2")...)
	if err == nil {
		t.Errorf("job succeeded:\n%s", log)
	}
	// The host as MPI names it (the processor name), which may differ
	// from os.Hostname.
	if want := regexp.MustCompile(`datahelix: rank 1 on \S+ aborting the job: loader torch: checkpoint: `); !want.MatchString(log) {
		t.Errorf("log lacks %q:\n%s", want, log)
	}
	for _, line := range strings.Split(log, "\n") {
		if strings.HasPrefix(line, "datahelix: rank 0") && !strings.HasSuffix(line, "interrupted by SIGTERM") ||
			strings.Contains(line, context.Canceled.Error()) { // the cause hidden behind the cancellation
			t.Errorf("rank 0 says %q; want nothing or that mpirun's SIGTERM interrupted it:\n%s", line, log)
		}
	}
}

// failCheckpoint makes the checkpoint that rank writes at step 2 of
// loader fail: its temporary file's name is taken by a directory (root
// writes anywhere, so a read-only directory would not do).
func failCheckpoint(t *testing.T, dir, loader string, rank int) {
	t.Helper()
	tmp := filepath.Join(dir, loader, "step-000000002", fmt.Sprintf("rank-%05d.json.tmp", rank))
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
}

// TestRanksFlagBounds checks that --ranks outside 0..4096 is a usage
// error that says what 0 means.
func TestRanksFlagBounds(t *testing.T) {
	tr := clitest.NewTranscript()
	for _, n := range []string{"-1", "4097"} {
		var fe cli.FlagError
		if err := commandErr(t, "info", "--ranks", n); !errors.As(err, &fe) || fe.Flag != "ranks" || fe.Value != n {
			t.Errorf("info --ranks %s: %#v, want a cli.FlagError about --ranks %s", n, err, n)
		}
		tr.Add([]string{"info", "--ranks", n}, usageLine(t, "info", "--ranks", n))
	}
	clitest.Golden(t, "ranks_flag_bounds.golden", tr.String()) // says what 0 means
}

// TestRunLocalPrefersTheSignal has rank 0 stopped by SIGINT and rank 1
// fail with an error only rank 0 would print: the command must report
// the signal (exit 130), not exit 1 without a word, whichever rank's
// error comes first.
func TestRunLocalPrefersTheSignal(t *testing.T) {
	var errOut bytes.Buffer
	err := runLocal(context.Background(), worldFlags{ranks: 2, pin: cli.AutoFalse}, io.Discard, &errOut,
		func(ctx context.Context, c collective.Comm, out, _ io.Writer) error {
			if c.Rank() == 0 {
				return cli.InterruptedError{Sig: syscall.SIGINT}
			}
			return collective.AllRanks(errors.New("rank 0 failed: context canceled"))
		})
	if ie, ok := cli.Interrupted(err); !ok || ie.Status() != 130 {
		t.Errorf("got %v (stderr %q); want the interruption by SIGINT", err, errOut.String())
	}
}

// mpirunBound runs the test binary as datahelix under Open MPI's mpirun
// with np ranks, mpiArgs (such as "--bind-to", "core") added to
// mpirun's, and the whole command under taskset -c cpus when cpus is
// not empty.
func mpirunBound(t *testing.T, cpus string, mpiArgs []string, np int, args ...string) (string, error) {
	t.Helper()
	if mpinode.Flavor() != "openmpi" {
		t.Skip("uses Open MPI's mpirun options")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := collectivetest.MPIRun(ctx, np, os.Args[0], args...)
	argv := slices.Insert(slices.Clone(cmd.Args[1:]), 0, mpiArgs...)
	if cpus != "" {
		taskset, err := exec.LookPath("taskset")
		if err != nil {
			t.Skip("needs taskset (util-linux)")
		}
		cmd = exec.CommandContext(ctx, taskset, append([]string{"-c", cpus, cmd.Path}, argv...)...)
	} else {
		cmd = exec.CommandContext(ctx, cmd.Path, argv...)
	}
	cmd.Env = cleanEnv()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("%q still running after 2 minutes:\n%s", cmd.Args, out.String())
	}
	return out.String(), err
}

// TestPinKeepsLauncherBinding runs info --pin under mpirun --bind-to
// core, which gives each rank a core of its own: --pin keeps them and
// says so once (it used to split each rank's one core again, and a
// rank bound to 12 CPUs by srun kept 1), and under --bind-to none,
// where the ranks share every CPU: --pin gives each its own share.
func TestPinKeepsLauncherBinding(t *testing.T) {
	if testing.Short() {
		t.Skip("runs mpirun jobs")
	}
	var all unix.CPUSet
	if err := unix.SchedGetaffinity(0, &all); err != nil || all.Count() < 2 {
		t.Skip("needs two CPUs")
	}
	for _, bind := range []string{"core", "none"} {
		out, err := mpirunBound(t, "", []string{"--bind-to", bind}, 2, "info", "--pin", "--rounds", "20")
		if err != nil {
			t.Fatalf("--bind-to %s: %v\n%s", bind, err, out)
		}
		lines := checkInfo(t, out, 2)
		if len(lines) != 2 {
			continue
		}
		kept := strings.Count(out, alreadyBound+"\n")
		if cpus := [2]string{lines[0][4], lines[1][4]}; cpus[0] == cpus[1] || cpus[0] == cpuList(&all) {
			t.Errorf("--bind-to %s --pin: ranks on CPUs %s and %s, want a share each:\n%s", bind, cpus[0], cpus[1], out)
		}
		switch {
		case bind == "core" && kept != 1:
			t.Errorf("--bind-to core --pin: want one line %q:\n%s", alreadyBound, out)
		case bind == "none" && kept != 0:
			t.Errorf("--bind-to none --pin: the ranks share CPUs, yet %q:\n%s", alreadyBound, out)
		}
	}
}

// TestAutoCountsTheJobsCPUs runs two ranks in a job held to one CPU
// (taskset -c 0, as a container or cgroup would hold it): the wait
// policy auto must sleep and --pin=auto pin, where counting the node's
// online CPUs saw room for both. Under mpirun's default binding on two
// CPUs, where each rank sees one CPU, they must not.
func TestAutoCountsTheJobsCPUs(t *testing.T) {
	if testing.Short() {
		t.Skip("runs mpirun jobs")
	}
	var all unix.CPUSet
	if err := unix.SchedGetaffinity(0, &all); err != nil || all.Count() < 2 || !all.IsSet(0) {
		t.Skip("needs CPU 0 and another")
	}
	t.Setenv("DATAHELIX_MPI_WAIT", "auto")
	out, err := mpirunBound(t, "0", []string{"--bind-to", "none"}, 2, "info", "--rounds", "20")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, m := range checkInfo(t, out, 2) {
		if m[4] != "0" || m[6] != "sleep" {
			t.Errorf("taskset -c 0: rank line %q: want cpus 0 and wait sleep", m[0])
		}
	}
	out, err = mpirunBound(t, "", []string{"--bind-to", "core"}, 2, "info", "--rounds", "20")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, m := range checkInfo(t, out, 2) {
		if m[6] != "block" {
			t.Errorf("--bind-to core: rank line %q: want wait block (each rank has its core)", m[0])
		}
	}
}
