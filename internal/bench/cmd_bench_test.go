package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/datahelix/datahelix/internal/bench/report"
	"github.com/datahelix/datahelix/internal/bench/workload"
	"github.com/datahelix/datahelix/internal/cli"
	"github.com/datahelix/datahelix/internal/cli/clitest"
)

func TestBenchCommand(t *testing.T) {
	dir := t.TempDir()
	out, js := filepath.Join(dir, "out"), filepath.Join(dir, "r.json")
	code, stdout, stderr := runMain("bench", "--workloads", "kinetics,text", "--steps", "10", "--sections", "none",
		"--cache-dir", filepath.Join(dir, "cache"), "--out", out, "--json", js)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	data, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Results []struct {
			Workload string `json:"workload"`
			Loader   string `json:"loader"`
		} `json:"results"`
		Summary     map[string]any `json:"summary"`
		Calibration struct {
			Source string `json:"source"`
			Note   string `json:"note"`
		} `json:"calibration"`
	}
	if err := json.Unmarshal(data, &doc); err != nil || len(doc.Results) != 18 || doc.Summary == nil {
		t.Fatalf("JSON: %v, %d results", err, len(doc.Results))
	}
	runs := map[string]bool{}
	for _, r := range doc.Results {
		runs[r.Workload+" "+r.Loader] = true
	}
	for _, w := range []string{"kinetics", "text"} {
		for _, l := range []string{"torch", "torch-ddp", "torch-pack", "local", "static", "helix", "helix-nogate", "helix-notrain", "oracle"} {
			if !runs[w+" "+l] {
				t.Errorf("no result of %s with %s", w, l)
			}
		}
	}
	// No calibration in an empty cache: the default, said in the JSON,
	// on stderr and in the report.
	note := doc.Calibration.Note
	if doc.Calibration.Source != "default" || note == "" || !strings.HasPrefix(stderr, "datahelix bench: "+note+"\n") ||
		!slices.Contains(strings.Split(stdout, "\n"), "costs: "+note) {
		t.Errorf("calibration %+v; want the default, its note on stderr and in the report:\n%s\n%s", doc.Calibration, stderr, stdout)
	}
	for _, f := range []string{"results.csv", "comparisons.csv", "goals.csv", "gpu_wait.png", "wait_text.png"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("%s not written: %v", f, err)
		}
	}
}

// TestBenchUsageErrors checks bench's bad flags: usage errors that read
// as testdata/bench_usage_errors.golden says.
func TestBenchUsageErrors(t *testing.T) {
	// The memory limit is this machine's: three quarters of it.
	// The cap on real ranks is this machine's: 4 per core.
	tr := clitest.NewTranscript().Replace(`over the limit of [0-9.]+ [GT]B`, "over the limit of LIMIT").Replace(`rank counts of 1\.\.[0-9]+`, "rank counts of 1..MAX")
	for _, tt := range []struct {
		args []string
	}{
		{[]string{"bench", "--sim", "--real"}},
		{[]string{"bench", "--workloads", "nope"}},
		{[]string{"bench", "--loaders", "pytorch"}},
		{[]string{"bench", "--sections", "gpu"}},
		{[]string{"bench", "--ranks", "0"}},
		{[]string{"bench", "--workloads", "kinetics,kinetics"}},
		// Checked before any work (they were found after the calibration
		// was loaded, or after 56 s of the scale section, with exit 1).
		{[]string{"bench", "--ranks", "70000"}},
		{[]string{"bench", "--batch", "5000"}},
		{[]string{"bench", "--ratio", "20"}},
		{[]string{"bench", "--seeds", "-1"}},
		{[]string{"bench", "--seeds", "101"}},
		{[]string{"bench", "--seeds", "2", "--real"}},
		{[]string{"bench", "--scale-ranks", "70000"}},
		{[]string{"bench", "--scale-batch", "-1"}},
		{[]string{"bench", "--parallel", "-1"}},
		{[]string{"bench", "--bandwidth-mbs", "0"}},
		{[]string{"bench", "--latency-us", "-1"}},
		// Both zero is the zero Network, which a library caller gets as the
		// default; from the flags it is a bad rate (it ran the default).
		{[]string{"bench", "--bandwidth-mbs", "0", "--latency-us", "0"}},
		// Below 1/65536 MB/s the fixed point truncated to 0 and above
		// about 1.4e14 it overflowed: both ran as 1 GB/s.
		{[]string{"bench", "--bandwidth-mbs", "1e-6"}},
		{[]string{"bench", "--bandwidth-mbs", "2e14"}},
		{[]string{"bench", "--latency-us", "9999999999999"}},
		// Memory: 65536 ranks x 20 steps grew to 24 GB before the OOM
		// killer ended it; a simulation the machine cannot hold is refused.
		{[]string{"bench", "--ranks", "65536", "--steps", "1000000"}},
		{[]string{"bench", "--steps", "100000000"}},
		{[]string{"bench", "--scale-ranks", "65536", "--scale-steps", "100000"}},
		// all and none stand alone; an empty --sections is no list.
		{[]string{"bench", "--workloads", "all,kinetics"}},
		{[]string{"bench", "--sections", "none,scale"}},
		{[]string{"bench", "--sections", "planner,all"}},
		{[]string{"bench", "--sections", ""}},
		{[]string{"bench", "--bandwidth-mbs", "inf"}},
		{[]string{"bench", "--real", "--loaders", "oracle"}},
		{[]string{"bench", "--scale-workload", "nope"}},
		{[]string{"bench", "--workloads", "kinetics", "--timeline", "nope"}},
		// Empty list items are refused alike in every list.
		{[]string{"bench", "--workloads", "kinetics,,"}},
		{[]string{"bench", "--loaders", "torch,,helix"}},
		{[]string{"bench", "--sections", "planner,,scale"}},
		{[]string{"bench calibrate", "--samples", "2"}},
		// A real run's ranks share this machine's cores: checked before
		// 64000 samples are generated for 2000 ranks.
		{[]string{"bench", "--real", "--ranks", "2000"}},
		// The bridge section's runs: checked before any work too.
		{[]string{"bench", "--bridge-ranks", "2,,4"}},
		{[]string{"bench", "--bridge-ranks", "2,70000"}},
		{[]string{"bench", "--bridge-steps", "8"}},
		{[]string{"bench", "--bridge-data", "/nonexistent/shards"}},
	} {
		args := append(strings.Fields(tt.args[0]), tt.args[1:]...) // "bench calibrate" is two
		stderr := usageLine(t, args...)
		tr.Add(args, stderr)
		if strings.Count(stderr, "bench: ") > 1 {
			t.Errorf("%q: %q says bench: more than once", tt.args, stderr)
		}
	}
	clitest.Golden(t, "bench_usage_errors.golden", tr.String())
}

