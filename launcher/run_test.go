package launcher

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/datahelix/datahelix/decode"
	"github.com/datahelix/datahelix/internal/cli"
	"github.com/datahelix/datahelix/internal/cli/clitest"
	"github.com/datahelix/datahelix/internal/gen/gentest"
	"github.com/datahelix/datahelix/internal/metrics"
	"github.com/datahelix/datahelix/internal/reader"
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
	var rs []metrics.Summary
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
			Args    []string `json:"args"`
			Data    string   `json:"data"`
			Seed    uint64   `json:"seed"`
			Frames  int      `json:"frames"`
			MPI     string   `json:"mpi"`
			Machine struct {
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
			j.MPI == "" || j.MPI == "in-process" || j.Machine.Host == "" || j.Machine.Commit == "" {
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
	// Rank 0 prints the table, both loaders side by side, and the line
	// comparing them.
	if f := strings.Fields(rowOf(log, "helix")); len(f) < 3 || f[1] != "vs" || f[2] != "local:" || strings.Join(strings.Fields(rowOf(log, "loader")), " ") != "loader local helix" {
		t.Errorf("no table of local and helix with a comparison line:\n%s", log)
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
		name   string
		args   []string
		target error
	}{
		{"missing dataset", fastRun("/nonexistent/shards", "--ranks", "4"), decode.ErrNoShards},
		{"truncated shard", fastRun(trunc, "--ranks", "4"), decode.ErrCorruptShard},
		{"epoch shorter than a global batch", fastRun(data, "--ranks", "64"), reader.ErrShortEpoch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := commandErr(t, tt.args...)
			if !errors.Is(err, tt.target) || cli.ExitStatus(err) != cli.ExitBadInput {
				t.Errorf("%v (exit %d), want %v and exit %d", err, cli.ExitStatus(err), tt.target, cli.ExitBadInput)
			}
		})
	}
	// Under mpirun, every rank fails and the job ends with the status of
	// bad input, naming the shard.
	log, err := mpirunMain(t, 4, fastRun(trunc)...)
	if code := exitCode(err); code != cli.ExitBadInput || !strings.Contains(log, filepath.Base(shards[2])) { // the truncated shard's name
		t.Errorf("mpirun with a truncated shard: exit %d (%v), want %d:\n%s", code, err, cli.ExitBadInput, log)
	}
}

// TestRunFlagBounds checks that values the runtime cannot use are usage
// errors (one line naming the flag, exit 2) before MPI starts, rather than
// an out-of-memory crash, an overflowed time or an error from spmd after
// MPI started.
func TestRunFlagBounds(t *testing.T) {
	tr := clitest.NewTranscript()
	tests := []struct {
		args []string
	}{
		{[]string{"run", "--gpu-step-ms", "NaN"}},
		{[]string{"run", "--gpu-step-ms", "Inf"}},
		{[]string{"run", "--gpu-step-ms", "1e300"}},
		{[]string{"run", "--gpu-ms-per-frame", "NaN"}},
		{[]string{"run", "--gpu-ms-per-sample", "-1"}},
		{[]string{"run", "--gpu-us-per-token", "1e30"}},
		{[]string{"run", "--gpu-ms-per-frame", "3000000", "--batch", "4096"}},
		{[]string{"run", "--batch", "100000"}},
		{[]string{"run", "--decoded-budget", "17592186044417"}},
		{[]string{"run", "--checkpoint-keep", "-1"}},
		{[]string{"run", "--stall-timeout", "-1s"}},
		{[]string{"run", "--stall-timeout", "3ns"}},
		{[]string{"run", "--compressed-budget", "-1"}},
		{[]string{"run", "--frames", "1024", "--size", "4096"}},
		{[]string{"run", "--size", "5000"}},
		{[]string{"decode", "--size", "100000", "x.mp4"}},
		{[]string{"decode", "--frames", "100000", "x.mp4"}},
		{[]string{"decode", "--frames", "1024", "--size", "1024", "x.mp4"}},
		{[]string{"costmodel", "--data", "x", "--size", "100000"}},
	}
	for _, tt := range tests {
		tr.Add(tt.args, usageLine(t, tt.args...))
	}
	clitest.Golden(t, "run_flag_bounds.golden", tr.String())
}

