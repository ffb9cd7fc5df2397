package launcher

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/datahelix/datahelix/internal/cli"
	"github.com/datahelix/datahelix/internal/gen/gentest"
	"github.com/datahelix/datahelix/internal/mpinode"
)

// multinode runs a job on 2 nodes x 2 ranks of the test bed
// (scripts/multinode.sh), skipping the test where network namespaces are
// not permitted.
func multinode(t *testing.T, args ...string) string {
	t.Helper()
	return multinodeMPI(t, "openmpi", args...)
}

// multinodeMPI is multinode with the MPI library flavor: openmpi or mpich
// (MPICH's Hydra entering the nodes through the same agent).
func multinodeMPI(t *testing.T, flavor string, args ...string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds two network namespaces and runs a job across them")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "../scripts/multinode.sh", append([]string{"--nodes", "2", "--", "-np", "4"}, args...)...)
	cmd.Env = append(os.Environ(), "DATAHELIX_MPI="+flavor)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 3 {
		t.Skipf("no test bed: %s", strings.TrimSpace(out.String()))
	}
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	return out.String()
}

// TestMultinodeInfo: the bed's job sees 2 hosts with 2 local ranks each,
// under OpenMPI and under MPICH.
func TestMultinodeInfo(t *testing.T) {
	for _, flavor := range []string{"openmpi", "mpich"} {
		t.Run(flavor, func(t *testing.T) {
			checkTwoHosts(t, multinodeMPI(t, flavor, "datahelix", "info", "--rounds", "20"))
		})
	}
}

// checkTwoHosts checks that info's out shows node0 and node1 with local
// ranks 0 and 1 each.
func checkTwoHosts(t *testing.T, out string) {
	t.Helper()
	hosts := map[string][]string{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) > 5 && f[0] == "rank" && f[2] == "local" && f[4] == "host" {
			hosts[f[5]] = append(hosts[f[5]], f[3])
		}
	}
	if len(hosts) != 2 || len(hosts["node0"]) != 2 || len(hosts["node1"]) != 2 {
		t.Errorf("hosts and local ranks %v, want node0 and node1 with local ranks 0 and 1:\n%s", hosts, out)
	}
}

// TestMultinodeRunMatchesOneNode: run across two nodes trains the
// batches it trains on one (the same batches hash).
func TestMultinodeRunMatchesOneNode(t *testing.T) {
	data := gentest.Tiny(t)
	dir := t.TempDir()
	flags := []string{"--steps", "6", "--loader", "helix", "--json"}
	multinode(t, append(append([]string{"datahelix"}, fastRun(data, flags...)...), filepath.Join(dir, "bed.json"))...)
	if log, err := mpirunMain(t, 4, append(fastRun(data, flags...), filepath.Join(dir, "one.json"))...); err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	if a, b := readSummary(t, filepath.Join(dir, "bed.json")), readSummary(t, filepath.Join(dir, "one.json")); a.BatchesHash != b.BatchesHash {
		t.Errorf("batches hash %s across nodes, %s on one", a.BatchesHash, b.BatchesHash)
	}
}

// TestMultinodeTrain: train across nodes, with MASTER_ADDR rank 0's node
// address (never a loopback one) and gloo on the interface that reaches
// it; examples/train.py's DDP (gloo) runs, and the trainers' samples
// are the ones of a run on one node.
func TestMultinodeTrain(t *testing.T) {
	needTorch(t)
	data := gentest.Tiny(t)
	dir := t.TempDir()
	args := trainArgs(data, "bed1", []string{"--steps", "6", "--json", filepath.Join(dir, "s.json")}, "--out", filepath.Join(dir, "keys"))
	multinode(t, append([]string{"datahelix"}, args...)...)
	for r, v := range readTrainers(t, filepath.Join(dir, "keys"), 4) {
		if !strings.HasPrefix(v.Master, "10.") || !strings.HasSuffix(v.Master, ".0.1") || v.Iface != "eth0" {
			t.Errorf("rank %d's trainer: MASTER_ADDR %q, GLOO_SOCKET_IFNAME %q; want node0's address (10.N.0.1) and eth0", r, v.Master, v.Iface)
		}
	}
	one := filepath.Join(dir, "one.json")
	if log, err := mpirunMain(t, 4, trainArgs(data, "bed2", []string{"--steps", "6", "--json", one})...); err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	if a, b := readSummary(t, filepath.Join(dir, "s.json")), readSummary(t, one); a.BatchesHash != b.BatchesHash {
		t.Errorf("batches hash %s across nodes, %s on one", a.BatchesHash, b.BatchesHash)
	}
}

