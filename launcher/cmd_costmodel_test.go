package launcher

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/datahelix/datahelix/internal/gen/gentest"
)

// TestCostModelWarmup checks that a --warmup covering the whole dataset
// is refused before any decoding, that the default warm-up shrinks to
// two thirds of a small dataset and says so, and that a smaller warm-up
// holds out the rest.
func TestCostModelWarmup(t *testing.T) {
	data := gentest.Tiny(t) // 32 samples
	args := []string{"costmodel", "--data", data, "--cache", t.TempDir(), "--repeat", "1", "--frames", "2", "--size", "32"}
	// Refused before decoding, naming the samples there are to decode:
	// the dataset's 32, or the 16 of --limit.
	tr := newTranscript(data, "DATA", args[4], "INDEX")
	for _, extra := range [][]string{{"--warmup", "200"}, {"--warmup", "20", "--limit", "16"}} {
		var fe flagError
		if err := commandErr(t, append(args, extra...)...); !errors.As(err, &fe) || fe.flag != "warmup" || fe.value != extra[1] {
			t.Errorf("%q: %#v, want a flagError about --warmup", extra, err)
		}
		tr.add(append(args, extra...), usageLine(t, append(args, extra...)...))
	}
	golden(t, "costmodel_warmup.golden", tr.String())
	code, stdout, stderr := runMain(args...) // the default warm-up, 200
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stderr, "learning from the first 21") {
		t.Errorf("default warm-up: stderr %q, want it to say it learns from 21 of 32", stderr)
	}
	if all := rowOf(stdout, "all"); strings.Contains(all, "n/a") || !strings.Contains(all, " 11 ") {
		t.Errorf("default warm-up on 32: row %q, want 11 held out with figures", all)
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
