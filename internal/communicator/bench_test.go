//go:build !nompi

package communicator_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/datahelix/datahelix/internal/collectivetest"
	"github.com/datahelix/datahelix/internal/communicator"
	"github.com/datahelix/datahelix/internal/mpinode"
)

const (
	latencyBytes  = 1024
	latencyRounds = 2000
	latencyRanks  = 4
)

// latencyWorker is the Go side of BenchmarkAllgatherGoVsC: the same loop
// as testdata/allgather_latency.c through the binding.
func latencyWorker(w *communicator.World) error {
	send := make([]byte, latencyBytes)
	recv := make([]byte, latencyBytes*w.Size())
	for i := 0; i < 20; i++ {
		if err := w.Allgather(send, recv); err != nil {
			return err
		}
	}
	if err := w.Barrier(); err != nil {
		return err
	}
	us := make([]float64, latencyRounds)
	for i := range us {
		t := time.Now()
		if err := w.Allgather(send, recv); err != nil {
			return err
		}
		us[i] = float64(time.Since(t).Nanoseconds()) / 1e3
	}
	slices.Sort(us)
	if w.Rank() == 0 {
		fmt.Printf("p50_us %.3f\n", us[len(us)/2])
	}
	return nil
}

// BenchmarkAllgatherGoVsC times a 1 KiB-per-rank allgather among 4 ranks
// through the Go binding and through a C program built here against the
// same MPI, alternating the two several times in one run, and reports
// the ratio of the best medians (go/c; the goal is at most 1.10). Run
// with -benchtime=1x: each iteration is a set of mpirun jobs.
func BenchmarkAllgatherGoVsC(b *testing.B) {
	if _, err := exec.LookPath("mpicc"); err != nil {
		b.Skip("mpicc not installed")
	}
	cbin := filepath.Join(b.TempDir(), "allgather_latency")
	cc := "mpicc.openmpi"
	if mpinode.Flavor() == "mpich" {
		cc = "mpicc.mpich"
	}
	if _, err := exec.LookPath(cc); err != nil {
		cc = "mpicc"
	}
	if out, err := exec.Command(cc, "-O2", "-o", cbin, "testdata/allgather_latency.c").CombinedOutput(); err != nil {
		b.Fatalf("%s: %v\n%s", cc, err, out)
	}
	run := func(prog string, env ...string) float64 {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		var args []string
		if prog == cbin {
			args = []string{strconv.Itoa(latencyBytes), strconv.Itoa(latencyRounds)}
		}
		cmd := collectivetest.MPIRun(ctx, latencyRanks, prog, args...)
		cmd.Env = append(os.Environ(), env...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			b.Fatalf("%s: %v\n%s", prog, err, out.String())
		}
		for _, line := range strings.Split(out.String(), "\n") {
			if v, ok := strings.CutPrefix(line, "p50_us "); ok {
				f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
				if err == nil {
					return f
				}
			}
		}
		b.Fatalf("%s printed no p50_us line:\n%s", prog, out.String())
		return 0
	}
	for i := 0; i < b.N; i++ {
		var goUs, cUs []float64
		for k := 0; k < 3; k++ {
			// The comparison is of the same blocking MPI call, so the
			// binding's sleeping wait policy is turned off.
			goUs = append(goUs, run(os.Args[0], workerEnv+"=latency", "DATAHELIX_MPI_WAIT=block"))
			cUs = append(cUs, run(cbin))
		}
		bestGo, bestC := slices.Min(goUs), slices.Min(cUs)
		b.ReportMetric(bestGo, "go-p50-µs")
		b.ReportMetric(bestC, "c-p50-µs")
		b.ReportMetric(bestGo/bestC, "go/c")
		b.Logf("allgather %d B x %d ranks, p50 per job: go %v µs, c %v µs", latencyBytes, latencyRanks, goUs, cUs)
	}
}