// startMultinode starts a job on the bed and returns it, the namespace of
// its node1 and where its output goes; the test ends it on failure.
func startMultinode(t *testing.T, args ...string) (*exec.Cmd, string, *bytes.Buffer) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds two network namespaces and runs a job across them")
	}
	cmd := exec.Command("../scripts/multinode.sh", append([]string{"--nodes", "2", "--", "-np", "4"}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Signal(syscall.SIGTERM) // the script tears the nodes down
			cmd.Wait()
		}
	})
	return cmd, fmt.Sprintf("dh%dn1", cmd.Process.Pid), &out
}

// waitRanks waits until node ns runs n datahelix processes.
func waitRanks(t *testing.T, ns string, n int, out *bytes.Buffer) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		pids := strings.Fields(string(must(exec.Command("ip", "netns", "pids", ns).Output())))
		count := 0
		for _, p := range pids {
			if comm, _ := os.ReadFile("/proc/" + p + "/comm"); strings.HasPrefix(string(comm), "datahelix") {
				count++
			}
		}
		if count >= n {
			return
		}
	}
	t.Fatalf("node %s never ran %d ranks:\n%s", ns, n, out.String())
}

// TestMultinodeLostNodeEndsJob: a cut link, or every process of a node
// killed, ends the whole job within 60 s, and no process is left on
// either node (the bed reports any it must kill).
func TestMultinodeLostNodeEndsJob(t *testing.T) {
	data := gentest.Tiny(t)
	for _, how := range []string{"cut", "kill"} {
		t.Run(how, func(t *testing.T) {
			cmd, ns, out := startMultinode(t, append([]string{"datahelix"}, fastRun(data, "--steps", "100000")...)...)
			waitRanks(t, ns, 2, out)
			time.Sleep(2 * time.Second) // training
			lost := time.Now()
			switch how {
			case "cut":
				if b, err := exec.Command("ip", "netns", "exec", ns, "ip", "link", "set", "eth0", "down").CombinedOutput(); err != nil {
					t.Fatalf("%v: %s", err, b)
				}
			case "kill":
				pids := strings.Fields(string(must(exec.Command("ip", "netns", "pids", ns).Output())))
				exec.Command("kill", append([]string{"-9"}, pids...)...).Run()
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				if err == nil {
					t.Errorf("the job succeeded after node1 was lost:\n%s", out.String())
				}
			case <-time.After(60 * time.Second):
				t.Fatalf("the job still runs 60 s after node1 was lost (%s):\n%s", how, out.String())
			}
			t.Logf("ended %v after node1 was lost (%s)", time.Since(lost).Round(time.Second), how)
			if strings.Contains(out.String(), "left running on node") { // scripts/multinode.sh's report of a process it had to kill
				t.Errorf("processes outlived the job:\n%s", out.String())
			}
		})
	}
}

// TestPeerTimeoutUnderMPIRun: a rank that stops answering (SIGSTOP: the
// heartbeat cannot tell it from a lost node) ends the job after
// --peer-timeout, named by rank 0, however long the stall watchdog's
// timeout; the ranks that keep running are not taken for lost, however
// slow their steps.
func TestPeerTimeoutUnderMPIRun(t *testing.T) {
	data := gentest.Tiny(t)
	cmd, out := startMain(t, 2, fastRun(data, "--steps", "100000", "--peer-timeout", "3s", "--stall-timeout", "10m", "--gpu-step-ms", "200")...)
	// Either rank: rank 0 names a silent rank, a rank that no longer
	// hears rank 0 names it; both messages say what the test looks for.
	var ranks []int
	waitFor(t, "two ranks", out, func() bool {
		ranks = descendants(cmd.Process.Pid, filepath.Base(os.Args[0]))
		return len(ranks) == 2
	})
	victim := ranks[1]
	time.Sleep(4 * time.Second) // a few slow steps: no false alarm
	if cmd.ProcessState != nil || datahelixLines(out.String()) != "" {
		t.Fatalf("the job ended or said something before any rank was lost:\n%s", out.String())
	}
	syscall.Kill(victim, syscall.SIGSTOP)
	stopped := time.Now()
	// The job ends with the lost peer's status (MPICH's mpiexec may
	// report the stopped rank's SIGKILL first).
	if code := exitCode(cmd.Wait()); code != cli.ExitPeerLost && !(mpinode.Flavor() == "mpich" && code == 9) {
		t.Errorf("exit status %d, want %d for a lost peer:\n%s", code, cli.ExitPeerLost, out.String())
	}
	if took := time.Since(stopped); took > 30*time.Second {
		t.Errorf("the job ended %v after a rank stopped, want a few seconds past --peer-timeout 3s", took)
	}
	// The value the line must carry: the timeout and its flag.
	if !strings.Contains(out.String(), "no heartbeat for 3s (--peer-timeout)") {
		t.Errorf("the log does not name the lost rank:\n%s", out.String())
	}
}
