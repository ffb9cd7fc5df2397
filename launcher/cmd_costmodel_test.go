package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/datahelix/datahelix/decode/gen/gentest"
)

// TestCostModelNothingHeldOut checks that a warm-up covering the whole
// dataset prints n/a and how to fix it, not an error of 0.0 % that reads
// as an exact model; and that a smaller warm-up prints figures.
func TestCostModelNothingHeldOut(t *testing.T) {
	data := gentest.Tiny(t) // 32 samples
	args := []string{"costmodel", "--data", data, "--cache", t.TempDir(), "--repeat", "1", "--frames", "2", "--size", "32"}
	code, stdout, stderr := runMain(append(args, "--warmup", "200")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	all := rowOf(stdout, "all")
	if !strings.Contains(all, "n/a") || strings.Contains(all, "0.0") {
		t.Errorf("row %q: want n/a, not 0.0", all)
	}
	if !strings.Contains(stdout, "nothing held out") || !strings.Contains(stdout, "lower --warmup") {
		t.Errorf("got\n%s\nwant a line saying nothing was held out and to lower --warmup", stdout)
	}
	code, stdout, stderr = runMain(append(args, "--warmup", "8")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if all := rowOf(stdout, "all"); strings.Contains(all, "n/a") || !strings.Contains(all, " 24 ") {
		t.Errorf("--warmup 8 of 32: row %q, want 24 held out with figures", all)
	}
}

// rowOf returns the table line whose first field is key.
func rowOf(out, key string) string {
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == key {
			return line
		}
	}
	return ""
}

// TestCostModelRejectsOtherCalibrations checks that --calibration refuses
// JSON that is not a calibration, naming the flag and the file, before
// anything is decoded.
func TestCostModelRejectsOtherCalibrations(t *testing.T) {
	dir := t.TempDir()
	tests := []struct{ name, data, want string }{
		{"empty.json", "{}", "no cost coefficients"},
		{"workload.json", `{"name":"kinetics","batch":16}`, `unknown field "name"`},
	}
	for _, tt := range tests {
		p := filepath.Join(dir, tt.name)
		if err := os.WriteFile(p, []byte(tt.data), 0o644); err != nil {
			t.Fatal(err)
		}
		code, _, stderr := runMain("costmodel", "--data", filepath.Join(dir, "no-such-data"), "--calibration", p)
		if code != 1 || !strings.Contains(stderr, "costmodel: --calibration: "+p+": ") || !strings.Contains(stderr, tt.want) {
			t.Errorf("%s: exit %d, stderr %q; want 1 and an error naming --calibration and the file, containing %q", tt.name, code, stderr, tt.want)
		}
	}
}
