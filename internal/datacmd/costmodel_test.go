package datacmd

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/datahelix/datahelix/internal/cli"
	"github.com/datahelix/datahelix/internal/cli/clitest"
	"github.com/datahelix/datahelix/internal/costmodel"
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
	tr := clitest.NewTranscript(data, "DATA", args[4], "INDEX")
	for _, extra := range [][]string{{"--warmup", "200"}, {"--warmup", "20", "--limit", "16"}} {
		var fe cli.FlagError
		if err := commandErr(t, append(args, extra...)...); !errors.As(err, &fe) || fe.Flag != "warmup" || fe.Value != extra[1] {
			t.Errorf("%q: %#v, want a cli.FlagError about --warmup", extra, err)
		}
		tr.Add(append(args, extra...), usageLine(t, append(args, extra...)...))
	}
	// The default warm-up, 200, says what it learns from on stderr (in
	// the golden); the table's figures are timings, so only its
	// "samples" column, the held-out count, is compared, and that the
	// errors are figures, not n/a.
	code, stdout, stderr := runMain(args...)
	tr.AddOutputs(args, code, "", stderr)
	clitest.Golden(t, "costmodel_warmup.golden", tr.String())
	if all := costRows(stdout)["all"]; code != 0 || all["samples"] != "11" || all["MAPE %"] == "n/a" {
		t.Errorf("default warm-up on 32: exit %d, row %v, want 11 held out with figures:\n%s", code, all, stdout)
	}
	code, stdout, stderr = runMain(append(args, "--warmup", "8")...)
	if all := costRows(stdout)["all"]; code != 0 || all["samples"] != "24" || all["MAPE %"] == "n/a" {
		t.Errorf("--warmup 8 of 32: exit %d, row %v, stderr %q; want 24 held out with figures:\n%s", code, all, stderr, stdout)
	}
}

// costRows returns costmodel's table as rows by model key ("all",
// "video/h264"), each a map from column name to cell: the cells are
// right-aligned, at least two spaces apart.
func costRows(out string) map[string]map[string]string {
	cols := regexp.MustCompile(` {2,}`)
	rows := map[string]map[string]string{}
	var head []string
	for _, line := range strings.Split(out, "\n") {
		cells := cols.Split(strings.TrimSpace(line), -1)
		switch {
		case len(cells) > 1 && cells[0] == "model":
			head = cells
		case head != nil && len(cells) == len(head):
			row := map[string]string{}
			for i, c := range cells {
				row[head[i]] = c
			}
			rows[cells[0]] = row
		}
	}
	return rows
}

// TestCostModelRejectsOtherCalibrations checks that --calibration refuses
// JSON that is not a calibration, naming the flag and the file, before
// anything is decoded (testdata/costmodel_bad_calibrations.golden).
func TestCostModelRejectsOtherCalibrations(t *testing.T) {
	dir := t.TempDir()
	tr := clitest.NewTranscript(dir, "DIR")
	for _, c := range []struct{ name, data string }{
		{"empty.json", "{}"},
		{"workload.json", `{"name":"kinetics","batch":16}`},
	} {
		p := filepath.Join(dir, c.name)
		if err := os.WriteFile(p, []byte(c.data), 0o644); err != nil {
			t.Fatal(err)
		}
		args := []string{"costmodel", "--data", filepath.Join(dir, "no-such-data"), "--calibration", p}
		if err := commandErr(t, args...); !errors.Is(err, costmodel.ErrBadCalibration) {
			t.Errorf("%s: %v, want costmodel.ErrBadCalibration", c.name, err)
		}
		if code, _, _ := tr.Run(runMain, args...); code != cli.ExitFailure {
			t.Errorf("%s: exit %d, want %d", c.name, code, cli.ExitFailure)
		}
	}
	clitest.Golden(t, "costmodel_bad_calibrations.golden", tr.String())
}