// TestBenchChecksOutputsFirst checks that --json and --out paths that
// cannot be written are refused before any work (they were found after
// the whole run), and that a failed run removes the outputs it created.
func TestBenchChecksOutputsFirst(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	base := []string{"bench", "--workloads", "text", "--steps", "3", "--sections", "none", "--cache-dir", filepath.Join(dir, "cache")}
	for _, tt := range []struct {
		args  []string
		flag  string
		path  string
		fsErr error
	}{
		{[]string{"--json", filepath.Join(dir, "missing", "r.json"), "--out", filepath.Join(dir, "o1")}, "--json", filepath.Join(dir, "missing", "r.json"), fs.ErrNotExist},
		{[]string{"--out", filepath.Join(file, "sub")}, "--out", filepath.Join(file, "sub"), syscall.ENOTDIR},
	} {
		var oe cli.OutputError
		if err := commandErr(t, append(base, tt.args...)...); !errors.As(err, &oe) || oe.Flag != tt.flag || oe.Path != tt.path || !errors.Is(err, tt.fsErr) || !errors.Is(err, cli.ErrUsage) {
			t.Errorf("%q: %v; want a usage error about %s %s (%v)", tt.args, err, tt.flag, tt.path, tt.fsErr)
		}
		// One line, the error's: the calibration (its note) was not
		// looked up before.
		if code, stdout, stderr := runMain(append(base, tt.args...)...); code != 2 || strings.Count(stderr, "\n") != 1 || stdout != "" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 2, one line on stderr and nothing on stdout", tt.args, code, stdout, stderr)
		}
	}
	// A run that fails (here: interrupted at once) leaves no new --json
	// file or --out directory behind, and an existing --json untouched.
	js, out, old := filepath.Join(dir, "new.json"), filepath.Join(dir, "newout"), filepath.Join(dir, "old.json")
	if err := os.WriteFile(old, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, j := range []string{js, old} {
		var o, e bytes.Buffer
		if code := cli.Main(ctx, commands, append(base, "--json", j, "--out", out), &o, &e); code == 0 {
			t.Fatalf("interrupted run: exit 0")
		}
	}
	for _, p := range []string{js, out} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s left behind by a failed run: %v", p, err)
		}
	}
	if data, err := os.ReadFile(old); err != nil || string(data) != "keep" {
		t.Errorf("existing --json after a failed run: %q, %v; want it untouched", data, err)
	}
}

