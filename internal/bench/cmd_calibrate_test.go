package bench

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/datahelix/datahelix/internal/bench/workload"
	"github.com/datahelix/datahelix/internal/cli/clitest"
	"github.com/datahelix/datahelix/internal/machine"
)

// TestBenchCalibrateRefusesFirst checks that bad or partial preset lists
// are usage errors (exit 2) given before anything is generated, decoded
// or written: a typo at the end of the list, mixed, a partial list
// without --out or with --out at the machine's cached calibration, and
// --out in a directory that does not exist.
func TestBenchCalibrateRefusesFirst(t *testing.T) {
	root := t.TempDir()
	cached := workload.CalibrationPath(root, machine.This(t.Context()))
	tr := clitest.NewTranscript(cached, "CACHED", root, "ROOT", os.TempDir(), "TMPDIR")
	tests := []struct {
		args []string
	}{
		{[]string{"--presets", "nope"}},
		{[]string{"--presets", "text,nope"}},
		{[]string{"--presets", "mixed"}},
		{[]string{"--presets", "text,text"}},
		{[]string{"--presets", "text", "--samples", "3"}},
		{[]string{"--presets", "text", "--out", cached}},
		{[]string{"--out", filepath.Join(root, "no", "such", "c.json")}},
		{[]string{"--out", os.TempDir()}},
		// "-" is no file bench --calibration could read back (a file
		// named "-" was written).
		{[]string{"--out", "-"}},
	}
	for _, tt := range tests {
		args := append([]string{"bench", "calibrate", "--cache-dir", root}, tt.args...)
		tr.Add(args, usageLine(t, args...))
		if ents, _ := os.ReadDir(root); len(ents) > 0 {
			t.Fatalf("%q wrote into the cache before refusing", tt.args)
		}
	}
	clitest.Golden(t, "bench_calibrate_refuses.golden", tr.String())
}

// TestBenchCalibratePartialOut checks that a partial calibration written
// with --out records its presets, says which it left out, and leaves the
// machine's cache alone.
func TestBenchCalibratePartialOut(t *testing.T) {
	if testing.Short() {
		t.Skip("generates and decodes a small text dataset")
	}
	root := t.TempDir()
	out := filepath.Join(t.TempDir(), "text.json")
	// What it prints, the presets left out and where it wrote, is
	// testdata/bench_calibrate_partial.golden, with the machine and the
	// measured figures normalised; its progress on stderr is left out.
	tr := clitest.NewTranscript(out, "OUT", root, "ROOT").
		Replace(`(?m)^calibration of .*: (\d+ samples decoded)`, "calibration of MACHINE: $1").
		Replace(`(?m)^ *(\S+(?: \S+)*) +\d+\.\d+$`, "$1 F")
	args := []string{"bench", "calibrate", "--cache-dir", root, "--presets", "text", "--samples", "3", "--repeat", "1", "--out", out}
	code, stdout, stderr := runMain(args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	tr.AddOutputs(args, code, stdout, "")
	clitest.Golden(t, "bench_calibrate_partial.golden", tr.String())
	cal, err := workload.LoadCalibration(out)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cal.Presets, []string{"text"}) {
		t.Errorf("presets %v, want [text]", cal.Presets)
	}
	if m, _ := filepath.Glob(filepath.Join(root, "bench", "calibration-*.json")); len(m) > 0 {
		t.Errorf("a partial calibration was cached: %v", m)
	}
}
