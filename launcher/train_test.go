package launcher

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/datahelix/datahelix/internal/bridge"
	"github.com/datahelix/datahelix/internal/cli"
	"github.com/datahelix/datahelix/internal/cli/clitest"
	"github.com/datahelix/datahelix/internal/collectivetest"
	"github.com/datahelix/datahelix/internal/gen"
	"github.com/datahelix/datahelix/internal/gen/gentest"
	"github.com/datahelix/datahelix/internal/metrics"
)

// python is the interpreter whose torch the trainer tests use (Debian's
// python3-torch, which test.sh installs).
const pythonBin = "/usr/bin/python3"

// needTorch skips a test where the trainer's Python cannot import torch.
func needTorch(t *testing.T) {
	t.Helper()
	if err := exec.Command(pythonBin, "-c", "import torch, numpy").Run(); err != nil {
		t.Skipf("%s cannot import torch (apt-get install python3-torch; test.sh does): %v", pythonBin, err)
	}
}

// trainArgs runs testdata/trainer.py under datahelix train on data with
// quick decoding, tagged so that the test finds its processes.
func trainArgs(data, tag string, flags []string, trainer ...string) []string {
	args := append([]string{"train", "--data", data, "--batch", "2", "--frames", "2", "--size", "32", "--quiet", "--cache-dir", os.TempDir()}, flags...)
	args = append(args, "--", pythonBin, "testdata/trainer.py", "--tag", tag)
	return append(args, trainer...)
}

// trainerOut is what testdata/trainer.py wrote to --out: per step, its
// rank's sample keys and ids (keys repeat across epochs, ids do not),
// and the rendezvous its environment gave it.
type trainerOut struct {
	Keys   map[int][]string  `json:"keys"`
	IDs    map[int][]uint64  `json:"ids"`
	MD5s   map[string][3]any `json:"md5s"` // with --md5: id -> [shape, MD5 of the pixels, read by another rank]
	Master string            `json:"master_addr"`
	Iface  string            `json:"gloo_ifname"`
}

// readTrainers reads every rank's trainer's out.RANK.
func readTrainers(t *testing.T, out string, ranks int) []trainerOut {
	t.Helper()
	outs := make([]trainerOut, ranks)
	for r := range outs {
		raw, err := os.ReadFile(fmt.Sprintf("%s.%d", out, r))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, &outs[r]); err != nil {
			t.Fatal(err)
		}
	}
	return outs
}

// globalBatches is each step's global batch of keys, sorted.
func globalBatches(outs []trainerOut) map[int][]string {
	g := map[int][]string{}
	for _, o := range outs {
		for s, ks := range o.Keys {
			g[s] = append(g[s], ks...)
		}
	}
	for s := range g {
		slices.Sort(g[s])
	}
	return g
}

