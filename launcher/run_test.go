package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/datahelix/datahelix/collective"
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
	// Every message of several parts sent in place, however small, and
	// the setting recorded in the job record.
	t.Setenv("DATAHELIX_MPI_PARTS", "inplace")
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
	// What produced the figures, in each loader's object.
	var jobs []struct {
		Job struct {
			Args     []string `json:"args"`
			Data     string   `json:"data"`
			Seed     uint64   `json:"seed"`
			Frames   int      `json:"frames"`
			MPI      string   `json:"mpi"`
			MPIParts string   `json:"mpi_parts"`
			Machine  struct {
				Host   string `json:"host"`
				Commit string `json:"commit"`
			} `json:"machine"`
		} `json:"job"`
		SteadyMissRate *float64 `json:"steady_miss_rate"`
	}
	if err := json.Unmarshal(raw, &jobs); err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if j := j.Job; !slices.Contains(j.Args, "--json") || j.Args[0] != "run" || j.Data != data || j.Seed != 1 || j.Frames != 2 ||
			j.MPI == "" || j.MPI == "in-process" || j.MPIParts != "inplace" || j.Machine.Host == "" || j.Machine.Commit == "" {
			t.Errorf("job record %+v; want the arguments, the dataset, the seed and frames, the MPI library and settings, and the machine", j)
		}
	}
	if jobs[1].SteadyMissRate != nil {
		t.Errorf("steady_miss_rate = %v over 8 steps, not longer than the warm-up: want null", *jobs[1].SteadyMissRate)
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

// TestRunFlagBounds checks that values the runtime cannot use are usage
// errors (one line naming the flag, exit 2) before MPI starts, rather than
// an out-of-memory crash, an overflowed time or an error from spmd after
// MPI started.
func TestRunFlagBounds(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"run", "--gpu-step-ms", "NaN"}, "--gpu-step-ms NaN"},
		{[]string{"run", "--gpu-step-ms", "Inf"}, "--gpu-step-ms +Inf"},
		{[]string{"run", "--gpu-step-ms", "1e300"}, "--gpu-step-ms 1e+300"},
		{[]string{"run", "--gpu-ms-per-frame", "NaN"}, "--gpu-ms-per-frame NaN"},
		{[]string{"run", "--gpu-ms-per-sample", "-1"}, "--gpu-ms-per-sample -1"},
		{[]string{"run", "--gpu-us-per-token", "1e30"}, "--gpu-us-per-token"},
		{[]string{"run", "--gpu-ms-per-frame", "3000000", "--batch", "4096"}, "--gpu-ms-per-frame 3e+06"},
		{[]string{"run", "--batch", "100000"}, "--batch 100000: want 1..4096"},
		{[]string{"run", "--decoded-budget", "17592186044417"}, "--decoded-budget 17592186044417"},
		{[]string{"run", "--checkpoint-keep", "-1"}, "--checkpoint-keep -1: want 0 (every checkpoint) or more"},
		{[]string{"run", "--stall-timeout", "-1s"}, "--stall-timeout -1s: want 0 (never) or at least 1s"},
		{[]string{"run", "--stall-timeout", "3ns"}, "--stall-timeout 3ns: want 0 (never) or at least 1s"},
		{[]string{"run", "--compressed-budget", "-1"}, "--compressed-budget -1"},
		{[]string{"run", "--frames", "1024", "--size", "4096"}, "--frames 1024 --size 4096: one decoded clip would be 51539607552 bytes"},
		{[]string{"run", "--size", "5000"}, "--size 5000: want 8..4096"},
		{[]string{"decode", "--size", "100000", "x.mp4"}, "--size 100000: want 8..4096"},
		{[]string{"decode", "--frames", "100000", "x.mp4"}, "--frames 100000: want 1..1024"},
		{[]string{"decode", "--frames", "1024", "--size", "1024", "x.mp4"}, "--frames 1024 --size 1024"},
		{[]string{"costmodel", "--data", "x", "--size", "100000"}, "--size 100000"},
	}
	for _, tt := range tests {
		code, stdout, stderr := runMain(tt.args...)
		if code != 2 || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, tt.want) || stdout != "" {
			t.Errorf("%q: got exit %d, stderr %q, stdout %q; want exit 2 and one line containing %q", tt.args, code, stderr, stdout, tt.want)
		}
	}
}

