package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/datahelix/datahelix/collective/collectivetest"
)

// asMainEnv makes the test binary behave as the datahelix command, so
// that tests can start it under mpirun without a separate build.
const asMainEnv = "DATAHELIX_TEST_AS_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(asMainEnv) != "" {
		main()
	}
	os.Exit(m.Run())
}

func runMain(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = Main(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestUsageErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string // in the one stderr line
	}{
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"info", "--bogus"}, "flag provided but not defined: -bogus"},
		{[]string{"info", "--ranks", "-3"}, "--ranks -3"},
		{[]string{"info", "--ranks", "2", "--profile", "gpu"}, `--profile "gpu"`},
		{[]string{"info", "--bytes", "-1", "--ranks", "2"}, "--bytes -1"},
		{[]string{"info", "extra"}, `unexpected argument "extra"`},
	}
	for _, tt := range tests {
		code, stdout, stderr := runMain(tt.args...)
		if code != 2 {
			t.Errorf("%q: exit %d, want 2", tt.args, code)
		}
		if lines := strings.Count(stderr, "\n"); lines != 1 || !strings.Contains(stderr, tt.want) {
			t.Errorf("%q: stderr %q, want one line containing %q", tt.args, stderr, tt.want)
		}
		if stdout != "" {
			t.Errorf("%q: stdout %q, want nothing", tt.args, stdout)
		}
	}
}

func TestHelp(t *testing.T) {
	code, stdout, _ := runMain("help")
	if code != 0 || !strings.Contains(stdout, "info") {
		t.Errorf("help: exit %d, stdout %q", code, stdout)
	}
	code, stdout, _ = runMain("info", "-h")
	if code != 0 || !strings.Contains(stdout, "-ranks") {
		t.Errorf("info -h: exit %d, stdout %q", code, stdout)
	}
}

var rankLine = regexp.MustCompile(`(?m)^rank (\d+)/(\d+) local (\d+) host \S+ mpi "([^"]+)"$`)
var latencyLine = regexp.MustCompile(`(?m)^allgather latency: (\d+) ranks, 1024 B per rank, p50 [0-9.]+ µs`)

// checkInfo asserts n distinct rank lines and one latency line.
func checkInfo(t *testing.T, out string, n int) {
	t.Helper()
	seen := map[string]bool{}
	for _, m := range rankLine.FindAllStringSubmatch(out, -1) {
		if m[2] != fmt.Sprint(n) {
			t.Errorf("rank line %q: size %s, want %d", m[0], m[2], n)
		}
		seen[m[1]] = true
	}
	if len(seen) != n {
		t.Errorf("got %d distinct rank lines, want %d:\n%s", len(seen), n, out)
	}
	if got := latencyLine.FindAllStringSubmatch(out, -1); len(got) != 1 || got[0][1] != fmt.Sprint(n) {
		t.Errorf("want one latency line for %d ranks:\n%s", n, out)
	}
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
	out, err := mpirunMain(t, 4, "info", "--rounds", "200")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	checkInfo(t, out, 4)
	for _, m := range rankLine.FindAllStringSubmatch(out, -1) {
		if m[4] == "in-process" {
			t.Errorf("rank line %q reports no MPI library", m[0])
		}
	}
}

func TestBadFlagUnderMPIRunEndsJob(t *testing.T) {
	out, err := mpirunMain(t, 4, "info", "--bogus")
	if err == nil {
		t.Fatalf("job succeeded with a bad flag:\n%s", out)
	}
	if !strings.Contains(out, "datahelix: info: flag provided but not defined: -bogus") {
		t.Errorf("output lacks the flag error:\n%s", out)
	}
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
	if err != nil || !strings.Contains(string(help), "--oversubscribe") {
		t.Errorf("mpirun.sh -h: %v\n%s", err, help)
	}
}