// leftovers fails the test when a process tagged tag still runs.
func leftovers(t *testing.T, tag string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		pids := trainerPIDs(tag)
		if len(pids) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("trainer processes still running: %v", pids)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func readSummary(t *testing.T, path string) metrics.Summary {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rs []metrics.Summary
	if err := json.Unmarshal(raw, &rs); err != nil || len(rs) != 1 {
		t.Fatalf("summary %s: %v (%d objects)", raw, err, len(rs))
	}
	return rs[0]
}

// TestTrainUnderMPIRun: two ranks each feed a real Python trainer; each
// step's keys are disjoint across ranks, the global batches are the ones
// run schedules (the same batches hash), and nothing is left behind.
func TestTrainUnderMPIRun(t *testing.T) {
	needTorch(t)
	data := gentest.Tiny(t)
	dir := t.TempDir()
	shm := shmEntries()
	log, err := mpirunMain(t, 2, trainArgs(data, "mpirun1", []string{"--steps", "8", "--json", filepath.Join(dir, "train.json")}, "--out", filepath.Join(dir, "keys"))...)
	if err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	outs := readTrainers(t, filepath.Join(dir, "keys"), 2)
	for s := range 8 {
		a, b := outs[0].IDs[s], outs[1].IDs[s]
		if len(a) != 2 || len(b) != 2 {
			t.Fatalf("step %d: rank 0 got %v, rank 1 %v; want 2 samples each", s, a, b)
		}
		for _, id := range a {
			if slices.Contains(b, id) {
				t.Errorf("step %d: sample %#x went to both ranks", s, id)
			}
		}
	}
	train := readSummary(t, filepath.Join(dir, "train.json"))
	if train.Steps != 8 || train.RingBytes == 0 {
		t.Errorf("train summary: %d steps, ring %d bytes; want 8 steps and the ring's size", train.Steps, train.RingBytes)
	}
	runLog, err := mpirunMain(t, 2, fastRun(data, "--steps", "8", "--loader", "helix", "--json", filepath.Join(dir, "run.json"))...)
	if err != nil {
		t.Fatalf("%v\n%s", err, runLog)
	}
	if run := readSummary(t, filepath.Join(dir, "run.json")); run.BatchesHash != train.BatchesHash {
		t.Errorf("train delivered batches hash %s, run %s: the same flags must train the same global batches", train.BatchesHash, run.BatchesHash)
	}
	leftovers(t, "mpirun1")
	shmLeftovers(t, shm)
}

// TestTrainResumesFromStateDict: a run stopped after 3 steps at 2 ranks,
// its state saved, and a run resumed from it at 4 ranks of half the
// batch (the same global batch) train the global batches of one
// uninterrupted run.
func TestTrainResumesFromStateDict(t *testing.T) {
	needTorch(t)
	data := gentest.Tiny(t)
	dir := t.TempDir()
	state := filepath.Join(dir, "state.json")
	steps := []string{"--steps", "7"}
	for _, run := range []struct {
		ranks   int
		flags   []string
		trainer []string
	}{
		{2, steps, []string{"--out", filepath.Join(dir, "whole")}},
		{2, steps, []string{"--out", filepath.Join(dir, "first"), "--save", state, "--save-at", "3"}},
		{4, append([]string{"--batch", "1"}, steps...), []string{"--out", filepath.Join(dir, "rest"), "--resume", state}},
	} {
		if log, err := mpirunMain(t, run.ranks, trainArgs(data, "resume1", run.flags, run.trainer...)...); err != nil {
			t.Fatalf("%v\n%s", err, log)
		}
	}
	whole := globalBatches(readTrainers(t, filepath.Join(dir, "whole"), 2))
	first := globalBatches(readTrainers(t, filepath.Join(dir, "first"), 2))
	rest := globalBatches(readTrainers(t, filepath.Join(dir, "rest"), 4))
	if len(first) != 3 || len(rest) != 4 {
		t.Fatalf("the split runs trained steps %v and %v, want 0-2 and 3-6", first, rest)
	}
	for s, b := range whole {
		got, ok := first[s]
		if !ok {
			got = rest[s]
		}
		if !slices.Equal(got, b) {
			t.Errorf("step %d: the split runs trained %v, the whole run %v", s, got, b)
		}
	}
}

// TestTrainerFailureEndsJob: a trainer that raises on rank 1 ends the
// job within 30 s, naming the rank and its status, and no trainer is
// left running.
func TestTrainerFailureEndsJob(t *testing.T) {
	needTorch(t)
	data := gentest.Tiny(t)
	start := time.Now()
	log, err := mpirunMain(t, 2, trainArgs(data, "fail1", []string{"--steps", "50"}, "--fail-at", "2", "--fail-rank", "1", "--step-ms", "50")...)
	if code := exitCode(err); code != cli.ExitTrainer {
		t.Fatalf("exit status %d (%v), want %d for a trainer's failure:\n%s", code, err, cli.ExitTrainer, log)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("the job ended %v after it started, want within 30 s", took)
	}
	// The values the line must carry: the rank and the trainer's status.
	if !regexp.MustCompile(`the trainer of rank 1 \(pid \d+\) exited with status 1`).MatchString(log) {
		t.Errorf("the log does not name rank 1's trainer and its status:\n%s", log)
	}
	leftovers(t, "fail1")
}

// TestTrainerThatNeverConnects ends the job after --connect-timeout.
func TestTrainerThatNeverConnects(t *testing.T) {
	needTorch(t)
	data := gentest.Tiny(t)
	log, err := mpirunMain(t, 2, trainArgs(data, "noconn1", []string{"--connect-timeout", "2s"}, "--no-connect")...)
	// The status of a trainer's failure, and the line names the timeout.
	if code := exitCode(err); code != cli.ExitTrainer || !strings.Contains(log, "within 2s (--connect-timeout)") {
		t.Fatalf("exit status %d (%v), want %d and the timeout named:\n%s", code, err, cli.ExitTrainer, log)
	}
	leftovers(t, "noconn1")
}

// TestTrainersStoppingEarly: with --steps 0 the trainers decide when to
// stop; the job then ends with status 0 and the steps they took.
func TestTrainersStoppingEarly(t *testing.T) {
	needTorch(t)
	data := gentest.Tiny(t)
	dir := t.TempDir()
	log, err := mpirunMain(t, 2, trainArgs(data, "early1", []string{"--json", filepath.Join(dir, "s.json")}, "--stop-after", "5")...)
	if err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	if s := readSummary(t, filepath.Join(dir, "s.json")); s.Steps != 5 {
		t.Errorf("summary of %d steps, want the 5 the trainers took", s.Steps)
	}
}

// TestKilledRankLeavesNoTrainer: SIGKILL of a datahelix rank ends the
// job, and its trainer dies with it.
func TestKilledRankLeavesNoTrainer(t *testing.T) {
	needTorch(t)
	data := gentest.Tiny(t)
	cmd, out := startMain(t, 2, trainArgs(data, "kill1", nil, "--step-ms", "100")...)
	// Once both trainers run, kill a datahelix rank (not the trainer).
	waitFor(t, "two trainers", out, func() bool { return trainersRunning("kill1", 2) })
	victim := descendants(cmd.Process.Pid, filepath.Base(os.Args[0]))[0]
	time.Sleep(time.Second) // serving batches
	syscall.Kill(victim, syscall.SIGKILL)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err == nil {
			t.Errorf("the job succeeded after a rank was killed:\n%s", out.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the job still runs 30 s after rank pid %d was killed:\n%s", victim, out.String())
	}
	leftovers(t, "kill1")
}

// TestServeFeedsTrainersLaunchedApart: datahelix serve (two in-process
// ranks) feeds trainers started on their own, found by DATAHELIX_JOB and
// RANK.
func TestServeFeedsTrainersLaunchedApart(t *testing.T) {
	needTorch(t)
	data := gentest.Tiny(t)
	dir := t.TempDir()
	job := fmt.Sprintf("t%d", os.Getpid())
	done := make(chan int, 1)
	var out, errb bytes.Buffer
	go func() {
		done <- Main(context.Background(), []string{"serve", "--ranks", "2", "--job", job, "--data", data, "--batch", "2", "--frames", "2",
			"--size", "32", "--steps", "4", "--quiet", "--cache-dir", os.TempDir(), "--json", filepath.Join(dir, "s.json")}, &out, &errb)
	}()
	var trainers []*exec.Cmd
	for r := range 2 {
		cmd := exec.Command(pythonBin, "testdata/trainer.py", "--out", filepath.Join(dir, "keys"))
		cmd.Env = append(os.Environ(), "DATAHELIX_JOB="+job, fmt.Sprintf("RANK=%d", r), "PYTHONPATH=../python")
		cmd.Stdout, cmd.Stderr = &errb, &errb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		trainers = append(trainers, cmd)
	}
	for _, c := range trainers {
		if err := c.Wait(); err != nil {
			t.Errorf("trainer: %v", err)
		}
	}
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("serve exited %d: %s", code, errb.String())
		}
	case <-time.After(time.Minute):
		t.Fatalf("serve still runs a minute after its trainers ended: %s", errb.String())
	}
	if g := globalBatches(readTrainers(t, filepath.Join(dir, "keys"), 2)); len(g) != 4 {
		t.Errorf("the trainers got steps %v, want 4", g)
	}
}