// TestBenchCalibrationFileIsAFlag checks that a --calibration file that
// cannot be read or is no calibration is a bad flag (exit 2, it was 1),
// said with one prefix ("bench: --calibration: bench: calibration: open"),
// before any simulation.
func TestBenchCalibrationFileIsAFlag(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.json")
	if err := os.WriteFile(empty, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.json")
	for _, tt := range []struct{ file, want string }{
		{missing, "datahelix: bench: --calibration: open " + missing + ": no such file or directory\n"},
		{empty, "datahelix: bench: --calibration: " + empty + ": invalid calibration: "},
	} {
		code, stdout, stderr := runMain("bench", "--workloads", "text", "--steps", "3", "--sections", "none", "--quiet",
			"--out", filepath.Join(dir, "out"), "--calibration", tt.file)
		if code != 2 || !strings.HasPrefix(stderr, tt.want) || strings.Count(stderr, "\n") != 1 || stdout != "" {
			t.Errorf("--calibration %s: exit %d, stdout %q, stderr %q; want 2 and one line starting %q", tt.file, code, stdout, stderr, tt.want)
		}
		if strings.Count(stderr, "bench:") > 1 || strings.Count(stderr, "--calibration") > 1 {
			t.Errorf("--calibration %s: %q repeats its prefix", tt.file, stderr)
		}
	}
}

// TestBenchPlanChecksJSONFirst checks that bench plan refuses a --json
// path it cannot write before planning (it planned every input, then
// failed with exit 1), and that a good path gets the result.
func TestBenchPlanChecksJSONFirst(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "missing", "x.json")
	var oe cli.OutputError
	if err := commandErr(t, "bench", "plan", "--json", bad); !errors.As(err, &oe) || oe.Flag != "--json" || oe.Path != bad || cli.ExitStatus(err) != cli.ExitUsage {
		t.Errorf("--json %s: %v; want a usage error about --json before any planning", bad, err)
	}
	good := filepath.Join(dir, "x.json")
	if code, _, stderr := runMain("bench", "plan", "--plans", "3", "--ranks", "4", "--batch", "4", "--json", good); code != 0 {
		t.Fatalf("--json %s: exit %d: %s", good, code, stderr)
	}
	var res map[string]any
	if data, err := os.ReadFile(good); err != nil || json.Unmarshal(data, &res) != nil || len(res) == 0 {
		t.Errorf("--json %s: %v, %q", good, err, data)
	}
}

// TestBenchTimelineNote checks that bench says why it drew no timeline
// figure (it dropped it silently).
func TestBenchTimelineNote(t *testing.T) {
	dir := t.TempDir()
	tr := clitest.NewTranscript(dir, "DIR")
	for _, tt := range []struct {
		args   []string
		figure bool
	}{
		{[]string{"--loaders", "local,helix"}, false},
		{[]string{"--ranks", fmt.Sprint(report.MaxTimelineRanks + 1)}, false},
		{[]string{"--timeline", "kinetics"}, true},
	} {
		fig := filepath.Join(dir, "out", "timeline_kinetics.png")
		os.Remove(fig)
		args := append([]string{"bench", "--workloads", "kinetics", "--steps", "3", "--sections", "none", "--cache-dir", filepath.Join(dir, "cache"), "--out", filepath.Join(dir, "out")}, tt.args...)
		code, stdout, stderr := runMain(args...)
		if code != 0 {
			t.Fatalf("%q: exit %d: %s", tt.args, code, stderr)
		}
		if _, err := os.Stat(fig); (err == nil) != tt.figure {
			t.Errorf("%q: timeline figure: %v, want one: %v", tt.args, err, tt.figure)
		}
		// The report's note on the figure, in testdata/bench_timeline.golden.
		var notes []string
		for _, l := range strings.SplitAfter(stdout, "\n") {
			if strings.HasPrefix(l, "no timeline figure") {
				notes = append(notes, l)
			}
		}
		tr.Add(args, strings.Join(notes, ""))
	}
	clitest.Golden(t, "bench_timeline.golden", tr.String())
}

// TestBenchProgressWithoutTerminal checks that with standard error not a
// terminal (an sbatch log) bench prints plain progress lines, the
// sections' headers included, and that --quiet silences them.
func TestBenchProgressWithoutTerminal(t *testing.T) {
	dir := t.TempDir()
	args := []string{"bench", "--workloads", "kinetics", "--loaders", "torch,helix", "--steps", "3", "--sections", "planner",
		"--cache-dir", filepath.Join(dir, "cache"), "--out", filepath.Join(dir, "out")}
	// The simulations end in any order: their lines are sorted, the
	// counts and times left out.
	tr := clitest.NewTranscript(dir, "DIR").Replace(`\(\d+ of (\d+), [0-9.]+ s\)`, "(N of $1, T s)")
	for _, args := range [][]string{args, append(args, "--quiet")} {
		code, _, stderr := runMain(args...)
		if code != 0 {
			t.Fatalf("%q: exit %d: %s", args, code, stderr)
		}
		lines := strings.SplitAfter(stderr, "\n")
		slices.Sort(lines)
		tr.Add(args, strings.Join(lines, ""))
	}
	clitest.Golden(t, "bench_progress.golden", tr.String())
}

