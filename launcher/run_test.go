package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/datahelix/datahelix/collective/collectivetest"
	"github.com/datahelix/datahelix/decode/gen/gentest"
	"github.com/datahelix/datahelix/spmd"
)

// fastRun are flags that make a run quick: 2-frame 32x32 clips.
func fastRun(data string, extra ...string) []string {
	return append([]string{"run", "--data", data, "--batch", "2", "--workers", "1", "--frames", "2", "--size", "32",
		"--gpu-step-ms", "5", "--gpu-ms-per-frame", "0", "--quiet", "--cache-dir", os.TempDir()}, extra...)
}

func TestRunUnderMPIRunExchangesSamples(t *testing.T) {
	data := gentest.Tiny(t)
	out := filepath.Join(t.TempDir(), "summary.json")
	trace := filepath.Join(t.TempDir(), "trace.jsonl")
	log, err := mpirunMain(t, 4, fastRun(data, "--steps", "8", "--loader", "local,helix", "--json", out, "--trace", trace)...)
	if err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	var rs []spmd.Summary
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &rs); err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 || rs[0].Loader != "local" || rs[1].Loader != "helix" {
		t.Fatalf("summary = %+v, want local then helix", rs)
	}
	for _, key := range []string{"loader", "ranks", "steps", "batch", "workers", "miss_rate", "gpu_wait_s", "gpu_wait_frac",
		"throughput_sps", "bytes_moved_per_step", "plan_us_p50", "allgather_us_p50", "cost_mape", "dropped_samples",
		"peak_rss_bytes", "batches_hash"} {
		if !bytes.Contains(raw, []byte(`"`+key+`"`)) {
			t.Errorf("summary JSON lacks %q", key)
		}
	}
	if rs[0].BatchesHash != rs[1].BatchesHash {
		t.Errorf("local and helix delivered different batches: %s vs %s", rs[0].BatchesHash, rs[1].BatchesHash)
	}
	if rs[1].Ranks != 4 || rs[1].BytesMovedPerStep <= 0 || rs[1].AllgatherUSP50 <= 0 {
		t.Errorf("helix over MPI: %+v; want 4 ranks, bytes moved and allgather time", rs[1])
	}
	lines, _ := os.ReadFile(trace)
	if n := strings.Count(string(lines), "\n"); n != 2*4*8 {
		t.Errorf("trace has %d lines, want 2 loaders x 4 ranks x 8 steps", n)
	}
	if !strings.Contains(log, "helix vs local") {
		t.Errorf("no comparison line in the table:\n%s", log)
	}
}

func TestRunStartupErrors(t *testing.T) {
	data := gentest.Tiny(t)
	trunc := t.TempDir()
	shards, _ := filepath.Glob(filepath.Join(data, "*.tar"))
	for i, p := range shards {
		b, _ := os.ReadFile(p)
		if i == 2 {
			b = b[:len(b)/3] // cut in the middle of a member
		}
		os.WriteFile(filepath.Join(trunc, filepath.Base(p)), b, 0o644)
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"missing dataset", fastRun("/nonexistent/shards"), "/nonexistent/shards"},
		{"truncated shard", fastRun(trunc), filepath.Base(shards[2])},
		{"shards do not split", fastRun(data, "--ranks", "3"), "8 shards do not split evenly over 3 ranks"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runMain(append(tt.args, "--ranks", "4")...)
			if tt.name == "shards do not split" {
				code, _, stderr = runMain(tt.args...)
			}
			if code == 0 || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d, stderr %q: want a failure naming %q", code, stderr, tt.want)
			}
		})
	}
	// Under mpirun, every rank fails and the job ends.
	log, err := mpirunMain(t, 4, fastRun(trunc)...)
	if err == nil || !strings.Contains(log, filepath.Base(shards[2])) {
		t.Errorf("mpirun with a truncated shard: %v\n%s", err, log)
	}
}

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