// must returns v, ignoring err: for commands whose failure shows as no
// output (pgrep that matches nothing).
func must(v []byte, _ error) []byte { return v }

// startMain starts the test binary as datahelix under mpirun with np
// ranks and returns the job and its output. A test that fails ends the
// job as Slurm would, with SIGTERM (SIGKILL of mpirun would leave its
// ranks running), at the latest 2 minutes on.
func startMain(t *testing.T, np int, args ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	cmd := collectivetest.MPIRun(ctx, np, os.Args[0], args...)
	cmd.Env = append(os.Environ(), asMainEnv+"=1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 5 * time.Second
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, &out
}

// waitFor polls ok every 200 ms for up to a minute, failing the test
// with what and the job's output when it never holds.
func waitFor(t *testing.T, what string, out *bytes.Buffer, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !ok(); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s never happened:\n%s", what, out.String())
		}
	}
}

// trainerPIDs lists the trainers tagged tag that run.
func trainerPIDs(tag string) []string {
	return strings.Fields(string(must(exec.Command("pgrep", "-f", "--", "^"+pythonBin+" testdata/trainer.py --tag "+tag).Output())))
}

// trainersRunning reports whether n trainers tagged tag run.
func trainersRunning(tag string, n int) bool { return len(trainerPIDs(tag)) >= n }

