package realrun

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/datahelix/datahelix/internal/bench/eval"
	"github.com/datahelix/datahelix/internal/bench/report"
	"github.com/datahelix/datahelix/internal/metrics"
)

// trainerJSON is examples/train.py's --json as it writes it (trimmed of
// the per-rank keys and the loss curve, which the section does not read).
const trainerJSON = `{"loader": "datahelix", "device": "cpu", "ranks": 2, "steps": 40, "first_step": 0, "batch": 4, "warmup": 8,
 "width": 512, "depth": 2, "workers": null, "wall_s": 5.2, "cpu_s": 3.9, "samples": 320, "throughput_sps": 61.5,
 "steady_throughput_sps": 70.1, "steady": {"steps": 32, "wall_s": 3.65, "throughput_sps": 70.1, "wait_s": 0.07,
 "wait_frac": 0.0229, "job_stall_frac": 0.031, "step_ms_p50": 101.5}, "wait_s": 0.27, "wait_frac": 0.0514,
 "step_ms_p50": 110.25, "gpu_step_ms_p50": null, "h2d_gbps": null, "loss_first": 1.36, "saved": false, "per_rank": []}`

func TestParseTrainerSummary(t *testing.T) {
	s, err := ParseTrainerSummary([]byte(trainerJSON))
	if err != nil {
		t.Fatal(err)
	}
	st := s.Steady
	if s.Loader != "datahelix" || s.Ranks != 2 || s.Steps != 40 || s.Warmup != 8 || s.StepMSP50 != 110.25 || s.CPUS == nil || *s.CPUS != 3.9 ||
		st == nil || st.Steps != 32 || st.ThroughputSPS != 70.1 || st.WaitFrac != 0.0229 || st.JobStallFrac == nil || *st.JobStallFrac != 0.031 {
		t.Fatalf("parsed %+v, steady %+v", s, st)
	}
	if got := s.stepMS(); got != 101.5 {
		t.Errorf("step %v ms, want the steady median 101.5", got)
	}
	// An older train.py: no steady step, CPU time or job stall.
	old := strings.NewReplacer(`, "job_stall_frac": 0.031, "step_ms_p50": 101.5`, "", `"cpu_s": 3.9, `, "").Replace(trainerJSON)
	s, err = ParseTrainerSummary([]byte(old))
	if err != nil {
		t.Fatal(err)
	}
	if s.CPUS != nil || s.Steady.JobStallFrac != nil || s.stepMS() != 110.25 {
		t.Errorf("older summary: cpu %v, stall %v, step %v ms; want none, none and the whole run's 110.25", s.CPUS, s.Steady.JobStallFrac, s.stepMS())
	}
	// Too short for steady figures: parsed, with none.
	if s, err := ParseTrainerSummary([]byte(`{"loader": "torch", "ranks": 2, "steps": 8, "warmup": 8, "steady": null}`)); err != nil || s.Steady != nil {
		t.Errorf("no steady figures: %+v, %v", s, err)
	}
	for _, bad := range []string{
		`{"loader": "torch", "ranks": 2`,
		`{"loader": "pytorch", "ranks": 2}`,
		`{"loader": "torch", "ranks": 0}`,
		`{"loader": "torch", "ranks": 2, "wait_frac": 1.5}`,
		`{"loader": "torch", "ranks": 2, "step_ms_p50": -1}`,
		`{"loader": "torch", "ranks": 2, "cpu_s": -1}`,
		`{"loader": "torch", "ranks": 2, "steady": {"steps": 0, "wall_s": 1}}`,
		`{"loader": "torch", "ranks": 2, "steady": {"steps": 3, "wall_s": 1, "job_stall_frac": 1.2}}`,
		`{"loader": "torch", "ranks": 2, "wall_s": NaN}`,
	} {
		if _, err := ParseTrainerSummary([]byte(bad)); !errors.Is(err, ErrReal) {
			t.Errorf("%s: error %v, want ErrReal", bad, err)
		}
	}
}