// TestRunOutputsCheckedFirst checks that --json, --trace and
// --checkpoint-dir paths that cannot be written end the run before it
// trains (no results table), in-process and under mpirun.
func TestRunOutputsCheckedFirst(t *testing.T) {
	data := gentest.Tiny(t)
	tests := []struct {
		flags []string
		want  string
	}{
		{[]string{"--json", "/nonexistent-dir/x.json"}, "--json: open /nonexistent-dir/x.json"},
		{[]string{"--trace", "/proc/x.jsonl"}, "--trace: open /proc/x.jsonl"},
		{[]string{"--checkpoint-dir", "/proc/ck", "--checkpoint-every", "2"}, "--checkpoint-dir: mkdir /proc/ck"},
	}
	for _, tt := range tests {
		args := fastRun(data, append([]string{"--steps", "40", "--ranks", "4"}, tt.flags...)...)
		code, stdout, stderr := runMain(args...)
		if code != 1 || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, tt.want) || strings.Contains(stdout, "batches hash") {
			t.Errorf("%q: got exit %d, stderr %q, stdout %q; want exit 1, one line containing %q, no table", tt.flags, code, stderr, stdout, tt.want)
		}
	}
	log, err := mpirunMain(t, 2, fastRun(data, "--steps", "40", "--json", "/nonexistent-dir/x.json")...)
	if err == nil || strings.Count(log, "--json: open /nonexistent-dir/x.json") != 1 || strings.Contains(log, "batches hash") {
		t.Errorf("mpirun with an unwritable --json: %v\n%s\nwant a failure reported once, before the run", err, log)
	}
}

