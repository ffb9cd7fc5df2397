package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/datahelix/datahelix/collective"
	"github.com/datahelix/datahelix/collective/collectivetest"
)

func TestPinFlag(t *testing.T) {
	tests := []struct {
		args      []string
		want      pinMode
		wantRanks int
		wantErr   string // substring of the usage error; "" for none
	}{
		{nil, pinAuto, 0, ""},
		{[]string{"--pin"}, pinTrue, 0, ""},
		{[]string{"-pin"}, pinTrue, 0, ""},
		{[]string{"--pin=true"}, pinTrue, 0, ""},
		{[]string{"--pin=false"}, pinFalse, 0, ""},
		{[]string{"--pin=auto"}, pinAuto, 0, ""},
		{[]string{"--pin=1"}, pinTrue, 0, ""},
		{[]string{"--pin=0"}, pinFalse, 0, ""},
		{[]string{"--pin=false", "--pin"}, pinTrue, 0, ""}, // the last one wins
		// A bare --pin does not swallow the next flag.
		{[]string{"--pin", "--ranks", "3"}, pinTrue, 3, ""},
		{[]string{"--pin=maybe"}, pinAuto, 0, `invalid boolean value "maybe" for -pin: want auto, true or false`},
		{[]string{"--pin="}, pinAuto, 0, "want auto, true or false"},
		// A boolean flag's value must be joined with "=".
		{[]string{"--pin", "false"}, pinTrue, 0, `unexpected argument "false"`},
	}
	for _, tt := range tests {
		var f worldFlags
		fs := newFlags("info", "[flags]")
		f.register(fs)
		err := parseFlags(fs, tt.args, new(bytes.Buffer))
		var ue usageError
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("%q: got error %v, want none", tt.args, err)
		case tt.wantErr != "" && (!errors.As(err, &ue) || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("%q: got error %v, want a usage error containing %q", tt.args, err, tt.wantErr)
		}
		if err != nil && tt.wantErr != "" && !strings.Contains(tt.wantErr, "unexpected") {
			continue // the value is not set
		}
		if f.pin != tt.want || f.ranks != tt.wantRanks {
			t.Errorf("%q: got pin %v ranks %d, want pin %v ranks %d", tt.args, f.pin.String(), f.ranks, tt.want.String(), tt.wantRanks)
		}
	}
}

func TestPinModeStringRoundTrip(t *testing.T) {
	for _, m := range []pinMode{pinAuto, pinTrue, pinFalse} {
		var got pinMode = 42
		if err := got.Set(m.String()); err != nil || got != m {
			t.Errorf("Set(%q): got %v (%v), want %v", m.String(), got.String(), err, m.String())
		}
	}
	var zero pinMode
	if zero.String() != "auto" {
		t.Errorf("zero pinMode: got %q, want auto", zero.String())
	}
}

func TestPinHelp(t *testing.T) {
	code, stdout, _ := runMain("info", "-h")
	if code != 0 {
		t.Fatalf("info -h: exit %d", code)
	}
	// A boolean flag has no metavar: "-pin" alone on its line.
	if !regexp.MustCompile(`(?m)^  -pin\n`).MatchString(stdout) {
		t.Errorf("info -h: want a bare \"  -pin\" line:\n%s", stdout)
	}
	for _, want := range []string{"--pin=false", "--pin=auto"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("info -h: want %q in the -pin help:\n%s", want, stdout)
		}
	}
}

func TestPinWithInProcessRanks(t *testing.T) {
	code, _, stderr := runMain("info", "--ranks", "2", "--pin", "--rounds", "5")
	if code != 2 || !strings.Contains(stderr, "--pin needs MPI ranks") {
		t.Errorf("--ranks 2 --pin: exit %d, stderr %q; want 2 and \"--pin needs MPI ranks\"", code, stderr)
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
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Errorf("got %v, want exit status 1", err)
	}
	want := "datahelix: Slurm started 4 tasks (SLURM_NTASKS) but MPI sees a 1-rank world: launch with srun --mpi=pmix (see README)\n"
	if !strings.Contains(stderr.String(), want) {
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
	if collective.Flavor() != "openmpi" {
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
	want := "rank 1 aborting the job: Open MPI's mpirun made this process rank 3 (OMPI_COMM_WORLD_RANK) but MPI made it rank 1 of 2"
	if !strings.Contains(out.String(), want) {
		t.Errorf("output lacks %q:\n%s", want, out.String())
	}
	if rankLine.MatchString(out.String()) {
		t.Errorf("info printed its rank lines although rank 1 failed:\n%s", out.String())
	}
	t.Logf("job ended in %v", time.Since(start).Round(time.Millisecond))
}