func TestErrorOf(t *testing.T) {
	f := func(x float64) *float64 { return &x }
	for _, tt := range []struct {
		name              string
		real              TrainerSteady
		sim               eval.Result
		tput, wait, stall float64 // NaN: none
	}{
		{"sim faster, waits less", TrainerSteady{ThroughputSPS: 50, WaitFrac: 0.2, JobStallFrac: f(0.3)},
			eval.Result{SteadyThroughputSPS: 60, SteadyGPUWaitFrac: 0.05, SteadyJobStallFrac: 0.1}, 0.2, -0.15, -0.2},
		{"sim slower, waits more", TrainerSteady{ThroughputSPS: 80, WaitFrac: 0.01, JobStallFrac: f(0)},
			eval.Result{SteadyThroughputSPS: 60, SteadyGPUWaitFrac: 0.11, SteadyJobStallFrac: 0.25}, -0.25, 0.1, 0.25},
		{"no real throughput, no job stall", TrainerSteady{WaitFrac: 0.5},
			eval.Result{SteadyThroughputSPS: 60, SteadyGPUWaitFrac: 0.5}, math.NaN(), 0, math.NaN()},
	} {
		e := errorOf(&tt.real, &tt.sim)
		for _, c := range []struct {
			what      string
			got, want float64
		}{{"throughput", e.throughput, tt.tput}, {"wait", e.wait, tt.wait}, {"stall", e.stall, tt.stall}} {
			if math.IsNaN(c.want) != math.IsNaN(c.got) || math.Abs(c.got-c.want) > 1e-12 {
				t.Errorf("%s: %s error %v, want %v", tt.name, c.what, c.got, c.want)
			}
		}
	}
}

func TestTrainerCores(t *testing.T) {
	cpu, step := 6.0, 100.0
	s := &TrainerSummary{Ranks: 4, Steps: 20, WallS: 4, CPUS: &cpu, Steady: &TrainerSteady{StepMSP50: &step}}
	if got := trainerCores(s); got != 1.5 {
		t.Errorf("measured: %v cores, want 6 s / 4 s", got)
	}
	// Unmeasured: each rank's thread busy for its steps, 20 x 100 ms of 4 s.
	s.CPUS = nil
	if got := trainerCores(s); math.Abs(got-4*0.5) > 1e-12 {
		t.Errorf("estimated: %v cores, want 4 ranks x 0.5", got)
	}
	step = 1000 // steps longer than the wall: at most a core a rank
	if got := trainerCores(s); got != 4 {
		t.Errorf("estimated, capped: %v cores, want 4", got)
	}
	if got := trainerCores(&TrainerSummary{Ranks: 2}); got != 0 {
		t.Errorf("no wall time: %v cores, want 0", got)
	}
}