// TestBenchWarnsOfSlowNodesOutsideTheWorld checks that bench says before
// the run when a workload's slow nodes slow no rank: hetero_cluster at 4
// ranks ran as kinetics without a word.
func TestBenchWarnsOfSlowNodesOutsideTheWorld(t *testing.T) {
	dir := t.TempDir()
	args := []string{"bench", "--workloads", "hetero_cluster", "--loaders", "torch,helix", "--steps", "3", "--sections", "none",
		"--cache-dir", filepath.Join(dir, "cache"), "--out", filepath.Join(dir, "out"), "--quiet"}
	tr := clitest.NewTranscript(dir, "DIR")
	for _, args := range [][]string{append(args, "--ranks", "4"), args} {
		code, _, stderr := runMain(args...)
		if code != 0 {
			t.Errorf("%q: exit %d: %s", args, code, stderr)
		}
		tr.Add(args, stderr)
	}
	clitest.Golden(t, "bench_slow_nodes.golden", tr.String())
}

// TestBenchWarnsOfUncalibratedPresets checks that a calibration which did
// not measure a selected workload's presets is said up front, and that a
// bad --calibration file is named as that flag's.
func TestBenchWarnsOfUncalibratedPresets(t *testing.T) {
	dir := t.TempDir()
	cal := filepath.Join(dir, "text.json")
	code, _, stderr := runMain("bench", "calibrate", "--presets", "text", "--samples", "3", "--out", cal, "--cache-dir", filepath.Join(dir, "cache"))
	if code != 0 {
		t.Fatalf("calibrate: exit %d: %s", code, stderr)
	}
	args := func(calFile string) []string {
		return []string{"bench", "--workloads", "kinetics,text", "--steps", "10", "--sections", "none", "--quiet",
			"--calibration", calFile, "--cache-dir", filepath.Join(dir, "cache"), "--out", filepath.Join(dir, "out")}
	}
	tr := clitest.NewTranscript(dir, "DIR")
	code, _, stderr = runMain(args(cal)...)
	if code != 0 {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
	tr.Add(args(cal), stderr)
	clitest.Golden(t, "bench_uncalibrated.golden", tr.String())
	empty := filepath.Join(dir, "empty.json")
	if err := os.WriteFile(empty, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := commandErr(t, args(empty)...); !errors.Is(err, workload.ErrCalibration) || cli.ExitStatus(err) != cli.ExitUsage {
		t.Errorf("--calibration %s: %v; want a usage error wrapping workload.ErrCalibration", empty, err)
	}
}

// TestBenchRealWithoutMPIRun checks that --real without mpirun on PATH
// is one line and exit status 2 before any dataset is generated (it was
// a 600-character exec error after seconds of generation).
func TestBenchRealWithoutMPIRun(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	code, _, stderr := runMain("bench", "--real", "--workloads", "text", "--cache-dir", filepath.Join(dir, "cache"), "--out", out)
	if code != 2 || !strings.HasPrefix(stderr, "datahelix: bench: --real: mpirun not found on PATH (install openmpi-bin") || strings.Count(stderr, "\n") != 1 {
		t.Errorf("exit %d, stderr %q; want 2 and one line: mpirun not found on PATH", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "cache")); err == nil {
		t.Errorf("the cache was written before the check")
	}
}

// TestBarLogClearsTheBar checks that a log line written while the
// progress bar shows starts on a line of its own (it ran on from the bar:
// "running  50% |####| (2/4) [0s:0s]bench: real: ...") and that the bar
// takes the evaluation's total.
func TestBarLogClearsTheBar(t *testing.T) {
	var buf bytes.Buffer
	bar := cli.NewBar(&buf, 4, "running")
	bl := &barLog{bar: bar, w: &buf}
	bl.set(1, 2) // a real run has no oracle: 2 jobs, not 3 loaders
	if bar.GetMax() != 2 {
		t.Errorf("bar max %d, want the evaluation's 2", bar.GetMax())
	}
	fmt.Fprintf(bl, "bench: real: generated 128 samples\n")
	got := buf.String()
	i := strings.Index(got, "bench: real: generated 128 samples\n")
	if i < 1 || got[i-1] != '\r' {
		t.Fatalf("the log line does not start on a cleared line:\n%q", got)
	}
	if !strings.Contains(got[i:], "(1/2)") { // the bar's count, 1 of the evaluation's 2
		t.Errorf("the bar is not drawn again below the line:\n%q", got)
	}
	bl.finish()
	buf.Reset()
	fmt.Fprintf(bl, "bench: section planner\n")
	if got := buf.String(); got != "bench: section planner\n" {
		t.Errorf("after the bar finished: %q, want the line alone", got)
	}
}
