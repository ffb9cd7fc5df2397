package launcher

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/datahelix/datahelix/decode/gen/gentest"
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
	for r := range 4 {
		raw, err := os.ReadFile(fmt.Sprintf("%s.%d", filepath.Join(dir, "keys"), r))
		if err != nil {
			t.Fatal(err)
		}
		var v struct {
			Master string `json:"master_addr"`
			Iface  string `json:"gloo_ifname"`
		}
		json.Unmarshal(raw, &v)
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