// TestExampleTrainsOnTheDefaultDataset: examples/train.py, a real DDP
// model on gloo, trains at 2 ranks on the default dataset under
// datahelix train: its loss goes down, each step's keys are disjoint
// across ranks, and the global batches are the ones run schedules.
func TestExampleTrainsOnTheDefaultDataset(t *testing.T) {
	needTorch(t)
	if testing.Short() {
		t.Skip("generates the default dataset once (about 30 s) and trains 40 steps")
	}
	cache := filepath.Join(os.TempDir(), "datahelix-testdata")
	dir := t.TempDir()
	shape := []string{"--steps", "40", "--frames", "4", "--size", "64", "--quiet", "--cache-dir", cache}
	args := append(append([]string{"train"}, shape...), "--json", filepath.Join(dir, "server.json"),
		"--", pythonBin, "../examples/train.py", "--loader", "datahelix", "--json", filepath.Join(dir, "train.json"), "--log-every", "0")
	if log, err := mpirunMain(t, 2, args...); err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	var got struct {
		LossFirst5 float64 `json:"loss_first_avg5"`
		LossLast5  float64 `json:"loss_last_avg5"`
		PerRank    []struct {
			Steps []int      `json:"steps"`
			Keys  [][]string `json:"keys"`
			IDs   [][]uint64 `json:"ids"` // keys repeat across epochs (128 samples, 320 a run)
		} `json:"per_rank"`
	}
	raw, err := os.ReadFile(filepath.Join(dir, "train.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	if !(got.LossLast5 < got.LossFirst5/2) {
		t.Errorf("loss %.3f over the first 5 steps, %.3f over the last 5: want it at least halved", got.LossFirst5, got.LossLast5)
	}
	if len(got.PerRank) != 2 || len(got.PerRank[0].IDs) != 40 || len(got.PerRank[1].IDs) != 40 {
		t.Fatalf("per-rank samples: %+v, want 40 steps on 2 ranks", got.PerRank)
	}
	for s := range 40 {
		for i, id := range got.PerRank[0].IDs[s] {
			if slices.Contains(got.PerRank[1].IDs[s], id) {
				t.Errorf("step %d: sample %s (id %#x) went to both ranks", s, got.PerRank[0].Keys[s][i], id)
			}
		}
	}
	// The dataset train generated: run without --data trains its default
	// job (two layouts, three times).
	data := gen.DefaultDir(cache, 1)
	runArgs := append(append([]string{"run", "--data", data, "--loader", "helix", "--gpu-step-ms", "5", "--gpu-ms-per-frame", "0"}, shape...), "--json", filepath.Join(dir, "run.json"))
	if log, err := mpirunMain(t, 2, runArgs...); err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	if a, b := readSummary(t, filepath.Join(dir, "server.json")), readSummary(t, filepath.Join(dir, "run.json")); a.BatchesHash != b.BatchesHash {
		t.Errorf("train's batches hash %s, run's %s", a.BatchesHash, b.BatchesHash)
	}
}

// TestKilledTrainerEndsJob: SIGKILL of one rank's trainer ends the job
// within 30 s, naming it, with nothing left behind.
func TestKilledTrainerEndsJob(t *testing.T) {
	needTorch(t)
	data := gentest.Tiny(t)
	shm := shmEntries()
	cmd, out := startMain(t, 2, trainArgs(data, "kill2", nil, "--step-ms", "100")...)
	waitFor(t, "two trainers", out, func() bool { return trainersRunning("kill2", 2) })
	pids := trainerPIDs("kill2")
	time.Sleep(time.Second)
	var victim int
	fmt.Sscan(pids[1], &victim)
	syscall.Kill(victim, syscall.SIGKILL)
	killed := time.Now()
	if code := exitCode(cmd.Wait()); code != cli.ExitTrainer {
		t.Errorf("exit status %d after a trainer was killed, want %d:\n%s", code, cli.ExitTrainer, out.String())
	}
	if took := time.Since(killed); took > 30*time.Second {
		t.Errorf("the job ended %v after the trainer was killed, want within 30 s", took)
	}
	// The values: the victim's pid and the signal.
	if want := fmt.Sprintf("(pid %d) was killed by SIGKILL", victim); !strings.Contains(out.String(), want) {
		t.Errorf("the log does not say %q:\n%s", want, out.String())
	}
	leftovers(t, "kill2")
	shmLeftovers(t, shm)
}

// TestServeRefusesAnotherClient: a client of another protocol, or of
// another job, gets a REFUSE naming both sides, and the job ends saying
// why instead of serving it.
func TestServeRefusesAnotherClient(t *testing.T) {
	data := gentest.Tiny(t)
	tr := clitest.NewTranscript().Replace(`datahelix \([^)]*\) speaks`, "datahelix (VERSION) speaks")
	for _, tt := range []struct {
		name  string
		hello bridge.Hello
	}{
		{"protocol", bridge.Hello{Protocol: 99, Client: "datahelix-python 9.0", Job: "J"}},
		{"job", bridge.Hello{Protocol: bridge.Protocol, Client: "c", Job: "other"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			job := fmt.Sprintf("J%d%s", os.Getpid(), tt.name)
			tt.hello.Job = strings.Replace(tt.hello.Job, "J", job, 1)
			done := make(chan int, 1)
			var out, errb bytes.Buffer
			go func() {
				done <- Main(context.Background(), []string{"serve", "--ranks", "1", "--job", job, "--data", data, "--batch", "2",
					"--frames", "2", "--size", "32", "--quiet", "--cache-dir", os.TempDir()}, &out, &errb)
			}()
			var c *bridge.Conn
			var err error
			for range 100 {
				if c, err = bridge.Dial(bridge.SocketName(job, 0)); err == nil {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			h, _ := json.Marshal(tt.hello)
			if err := c.Send(bridge.Encode(bridge.TypeHello, h)); err != nil {
				t.Fatal(err)
			}
			m, _, err := c.Recv(time.Now().Add(time.Minute))
			if err != nil || m.Type != bridge.TypeRefuse {
				t.Fatalf("got %v %v, want a REFUSE", m.Type, err)
			}
			// The REFUSE names both sides (testdata/serve_refuses.golden).
			tr.Add([]string{"serve", "# a client of " + tt.name}, strings.ReplaceAll(string(m.Payload), job, "JOB"))
			if code := <-done; code != cli.ExitTrainer {
				t.Errorf("serve exited %d after refusing its client, want %d: %s", code, cli.ExitTrainer, errb.String())
			}
		})
	}
	clitest.Golden(t, "serve_refuses.golden", tr.String())
}

// shmEntries lists /dev/shm.
func shmEntries() map[string]bool {
	entries, _ := os.ReadDir("/dev/shm")
	names := map[string]bool{}
	for _, e := range entries {
		names[e.Name()] = true
	}
	return names
}

// shmLeftovers fails the test if /dev/shm holds an entry that was not in
// before and that no live process maps: a shared-memory segment the job
// left behind. One that a process maps belongs to a job still running
// beside this test (another test binary's MPI job), not to this one.
func shmLeftovers(t *testing.T, before map[string]bool) {
	t.Helper()
	var fresh []string
	for name := range shmEntries() {
		if !before[name] {
			fresh = append(fresh, "/dev/shm/"+name)
		}
	}
	if len(fresh) == 0 {
		return
	}
	maps, _ := filepath.Glob("/proc/[0-9]*/maps")
	for _, m := range maps {
		data, err := os.ReadFile(m)
		if err != nil {
			continue
		}
		fresh = slices.DeleteFunc(fresh, func(p string) bool { return bytes.Contains(data, []byte(p)) })
	}
	if len(fresh) > 0 {
		t.Errorf("the job left shared memory behind: %v", fresh)
	}
}
