//go:build !nompi

package communicator_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/datahelix/datahelix/internal/collectivetest"
	"github.com/datahelix/datahelix/internal/communicator"
	"github.com/datahelix/datahelix/internal/mpinode"
)

// workerEnv makes the test binary act as one rank of an mpirun job
// instead of running tests: the value names the scenario.
const workerEnv = "DATAHELIX_COLLECTIVE_WORKER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(workerEnv); mode != "" {
		os.Exit(worker(mode))
	}
	os.Exit(m.Run())
}

// worker is the SPMD program each rank runs for the scenario mode.
func worker(mode string) int {
	if v := os.Getenv(waitByRankEnv); v != "" {
		// Rank r waits as the r-th value says (as nodes choosing apart do).
		r := os.Getenv("OMPI_COMM_WORLD_RANK")
		if r == "" {
			r = os.Getenv("PMI_RANK")
		}
		rank, _ := strconv.Atoi(r)
		policies := strings.Split(v, ",")
		os.Setenv("DATAHELIX_MPI_WAIT", policies[rank%len(policies)])
	}
	w, err := communicator.Init()
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 1
	}
	switch mode {
	case "share-cpus", "conformance":
		if mode == "share-cpus" {
			// As launcher does at start: the node's ranks compare CPU
			// sets and choose their wait policy again.
			if _, err := w.ShareNodeCPUs(); err != nil {
				fmt.Fprintln(os.Stderr, "FAIL: ShareNodeCPUs:", err)
				return 1
			}
		}
		var log io.Writer
		if os.Getenv("DATAHELIX_COLLECTIVE_TRACE") != "" {
			log = os.Stderr
		}
		if err := collectivetest.RunLogged(w, log); err != nil {
			fmt.Fprintln(os.Stderr, "FAIL:", err)
			return 1
		}
		fmt.Printf("rank %d/%d ok %s multiple=%v wait=%v\n", w.Rank(), w.Size(), w.Info().Library, w.Info().ThreadMultiple, w.WaitPolicy())
	case "latency":
		if err := latencyWorker(w); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	case "early-exit":
		// The last rank leaves without MPI_Finalize while the others
		// wait for it in a barrier that can never complete.
		if w.Rank() == w.Size()-1 {
			os.Exit(3)
		}
		w.Barrier()
		fmt.Println("barrier passed without the exited rank")
		return 0
	case "abort":
		if w.Rank() == 1 {
			time.Sleep(100 * time.Millisecond)
			w.Abort(7, "test abort from rank 1")
		}
		w.Barrier()
		return 0
	case "abort-goroutine":
		// What datahelix's stall watch and signal grace do: rank 1's
		// main goroutine waits in a barrier that rank 0, busy elsewhere,
		// never enters, while another goroutine of rank 1 aborts.
		if w.Rank() == 0 {
			time.Sleep(time.Hour)
		}
		go func() {
			time.Sleep(200 * time.Millisecond)
			w.Abort(42, fmt.Sprintf("test abort from a goroutine of rank %d", w.Rank()))
		}()
		w.Barrier()
		fmt.Println("barrier passed without rank 0")
		return 0
	default:
		fmt.Fprintln(os.Stderr, "unknown worker mode", mode)
		return 2
	}
	if err := w.Finalize(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// mpirun runs this test binary as np ranks in the given worker mode.
func mpirun(t *testing.T, np int, mode string, timeout time.Duration, env ...string) (string, time.Duration, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := collectivetest.MPIRun(ctx, np, os.Args[0])
	cmd.Env = append(append(os.Environ(), workerEnv+"="+mode), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	err := cmd.Run()
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("mpirun -np %d (%s) still running after %v; output:\n%s", np, mode, timeout, out.String())
	}
	return out.String(), time.Since(start), err
}

func requireMPIRun(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("mpirun"); err != nil {
		if os.Getenv("DATAHELIX_SKIP_MPI") != "" {
			t.Skip("mpirun not installed and DATAHELIX_SKIP_MPI set")
		}
		t.Fatal("mpirun not found: install openmpi-bin (or set DATAHELIX_SKIP_MPI=1 to skip MPI tests)")
	}
}

// conformance runs the suite on np ranks with the environment setting
// env and checks every rank passed and printed want.
func conformance(t *testing.T, np int, env, want string) {
	t.Helper()
	out, _, err := mpirun(t, np, "conformance", 3*time.Minute, env)
	if err != nil {
		t.Fatalf("mpirun -np %d: %v\n%s", np, err, out)
	}
	t.Logf("mpirun -np %d (%s build):\n%s", np, mpinode.Flavor(), out)
	for r := 0; r < np; r++ {
		if ok := fmt.Sprintf("rank %d/%d ok", r, np); !strings.Contains(out, ok) {
			t.Errorf("output lacks %q:\n%s", ok, out)
		}
	}
	if !strings.Contains(out, want) {
		t.Errorf("output lacks %q:\n%s", want, out)
	}
}

// TestMPIConformance runs the suite under both wait policies: blocking
// MPI calls, and non-blocking ones polled with sleeps.
func TestMPIConformance(t *testing.T) {
	requireMPIRun(t)
	for _, policy := range []string{"block", "sleep"} {
		t.Run(policy, func(t *testing.T) {
			conformance(t, 4, "DATAHELIX_MPI_WAIT="+policy, "wait="+policy)
		})
	}
}

// waitByRankEnv gives each rank of a worker job its own DATAHELIX_MPI_WAIT:
// a comma-separated list indexed by world rank.
const waitByRankEnv = "DATAHELIX_TEST_WAIT_BY_RANK"

// TestMPIWaitPoliciesAgree starts one rank that would block and one that
// would sleep: a blocking collective does not match a non-blocking one,
// so the job hung in its first collective until the ranks agreed (on
// sleep, which any rank's choice makes every rank's).
func TestMPIWaitPoliciesAgree(t *testing.T) {
	requireMPIRun(t)
	// At MPI start, and again when the ranks choose after comparing CPU
	// sets (ShareNodeCPUs).
	for _, mode := range []string{"conformance", "share-cpus"} {
		out, _, err := mpirun(t, 2, mode, time.Minute, waitByRankEnv+"=block,sleep")
		if err != nil {
			t.Fatalf("%s: ranks started with block and sleep: %v\n%s", mode, err, out)
		}
		if n := strings.Count(out, "wait=sleep"); n != 2 {
			t.Errorf("%s: %d of 2 ranks report wait=sleep:\n%s", mode, n, out)
		}
	}
}

func TestMPISingleton(t *testing.T) {
	requireMPIRun(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0])
	cmd.Env = append(os.Environ(), workerEnv+"=conformance")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("singleton run: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "rank 0/1 ok") {
		t.Errorf("singleton output lacks %q:\n%s", "rank 0/1 ok", out)
	}
}