func TestBridgeTable(t *testing.T) {
	f := func(x float64) *float64 { return &x }
	real := func(loader string, ranks int, tput, wait float64, stall *float64) *TrainerSummary {
		return &TrainerSummary{Loader: loader, Ranks: ranks, Steps: 40, StepMSP50: 120,
			Steady: &TrainerSteady{Steps: 32, ThroughputSPS: tput, WaitFrac: wait, JobStallFrac: stall, StepMSP50: f(100)}}
	}
	sim := func(tput, wait, stall float64) *eval.Result {
		return &eval.Result{SteadySteps: 32, SteadyThroughputSPS: tput, SteadyGPUWaitFrac: wait, SteadyJobStallFrac: stall, SteadyStepMissRate: 0.1}
	}
	runs := []*bridgeRun{
		{loader: "datahelix", ranks: 2, trainer: real("datahelix", 2, 80, 0.02, f(0.03)), sim: sim(88, 0, 0.01), others: 0.7, wall: 5 * time.Second,
			server: &metrics.Summary{SteadySteps: 32, SteadyGPUWaitFrac: 0.001, SteadyStepMissRate: 0.05}},
		{loader: "torch", ranks: 2, trainer: real("torch", 2, 40, 0.25, nil), sim: sim(30, 0.05, 0.1), wall: 20 * time.Second},
		{loader: "datahelix", ranks: 4, err: errors.New("mpirun: exit status 1: datahelix: boom"), wall: 3 * time.Second},
		{loader: "torch", ranks: 4, trainer: real("torch", 4, 50, 0.1, f(0.5)), sim: sim(60, 0.1, 0.2), wall: 30 * time.Second},
	}
	s := bridgeTable(runs)
	if s.Status != "" || len(s.Rows) != 4 {
		t.Fatalf("status %q, %d rows; want measured (set by RunSections) and 4", s.Status, len(s.Rows))
	}
	col := func(row []any, name string) any { return row[slices.Index(s.Columns, name)] }
	for i, row := range s.Rows {
		if len(row) != len(s.Columns) {
			t.Fatalf("row %d: %d cells for %d columns", i, len(row), len(s.Columns))
		}
	}
	ok := s.Rows[0]
	for name, want := range map[string]any{"ranks": 2, "loader": "datahelix", "sim_loader": "helix", "status": "ok", "steady_step_ms_p50": 100.0,
		"trainer_cores": 0.7, "real_steady_throughput_sps": 80.0, "sim_steady_throughput_sps": 88.0, "real_steady_wait_frac": 0.02,
		"real_steady_job_stall_frac": 0.03, "server_steady_wait_frac": 0.001, "server_steady_step_miss_rate": 0.05,
		"sim_steady_step_miss_rate": 0.1, "run_s": 5.0, "reason": ""} {
		if got := col(ok, name); got != want {
			t.Errorf("datahelix at 2 ranks: %s = %v (%T), want %v", name, got, got, want)
		}
	}
	for name, want := range map[string]float64{"throughput_rel_err": 0.1, "wait_abs_err": -0.02, "stall_abs_err": -0.02} {
		if got := col(ok, name).(float64); math.Abs(got-want) > 1e-12 {
			t.Errorf("datahelix at 2 ranks: %s = %v, want %v", name, got, want)
		}
	}
	// The stock trainer: no server figures; a train.py without the job
	// stall has no stall error.
	for _, name := range []string{"real_steady_job_stall_frac", "stall_abs_err", "server_steady_wait_frac", "server_steady_step_miss_rate"} {
		if got := col(s.Rows[1], name); got != "-" {
			t.Errorf("torch at 2 ranks: %s = %v, want -", name, got)
		}
	}
	failed := s.Rows[2]
	if col(failed, "status") != "failed" || col(failed, "reason") != "mpirun: exit status 1: datahelix: boom" || col(failed, "run_s") != 3.0 ||
		col(failed, "real_steady_throughput_sps") != "-" || col(failed, "throughput_rel_err") != "-" || col(failed, "sim_loader") != "helix" {
		t.Errorf("failed run's row %v", failed)
	}
	// Largest errors by magnitude, signed, with their ranks; the failure
	// counted.
	for _, want := range []string{"datahelix: throughput +10 % (2 ranks), input wait -0.020 (2 ranks), job stall -0.020 (2 ranks)",
		"torch: throughput -25 % (2 ranks), input wait -0.200 (2 ranks), job stall -0.300 (4 ranks)", "1 of 4 runs failed"} {
		if !strings.Contains(s.Headline, want) {
			t.Errorf("headline %q, want it to say %q", s.Headline, want)
		}
	}
	// The JSON report holds the rows: no NaN may reach them.
	if _, err := json.Marshal(s); err != nil {
		t.Errorf("the section does not marshal: %v", err)
	}
	// Every run failed: the section failed, its rows kept.
	all := bridgeTable([]*bridgeRun{{loader: "datahelix", ranks: 2, err: errors.New("x")}, {loader: "torch", ranks: 2, err: errors.New("y")}})
	if all.Status != report.SectionFailed || len(all.Rows) != 2 || !strings.Contains(all.Headline, "datahelix: no run; torch: no run") {
		t.Errorf("all failed: %s, %d rows, %q", all.Status, len(all.Rows), all.Headline)
	}
}

func TestBridgeConfigCheck(t *testing.T) {
	ok := BridgeConfig{Ranks: []int{2, 4}, Steps: 40}
	if err := ok.Check(8); err != nil {
		t.Errorf("default setting: %v", err)
	}
	for _, tt := range []struct {
		c    BridgeConfig
		want string
	}{
		{BridgeConfig{Ranks: []int{0, 2}, Steps: 40}, "--bridge-ranks 0,2: want rank counts of 1..8"},
		{BridgeConfig{Ranks: []int{2, 9}, Steps: 40}, "--bridge-ranks 2,9"},
		{BridgeConfig{Steps: 40}, "--bridge-ranks: no rank count"},
		{BridgeConfig{Ranks: []int{2}, Steps: 8}, "--bridge-steps 8: want 9..100000 (more than the warm-up's 8 steps"},
		{BridgeConfig{Ranks: []int{2}, Steps: 0}, "--bridge-steps 0"}, // a flag's 0 is refused, not the default
		{BridgeConfig{Ranks: []int{2}, Steps: 12, Workers: 6}, "--bridge-steps 12: want 13.."},
		{BridgeConfig{Ranks: []int{2}, Steps: 40, Data: filepath.Join(t.TempDir(), "nope")}, "--bridge-data: "},
	} {
		if err := tt.c.Check(8); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: error %v, want %q", tt.c, err, tt.want)
		}
	}
}