// TestRunOutputsReplaced checks that the files opened before the run get
// exactly the new contents (an older, longer file is truncated) and that a
// failed run removes the files it created.
func TestRunOutputsReplaced(t *testing.T) {
	data := gentest.Tiny(t)
	dir := t.TempDir()
	js, trace := filepath.Join(dir, "s.json"), filepath.Join(dir, "t.jsonl")
	junk := bytes.Repeat([]byte("junk "), 100000)
	for _, p := range []string{js, trace} {
		if err := os.WriteFile(p, junk, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	code, _, stderr := runMain(fastRun(data, "--steps", "3", "--ranks", "4", "--loader", "local", "--json", js, "--trace", trace)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rs []spmd.Summary
	raw, err := os.ReadFile(js)
	if err != nil || json.Unmarshal(raw, &rs) != nil || len(rs) != 1 {
		t.Errorf("--json over an older file: got %d summaries, err %v; want 1", len(rs), err)
	}
	// 3 steps are within the warm-up: no steady-state figures, rather than 0.
	for _, key := range []string{"steady_miss_rate", "steady_gpu_wait_frac", "steady_throughput_sps"} {
		if !bytes.Contains(raw, []byte(`"`+key+`": null`)) {
			t.Errorf("--json of a run within its warm-up: want %s null in\n%s", key, raw)
		}
	}
	raw, _ = os.ReadFile(trace)
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	for _, l := range lines {
		var v map[string]any
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatalf("--trace line %q: %v", l, err)
		}
	}
	if len(lines) != 4*3 {
		t.Errorf("trace has %d lines, want 4 ranks x 3 steps", len(lines))
	}
	// A run that fails after the outputs are open leaves no new file.
	fresh := filepath.Join(dir, "fresh.json")
	if code, _, _ := runMain(fastRun("/nonexistent/shards", "--ranks", "2", "--json", fresh)...); code == 0 {
		t.Fatal("run on a missing dataset succeeded")
	}
	if _, err := os.Stat(fresh); !os.IsNotExist(err) {
		t.Errorf("a failed run left %s behind (stat: %v)", fresh, err)
	}
}

// TestChange checks the comparison of two fractions as printed: both
// values, and the change between them as rounded for print.
func TestChange(t *testing.T) {
	for _, tt := range []struct {
		a, b float64
		want string
	}{
		{0.007, 0.014, "GPU wait 0.7% → 1.4% (+100.0%)"},
		{0.0006, 0.0012, "GPU wait 0.1% → 0.1% (+0.0%)"}, // not "+100.0%"
		{0.5, 0.05, "GPU wait 50.0% → 5.0% (-90.0%)"},
		{0.00001, 0.00004, "GPU wait 0.0% → 0.0% (same)"},
		{0.2625, 0.0625, "GPU wait 26.2% → 6.2% (-76.3%)"}, // as the table prints 63/240 and 5/80
	} {
		if got := change("GPU wait", tt.a, tt.b); got != tt.want {
			t.Errorf("change(%v, %v) = %q, want %q", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestReduction(t *testing.T) {
	tests := []struct {
		a, b float64
		want string
	}{
		{0.5, 0.25, "-50.0%"},
		{0.1, 0.15, "+50.0%"},
		{0, 0, "same"},
		{0.00001, 0.00006, "same"}, // both print as 0.0%: not "+500.0%"
		{0.0001, 0.2, "more"},
		{0.2, 0.0001, "-100.0%"},
	}
	for _, tt := range tests {
		if got := reduction(tt.a, tt.b); got != tt.want {
			t.Errorf("reduction(%v, %v) = %q, want %q", tt.a, tt.b, got, tt.want)
		}
	}
}

// TestPrintTableSteadyWindow checks the comparison after the warm-up: no
// ratio over a window of one or two steps, nor of waits below the
// table's precision.
func TestPrintTableSteadyWindow(t *testing.T) {
	sum := func(loader string, steps int, wait float64) spmd.Summary {
		return spmd.Summary{Loader: loader, Ranks: 2, Steps: steps, WarmupSteps: 8, MissRate: 0.1, GPUWaitFrac: 0.2,
			ThroughputSPS: 10, SteadyMissRate: 0, SteadyGPUWaitFrac: wait, SteadyThroughputSPS: 10}
	}
	f := &runFlags{}
	tests := []struct {
		steps    int
		waitB    float64
		want     string
		wantNone string
	}{
		{10, 0.00006, "2 steps, too few to compare", "+500"},
		{60, 0.00006, "misses 0.0% → 0.0% (same), GPU wait 0.0% → 0.0% (same), throughput 1.00x", "+500"},
		{60, 0.01, "misses 0.0% → 0.0% (same), GPU wait 0.0% → 1.0% (more)", "too few"},
	}
	for _, tt := range tests {
		var b bytes.Buffer
		printTable(&b, []spmd.Summary{sum("torch", tt.steps, 0.00001), sum("helix", tt.steps, tt.waitB)}, 2, f)
		if out := b.String(); !strings.Contains(out, tt.want) || strings.Contains(out, tt.wantNone) {
			t.Errorf("%d steps: got\n%s\nwant %q and no %q", tt.steps, out, tt.want, tt.wantNone)
		}
	}
}

// TestRunWarnsUnevenSplit gives rank 1 a one-sample shard next to rank 0's
// four-sample one: with a batch of 2, rank 1 repeats its sample in every
// batch, which rank 0 reports once, in one line naming the rank, its
// count and the batch. An even split says nothing.
func TestRunWarnsUnevenSplit(t *testing.T) {
	data := gentest.Tiny(t)
	shards, _ := filepath.Glob(filepath.Join(data, "*.tar"))
	uneven := t.TempDir()
	b, err := os.ReadFile(shards[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(uneven, "a.tar"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	gentest.WriteFirstSample(t, shards[1], filepath.Join(uneven, "b.tar"))
	const want = "datahelix: warning: samples per epoch below the batch of 2: rank 1 has 1 (the most: rank 0 has 4)"
	code, _, stderr := runMain(fastRun(uneven, "--ranks", "2", "--steps", "3", "--loader", "torch,helix")...)
	if code != 0 || strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, want) {
		t.Errorf("uneven shards: exit %d, stderr %q; want one line starting %q", code, stderr, want)
	}
	code, _, stderr = runMain(fastRun(data, "--ranks", "2", "--steps", "3")...)
	if code != 0 || stderr != "" {
		t.Errorf("even shards: exit %d, stderr %q; want no warning", code, stderr)
	}
}

func TestFirstFailedRank(t *testing.T) {
	tests := []struct {
		failing []int
		want    int
	}{
		{nil, -1},
		{[]int{2}, 2},
		{[]int{3, 1}, 1},
		{[]int{0, 1, 2, 3}, 0},
	}
	for _, tt := range tests {
		errs := collective.RunLocal(context.Background(), 4, func(ctx context.Context, c collective.Comm) error {
			got, err := firstFailedRank(c, slices.Contains(tt.failing, c.Rank()))
			if err != nil {
				return err
			}
			if got != tt.want {
				return fmt.Errorf("got %d, want %d", got, tt.want)
			}
			return nil
		})
		for r, err := range errs {
			if err != nil {
				t.Errorf("ranks %v failing: rank %d: %v", tt.failing, r, err)
			}
		}
	}
}

// TestAgreeOnError fails ranks 1 and 3 of 4: every rank must return the
// same AllRanks error carrying rank 1's message (rank 0 prints it, so it
// can no longer come before the failing rank's own line), and rank 1's
// must still wrap its cause.
func TestAgreeOnError(t *testing.T) {
	cause := errors.New("open /data/shard-7.tar: permission denied")
	errs := collective.RunLocal(context.Background(), 4, func(ctx context.Context, c collective.Comm) error {
		var err error
		switch c.Rank() {
		case 1:
			err = cause
		case 3:
			err = errors.New("another")
		}
		return agreeOnError(c, err, "cannot open the dataset")
	})
	want := "rank 1 cannot open the dataset: open /data/shard-7.tar: permission denied (and 1 more rank failed)"
	for r, err := range errs {
		if !collective.IsAllRanks(err) || err.Error() != want {
			t.Errorf("rank %d: got %v, want an AllRanks %q", r, err, want)
		}
	}
	if !errors.Is(errs[1], cause) {
		t.Errorf("rank 1's error does not wrap its cause: %v", errs[1])
	}
	for r, err := range collective.RunLocal(context.Background(), 2, func(ctx context.Context, c collective.Comm) error {
		return agreeOnError(c, nil, "cannot open the dataset")
	}) {
		if err != nil {
			t.Errorf("no rank failed: rank %d: %v", r, err)
		}
	}
	// A rank stopped by a signal: every rank's error must still be a
	// cancellation, so that each reports the signal, not a failure.
	for r, err := range collective.RunLocal(context.Background(), 2, func(ctx context.Context, c collective.Comm) error {
		var err error
		if c.Rank() == 0 {
			err = fmt.Errorf("generate the default dataset: %w", context.Canceled)
		}
		return agreeOnError(c, err, "failed")
	}) {
		if !errors.Is(err, context.Canceled) || err.Error() != "rank 0 failed: generate the default dataset: context canceled" {
			t.Errorf("a cancelled rank 0: rank %d: %v; want a cancellation with rank 0's text", r, err)
		}
	}
}

// TestDefaultDatasetFailsEveryRank fails the default dataset's generation
// on the rank that makes it: every rank must return the same AllRanks
// error carrying that rank's, so that rank 0 prints one line and the job
// ends cleanly (the failing rank used to abort the job while rank 0
// printed that "another node" failed).
func TestDefaultDatasetFailsEveryRank(t *testing.T) {
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for r, c := range collective.NewLocal(2) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[r] = defaultDataset(context.Background(), c, "/proc/nope", 1, io.Discard)
		}()
	}
	wg.Wait()
	want := "rank 0 failed: generate the default dataset: "
	for r, err := range errs {
		if !collective.IsAllRanks(err) || !strings.HasPrefix(err.Error(), want) || err.Error() != errs[0].Error() {
			t.Errorf("rank %d: got %v, want an AllRanks error starting %q, as rank 0's", r, err, want)
		}
	}
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
		// The running rank waits in MPI for the stopped one, and says so.
		if err == nil || !strings.Contains(out.String(), "aborting the job: no step delivered for 3s (--stall-timeout), loader helix after step") ||
			!strings.Contains(out.String(), "this rank has waited in ") {
			t.Errorf("%v; want a failure naming the stall:\n%s", err, out.String())
		}
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
// ran on until SIGKILL. It must abort the job itself, collective.StuckGrace later.
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
		okCode := code == 143 || collective.Flavor() == "mpich" && code == 9
		if !okCode || !strings.Contains(out.String(), "interrupted by SIGTERM; still waiting") {
			t.Errorf("exit %d, want 143 and the abort's message:\n%s", code, out.String())
		}
		if took < collective.StuckGrace || took > collective.StuckGrace+20*time.Second {
			t.Errorf("job ended %v after SIGTERM, want about %v", took, collective.StuckGrace)
		}
	case <-time.After(collective.StuckGrace + 40*time.Second):
		cmd.Process.Kill()
		t.Fatalf("job still running %v after SIGTERM to a rank whose peer is stopped:\n%s", collective.StuckGrace+40*time.Second, out.String())
	}
}

// TestDefaultStallTimeout checks that the default --stall-timeout leaves
// room for ten of the slowest steps the GPU flags model: a 10-minute
// default aborted jobs whose steps the flags allowed to take an hour.
func TestDefaultStallTimeout(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want time.Duration
	}{
		{nil, 10 * time.Minute},
		{[]string{"--gpu-step-ms", "120000"}, 10 * (2*time.Minute + 4*8*time.Millisecond)},
		{[]string{"--gpu-ms-per-frame", "5000", "--batch", "8", "--frames", "4"}, 10 * (120*time.Millisecond + 32*5*time.Second)},
	} {
		var f runFlags
		fs := newFlags("run", "")
		f.register(fs)
		if err := fs.Parse(tt.args); err != nil {
			t.Fatal(err)
		}
		if err := f.validate(); err != nil {
			t.Fatal(err)
		}
		if got := f.defaultStallTimeout(); got != tt.want {
			t.Errorf("%q: got %v, want %v", tt.args, got, tt.want)
		}
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

// undecodableShards writes n shards of one sample each whose only member,
// sN.npy, holds bytes no decoder reads, into dir, named u-N.tar.
func undecodableShards(t *testing.T, dir string, n int) {
	t.Helper()
	for i := range n {
		name := fmt.Sprintf("s%d.npy", i)
		writeTestFile(t, filepath.Join(dir, fmt.Sprintf("u-%d.tar", i)), tarOf(t, map[string][]byte{name: []byte("\x93NUMPY not really")}, name))
	}
}

// TestRunFailsWhenEverySampleIsDropped checks that a run whose loaders
// decoded no sample at all fails, with one line naming the loaders and
// the count, after printing the table and writing --json, in-process and
// under mpirun (every rank exits, none hangs); and that a run that
// dropped only some samples succeeds.
func TestRunFailsWhenEverySampleIsDropped(t *testing.T) {
	bad := t.TempDir()
	undecodableShards(t, bad, 4)
	const want = `datahelix: loader torch dropped all 16 samples, loader helix dropped all 16 samples: none decoded, so nothing trained (the ranks' "dropping sample" lines say why)`
	out := filepath.Join(t.TempDir(), "summary.json")
	code, stdout, stderr := runMain(fastRun(bad, "--ranks", "4", "--steps", "2", "--json", out)...)
	if code != 1 || strings.Count(stderr, want) != 1 || !strings.HasSuffix(stderr, want+"\n") {
		t.Errorf("every sample dropped: exit %d, stderr %q; want exit 1 and a last line %q", code, stderr, want)
	}
	if !strings.Contains(stdout, "dropped samples") {
		t.Errorf("every sample dropped: no table on stdout:\n%s", stdout)
	}
	// Each sample's line once, by the rank that owns it, over both loaders.
	if n := strings.Count(stderr, ": dropping sample: "); n != 4 {
		t.Errorf("every sample dropped: %d drop lines, want 4 (each sample once over the two loaders):\n%s", n, stderr)
	}
	var rs []spmd.Summary
	if raw, err := os.ReadFile(out); err != nil || json.Unmarshal(raw, &rs) != nil || len(rs) != 2 || rs[0].DroppedSamples != 16 || rs[1].DroppedSamples != 16 {
		t.Errorf("--json of the failed run: %+v (%v); want both loaders' summaries, 16 dropped each", rs, err)
	}

	// Some samples dropped: a success, the summary counts them.
	data := gentest.Tiny(t)
	shards, _ := filepath.Glob(filepath.Join(data, "*.tar"))
	mixed := t.TempDir()
	for _, p := range shards[:4] {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		writeTestFile(t, filepath.Join(mixed, filepath.Base(p)), b)
	}
	undecodableShards(t, mixed, 4)
	code, _, stderr = runMain(fastRun(mixed, "--ranks", "4", "--steps", "2", "--loader", "torch", "--json", out)...)
	rs = nil
	if raw, err := os.ReadFile(out); err != nil || json.Unmarshal(raw, &rs) != nil || len(rs) != 1 || rs[0].DroppedSamples == 0 {
		t.Errorf("some samples dropped: --json %+v (%v); want dropped samples counted", rs, err)
	}
	if code != 0 || strings.Contains(stderr, "dropped all") {
		t.Errorf("some samples dropped: exit %d, stderr %q; want exit 0", code, stderr)
	}

	// Under mpirun every rank comes to the same end: the job fails
	// once, without hanging (mpirunMain's limit), the outputs written;
	// each rank names its sample once over the loaders.
	os.Remove(out)
	log, err := mpirunMain(t, 4, fastRun(bad, "--steps", "2", "--loader", "torch,helix", "--json", out)...)
	const mpiWant = `datahelix: loader torch dropped all 16 samples, loader helix dropped all 16 samples: none decoded`
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() == 0 || strings.Count(log, mpiWant) != 1 || strings.Contains(log, "aborting") {
		t.Errorf("mpirun, every sample dropped: %v\n%s\nwant a non-zero exit, %q once and no abort", err, log, mpiWant)
	}
	for i := range 4 {
		if n := strings.Count(log, fmt.Sprintf(`dropping sample: decode: shard %s: sample "s%d"`, filepath.Join(bad, fmt.Sprintf("u-%d.tar", i)), i)); n != 1 {
			t.Errorf("mpirun, every sample dropped: sample s%d named in %d lines, want 1:\n%s", i, n, log)
		}
	}
	if st, err := os.Stat(out); err != nil || st.Size() == 0 {
		t.Errorf("mpirun, every sample dropped: --json %s not written: %v", out, err)
	}
}

// TestAllDroppedError checks the rule: a loader with no sample delivered
// and some dropped fails the job; some dropped, or none given, does not.
func TestAllDroppedError(t *testing.T) {
	loaders := []spmd.Kind{spmd.KindTorch, spmd.KindHelix}
	for _, tt := range []struct {
		counts []int64 // delivered, dropped per loader
		want   string  // "" no error
	}{
		{[]int64{32, 0, 32, 0}, ""},
		{[]int64{31, 1, 1, 31}, ""},
		{[]int64{0, 0, 0, 0}, ""}, // no sample at all (no step): nothing dropped
		{[]int64{0, 32, 30, 2}, "loader torch dropped all 32 samples: none decoded"},
		{[]int64{5, 3, 0, 8}, "loader helix dropped all 8 samples: none decoded"},
		{[]int64{0, 4, 0, 4}, "loader torch dropped all 4 samples, loader helix dropped all 4 samples: none decoded"},
	} {
		err := allDroppedError(loaders, tt.counts)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%v: got %v, want none", tt.counts, err)
		case tt.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.want) || !collective.IsAllRanks(err)):
			t.Errorf("%v: got %v, want an AllRanks error starting %q", tt.counts, err, tt.want)
		}
	}
}