func TestMPIRankExitingEarlyEndsJob(t *testing.T) {
	requireMPIRun(t)
	out, took, err := mpirun(t, 4, "early-exit", 60*time.Second)
	if err == nil {
		t.Fatalf("job exited 0 after a rank died; output:\n%s", out)
	}
	if strings.Contains(out, "barrier passed") {
		t.Errorf("a barrier completed without the dead rank:\n%s", out)
	}
	t.Logf("job ended %v after start: %v", took.Round(time.Millisecond), err)
}

func TestMPIAbortEndsJob(t *testing.T) {
	requireMPIRun(t)
	out, took, err := mpirun(t, 3, "abort", 60*time.Second)
	if err == nil {
		t.Fatalf("job exited 0 after MPI_Abort; output:\n%s", out)
	}
	if !strings.Contains(out, "test abort from rank 1") {
		t.Errorf("abort message missing from output:\n%s", out)
	}
	t.Logf("job ended %v after start: %v", took.Round(time.Millisecond), err)
}

// TestMPIAbortFromAnotherGoroutine aborts from a goroutine while the
// rank's main goroutine is blocked in a collective that cannot complete:
// the abort must not wait for the MPI calls in flight. test.sh runs it
// under MPICH too, whose progress engine differs from OpenMPI's.
func TestMPIAbortFromAnotherGoroutine(t *testing.T) {
	requireMPIRun(t)
	out, took, err := mpirun(t, 2, "abort-goroutine", 60*time.Second)
	// The abort's own code, not one of a killed process (9, 15).
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 42 {
		t.Fatalf("job ended with %v, want exit status 42 from MPI_Abort; output:\n%s", err, out)
	}
	if !strings.Contains(out, "test abort from a goroutine of rank 1") {
		t.Errorf("abort message missing from output:\n%s", out)
	}
	if strings.Contains(out, "barrier passed") {
		t.Errorf("a barrier completed without rank 0:\n%s", out)
	}
	// MPI_Abort itself ended the job, not the rank's fall-back exit.
	if strings.Contains(out, "MPI_Abort did not end the job") {
		t.Errorf("MPI_Abort did not end the job; the fall-back did:\n%s", out)
	}
	// Rank 0 sleeps an hour: only the abort can end the job this soon.
	if took > 30*time.Second {
		t.Errorf("job took %v to end after the abort", took)
	}
	t.Logf("job ended %v after start: %v", took.Round(time.Millisecond), err)
}