func TestParseRankList(t *testing.T) {
	if got, err := ParseRankList("2, 4"); err != nil || !slices.Equal(got, []int{2, 4}) {
		t.Errorf("2, 4: %v, %v", got, err)
	}
	for _, bad := range []string{"", "2,,4", "two", "2;4"} {
		if _, err := ParseRankList(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// TestBridgeArgs pins what each run is given: the same steps, batch,
// warm-up, seed and threads to both trainers, the decode flags and data
// to datahelix train or to the stock loader, and a rendezvous on a free
// port for torch.
func TestBridgeArgs(t *testing.T) {
	c := BridgeConfig{Ranks: []int{2}, Steps: 30, Batch: 3, Workers: 2, Frames: 4, Size: 64, Python: "/py", Examples: "/ex"}.withDefaults()
	f := bridgeFiles{trainer: "/t/x.json", server: "/t/x.server.json"}
	dh := strings.Join(c.datahelixArgs("/data", "/cache", 7, f), " ")
	want := "train --quiet --grace 5s --data /data --cache-dir /cache --steps 30 --batch 3 --workers 2 --frames 4 --size 64 --seed 7 --json /t/x.server.json " +
		"-- /py /ex/train.py --loader datahelix --steps 30 --batch 3 --warmup 8 --threads 1 --log-every 0 --seed 7 --json /t/x.json"
	if dh != want {
		t.Errorf("datahelix train args\n%s\nwant\n%s", dh, want)
	}
	tr := strings.Join(c.torchArgs(4, "/data", 7, f, "id1"), " ")
	want = "/ex/torchrun.py --nnodes 1 --nproc_per_node 4 --rdzv_backend c10d --rdzv_endpoint localhost:0 --rdzv_id id1 " +
		"/ex/train.py --loader torch --steps 30 --batch 3 --warmup 8 --threads 1 --log-every 0 --seed 7 --json /t/x.json " +
		"--data /data --workers 2 --frames 4 --size 64"
	if tr != want {
		t.Errorf("torch args\n%s\nwant\n%s", tr, want)
	}
}

// TestRunGroupTimeout checks that a run that outlives its timeout is
// stopped with its whole process group, a child that would have kept
// running included, and says it timed out.
func TestRunGroupTimeout(t *testing.T) {
	saved := stopGrace
	stopGrace = 500 * time.Millisecond
	t.Cleanup(func() { stopGrace = saved })
	t0 := time.Now()
	out, err := runGroup(context.Background(), 300*time.Millisecond, func(ctx context.Context) *exec.Cmd {
		// The child ignores SIGTERM, as a stuck trainer might.
		return exec.CommandContext(ctx, "sh", "-c", `sh -c 'trap "" TERM; sleep 60' & echo $!; wait`)
	})
	if d := time.Since(t0); d > 5*time.Second {
		t.Errorf("took %s to stop", d)
	}
	if !errors.Is(err, ErrReal) || !strings.Contains(err.Error(), "timed out after 300ms") {
		t.Errorf("error %v, want a timeout", err)
	}
	pid, perr := strconv.Atoi(strings.TrimSpace(string(out)))
	if perr != nil {
		t.Fatalf("output %q: %v", out, perr)
	}
	deadline := time.Now().Add(5 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("child %d outlived the run", pid)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Stopped from outside: the cause, not a timeout.
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errors.New("interrupted"))
	if _, err := runGroup(ctx, time.Minute, func(ctx context.Context) *exec.Cmd { return exec.CommandContext(ctx, "sleep", "60") }); err == nil ||
		!strings.Contains(err.Error(), "interrupted") {
		t.Errorf("interrupted run: %v", err)
	}
}

// fakePython stands for python: it imports anything, and as
// examples/torchrun.py it writes train.py's summary for the ranks it was
// asked to start.
const fakePython = `#!/bin/sh
[ "$1" = -c ] && exit 0
while [ $# -gt 0 ]; do
	case "$1" in --json) out=$2 ;; --nproc_per_node) n=$2 ;; esac
	shift
done
cat >"$out" <<EOF
{"loader": "torch", "ranks": $n, "steps": 10, "batch": 2, "warmup": 8, "wall_s": 2, "cpu_s": 1, "samples": 40,
 "throughput_sps": 20, "wait_frac": 0.3, "step_ms_p50": 50,
 "steady": {"steps": 2, "wall_s": 0.25, "throughput_sps": 16, "wait_frac": 0.2, "job_stall_frac": 0.4, "step_ms_p50": 45}}
EOF
`

// TestBridgeSectionRuns runs the section with stand-ins: a python whose
// torchrun writes a summary (simulated on a text shard) and a datahelix
// that fails, and one with a python that does not exist. Failed runs are
// rows saying why, the others still run.
func TestBridgeSectionRuns(t *testing.T) {
	dir := t.TempDir()
	py, bin := filepath.Join(dir, "python"), filepath.Join(dir, "datahelix")
	if err := os.WriteFile(py, []byte(fakePython), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, []byte("#!/bin/sh\necho 'datahelix: train: boom' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	data, err := filepath.Abs("../../../decode/testdata/shards/gen-text.tar") // 4 texts
	if err != nil {
		t.Fatal(err)
	}
	examples, err := filepath.Abs("../../../examples")
	if err != nil {
		t.Fatal(err)
	}
	bridge := BridgeConfig{Ranks: []int{2}, Steps: 10, Batch: 2, Workers: 1, Frames: 2, Size: 32, Data: data, Python: py, Examples: examples, Timeout: time.Minute}
	SetRealEnv(RealEnv{Binary: bin, CacheDir: t.TempDir(), Bridge: bridge})
	t.Cleanup(func() { SetRealEnv(RealEnv{}) })
	env := &report.SectionEnv{Seed: 1}
	s, err := BridgeSection(context.Background(), env)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Rows) != 2 {
		t.Fatalf("%d rows: %v", len(s.Rows), s.Rows)
	}
	col := func(row []any, name string) any { return row[slices.Index(s.Columns, name)] }
	dh, torch := s.Rows[0], s.Rows[1]
	if col(dh, "loader") != "datahelix" || col(dh, "status") != "failed" || !strings.Contains(col(dh, "reason").(string), "exit status") {
		t.Errorf("datahelix row %v, want failed with mpirun's exit status", dh)
	}
	if col(torch, "loader") != "torch" || col(torch, "status") != "ok" || col(torch, "real_steady_throughput_sps") != 16.0 ||
		col(torch, "steady_step_ms_p50") != 45.0 || col(torch, "trainer_cores") != 0.5 {
		t.Fatalf("torch row %v, want the summary's figures", torch)
	}
	// The simulation: 2 ranks x 2 texts a step, each step at least the
	// 45 ms GPU step.
	simTput := col(torch, "sim_steady_throughput_sps").(float64)
	if !(simTput > 0 && simTput <= 4/0.045*1.0001) {
		t.Errorf("simulated steady throughput %v, want (0, %v]", simTput, 4/0.045)
	}
	if got := col(torch, "throughput_rel_err").(float64); math.Abs(got-(simTput/16-1)) > 1e-12 {
		t.Errorf("throughput error %v, want %v", got, simTput/16-1)
	}
	if !strings.Contains(s.Headline, "1 of 2 runs failed") || s.Status == report.SectionFailed {
		t.Errorf("status %q, headline %q", s.Status, s.Headline)
	}

	// No python: every run fails at once, saying so.
	bridge.Python = filepath.Join(dir, "no-python")
	SetRealEnv(RealEnv{Binary: bin, CacheDir: t.TempDir(), Bridge: bridge})
	s, err = BridgeSection(context.Background(), env)
	if err != nil {
		t.Fatal(err)
	}
	if s.Status != report.SectionFailed || len(s.Rows) != 2 {
		t.Fatalf("no python: status %q, %d rows", s.Status, len(s.Rows))
	}
	for _, row := range s.Rows {
		if r := col(row, "reason").(string); !strings.Contains(r, "no-python cannot import torch") {
			t.Errorf("no python: reason %q", r)
		}
	}

	// Without the examples the section is skipped, saying why.
	bridge.Examples = dir
	SetRealEnv(RealEnv{Binary: bin, CacheDir: t.TempDir(), Bridge: bridge})
	if s, err := BridgeSection(context.Background(), env); err != nil || s.Status != report.SectionSkipped || !strings.Contains(s.Note, "examples/train.py") {
		t.Errorf("no examples: %+v, %v", s, err)
	}
}