// TestRunOutputsCheckedFirst checks that --json, --trace and
// --checkpoint-dir paths that cannot be written end the run before it
// trains (no results table), in-process and under mpirun.
func TestRunOutputsCheckedFirst(t *testing.T) {
	data := gentest.Tiny(t)
	tests := []struct {
		flags      []string
		flag, path string // the cli.OutputError's
	}{
		{[]string{"--json", "/nonexistent-dir/x.json"}, "--json", "/nonexistent-dir/x.json"},
		{[]string{"--trace", "/proc/x.jsonl"}, "--trace", "/proc/x.jsonl"},
		{[]string{"--checkpoint-dir", "/proc/ck", "--checkpoint-every", "2"}, "--checkpoint-dir", "/proc/ck"},
	}
	for _, tt := range tests {
		args := fastRun(data, append([]string{"--steps", "40", "--ranks", "4"}, tt.flags...)...)
		var oe cli.OutputError
		if err := commandErr(t, args...); !errors.As(err, &oe) || oe.Flag != tt.flag || oe.Path != tt.path || cli.ExitStatus(err) != cli.ExitFailure {
			t.Errorf("%q: %v (exit %d); want a cli.OutputError of %s %s, exit %d", tt.flags, err, cli.ExitStatus(err), tt.flag, tt.path, cli.ExitFailure)
		}
		if code, stdout, stderr := runMain(args...); code != cli.ExitFailure || strings.Count(stderr, "\n") != 1 || hasRunTable(stdout) {
			t.Errorf("%q: got exit %d, stderr %q, stdout %q; want exit 1, one line, no table", tt.flags, code, stderr, stdout)
		}
	}
	log, err := mpirunMain(t, 2, fastRun(data, "--steps", "40", "--json", "/nonexistent-dir/x.json")...)
	if err == nil || strings.Count(log, "/nonexistent-dir/x.json") != 1 || hasRunTable(log) {
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
	var rs []metrics.Summary
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

// TestRunEpochs: --epochs ends the run after that many epochs, or at
// --steps if sooner, whatever the shards' sizes (an uneven dataset runs
// without a warning: every rank takes its slice of each global batch),
// and refuses epochs that make no global batch.
func TestRunEpochs(t *testing.T) {
	data := gentest.Tiny(t) // 8 shards of 4 samples
	shards, _ := filepath.Glob(filepath.Join(data, "*.tar"))
	uneven := t.TempDir()
	b, err := os.ReadFile(shards[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(uneven, "a.tar"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	gentest.WriteFirstSample(t, shards[1], filepath.Join(uneven, "b.tar")) // 4 + 1 samples
	for _, c := range []struct {
		data  string
		args  []string
		steps int
	}{
		{data, []string{"--epochs", "1"}, 8},                   // 32 samples, a global batch of 4
		{data, []string{"--epochs", "3", "--steps", "10"}, 10}, // --steps first
		{uneven, []string{"--epochs", "2"}, 2},                 // 5 samples: 10 / 4
	} {
		js := filepath.Join(t.TempDir(), "r.json")
		args := append(fastRun(c.data, "--ranks", "2", "--loader", "torch", "--json", js), c.args...)
		code, _, stderr := runMain(args...)
		if code != 0 || stderr != "" {
			t.Fatalf("%v: exit %d, stderr %q", c.args, code, stderr)
		}
		if rs := readSummaries(t, js); len(rs) != 1 || rs[0].Steps != c.steps {
			t.Errorf("%v: %+v, want %d steps", c.args, rs, c.steps)
		}
	}
	var fe cli.FlagError
	if err := commandErr(t, fastRun(uneven, "--ranks", "4", "--epochs", "1")...); !errors.As(err, &fe) || fe.Flag != "epochs" || fe.Value != "1" {
		t.Errorf("an epoch short of a global batch: %v, want a cli.FlagError of --epochs 1", err)
	}
}

// TestStreamTurnsTrainsOneOrder: --streams ranks x W --stream-turns W
// (the DataLoader layout) is one order that every loader trains, another
// than the default's.
func TestStreamTurnsTrainsOneOrder(t *testing.T) {
	data := gentest.Tiny(t) // 8 shards
	hashes := map[string]string{}
	for _, layout := range [][]string{nil, {"--streams", "4", "--stream-turns", "2"}} {
		js := filepath.Join(t.TempDir(), "r.json")
		args := append(fastRun(data, "--ranks", "2", "--workers", "2", "--steps", "6", "--loader", "torch,helix", "--json", js), layout...)
		if code, _, stderr := runMain(args...); code != 0 || stderr != "" {
			t.Fatalf("%v: exit %d, stderr %q", layout, code, stderr)
		}
		rs := readSummaries(t, js)
		if len(rs) != 2 || rs[0].BatchesHash != rs[1].BatchesHash {
			t.Fatalf("%v: %+v, want torch and helix with one batches hash", layout, rs)
		}
		hashes[fmt.Sprint(layout)] = rs[0].BatchesHash
	}
	if len(hashes) != 2 {
		t.Errorf("the DataLoader layout trains the default layout's batches (%v)", hashes)
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
		{[]string{"--gpu-ms-per-frame", "5000", "--batch", "8", "--frames", "4"}, 10 * (130*time.Millisecond + 32*5*time.Second)},
	} {
		var f runFlags
		fs := cli.NewFlags("run", "")
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

// readSummaries reads a --json file.
func readSummaries(t *testing.T, path string) []metrics.Summary {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rs []metrics.Summary
	if err := json.Unmarshal(data, &rs); err != nil {
		t.Fatal(err)
	}
	return rs
}

// TestDefaultJobUnderMPIRun: run without --data, under mpirun at 2 ranks,
// trains the default dataset as generated (skewed) and dealt across its
// shards (uniform), each loader twice (--repeat 2): the JSON holds the
// 8 runs in order with their case and repeat, both layouts hold the same
// samples (the uniform shards were made from the skewed ones), and the
// table shows both headings, the spread and the closing line.
func TestDefaultJobUnderMPIRun(t *testing.T) {
	if testing.Short() {
		t.Skip("generates the default dataset once (about 30 s) and runs 8 short runs")
	}
	cache := filepath.Join(os.TempDir(), "datahelix-testdata")
	out := filepath.Join(t.TempDir(), "run.json")
	log, err := mpirunMain(t, 2, "run", "--steps", "10", "--repeat", "2", "--frames", "2", "--size", "32",
		"--gpu-step-ms", "5", "--gpu-ms-per-frame", "0", "--quiet", "--cache-dir", cache, "--json", out)
	if err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	for _, want := range []string{"== skewed: ", "== uniform: ", "over 2 runs, median (lowest–highest)", "helix vs torch, steady throughput over 2 runs: skewed "} {
		if !strings.Contains(log, want) {
			t.Errorf("no %q in the output:\n%s", want, log)
		}
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var runs []struct {
		Loader string `json:"loader"`
		Case   string `json:"case"`
		Repeat int    `json:"repeat"`
		Batch  int    `json:"batch"`
		Job    struct {
			Cases []struct{ Name, Data string } `json:"cases"`
		} `json:"job"`
	}
	if err := json.Unmarshal(raw, &runs); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range runs {
		got = append(got, fmt.Sprintf("%s/%d/%s", r.Case, r.Repeat, r.Loader))
	}
	want := []string{"skewed/1/torch", "skewed/1/helix", "skewed/2/torch", "skewed/2/helix",
		"uniform/1/torch", "uniform/1/helix", "uniform/2/torch", "uniform/2/helix"}
	if !slices.Equal(got, want) {
		t.Fatalf("runs %v, want %v", got, want)
	}
	if runs[0].Batch != defaultJobBatch {
		t.Errorf("batch %d, want the default job's %d", runs[0].Batch, defaultJobBatch)
	}
	cases := runs[0].Job.Cases
	if len(cases) != 2 || cases[0].Name != "skewed" || cases[1].Name != "uniform" {
		t.Fatalf("job cases %+v", cases)
	}
	// The same samples, in other shards: the same members, keys and bytes.
	members := func(dir string) []string {
		paths, _ := filepath.Glob(filepath.Join(dir, "*.tar"))
		var all []string
		for _, p := range paths {
			f, err := os.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			tr := tar.NewReader(f)
			for {
				h, err := tr.Next()
				if err != nil {
					break
				}
				all = append(all, fmt.Sprintf("%s %d", h.Name, h.Size))
			}
			f.Close()
		}
		slices.Sort(all)
		return all
	}
	a, b := members(cases[0].Data), members(cases[1].Data)
	if len(a) == 0 || !slices.Equal(a, b) {
		t.Errorf("the uniform layout holds %d members, the skewed %d, not the same ones", len(b), len(a))
	}
}
