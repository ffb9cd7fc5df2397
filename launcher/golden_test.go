package launcher

import (
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/datahelix/datahelix/internal/cli/clitest"
)

// newRunTranscript is clitest.NewTranscript for the outputs of datahelix run
// and train: the dataset data reads DATA, the pairs oldnew apply next
// (paths under the temporary directory), then the temporary directory
// reads TMPDIR; the table's figures that depend on the machine's speed
// read "…" (see runFigures).
func newRunTranscript(data string, oldnew ...string) *clitest.Transcript {
	pairs := append(append([]string{data, "DATA"}, oldnew...), os.TempDir(), "TMPDIR")
	tr := clitest.NewTranscript(pairs...)
	for _, f := range runFigures {
		tr.Replace(f[0], f[1])
	}
	return tr
}

// runFigures are the run table's rows and lines whose figures depend on
// the machine's speed (misses, waits, throughput, bytes a timed plan
// moved, latencies, memory), as expression and replacement: the row's
// name stays, its figures read "…". The header, the loaders, the notes
// on resumed loaders, the dropped and damaged counts and the batches
// hash stay as printed: they are the run's behaviour.
var runFigures = [][2]string{
	{`(?m)^((?:2> )?(?:deadline misses|GPU wait per rank|throughput|wall time|moved per step|  across nodes|plan p50|allgather p50|cost model MAPE|GPU model MAPE|peak RSS|first batch after|warm-up stall|after \d+ steps: misses| +GPU wait| +throughput|  job: steps missed| +stall| +GPU efficiency)) .*$`, "$1 …"},
	{`(?m)^((?:2> )?\w+ vs \w+): .*$`, "$1: …"},
	{`(?m)^((?:2> )?after the first \d+ steps \(the warm-up, one planning horizon\)): misses .*$`, "$1: misses …"},
}

// hasRunTable reports whether out holds a run's table: its last row,
// the batches hash.
func hasRunTable(out string) bool {
	return rowOf(out, "batches") != ""
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

// usageLine runs args as runMain does and checks that it fails as a
// usage error (clitest.UsageLine). It returns that line, for a
// transcript.
func usageLine(t *testing.T, args ...string) string {
	t.Helper()
	return clitest.UsageLine(t, runMain, args...)
}

// commandErr runs the command line args as Main does, but returns the
// command's error instead of printing it, for errors.Is and errors.As.
func commandErr(t *testing.T, args ...string) error {
	t.Helper()
	return clitest.CommandErr(t, commands, args...)
}

// datahelixLines returns the lines of a job's output that datahelix
// printed ("datahelix: ..."), in order, leaving out what mpirun and MPI
// print around them; this host's name reads HOST.
func datahelixLines(out string) string {
	host, _ := os.Hostname()
	var b strings.Builder
	for _, l := range strings.SplitAfter(out, "\n") {
		if strings.HasPrefix(l, "datahelix: ") {
			if host != "" {
				l = strings.ReplaceAll(l, " on "+host+" ", " on HOST ")
			}
			b.WriteString(l)
		}
	}
	return b.String()
}

// sortRankLines sorts the lines of out that ranks print ("datahelix:
// rank R...") among themselves, in the places they hold, the other
// lines staying where they are: ranks print side by side, in an order
// that differs from run to run, before what rank 0 prints last.
func sortRankLines(out string) string {
	lines := strings.SplitAfter(out, "\n")
	var at []int
	var ranks []string
	for i, l := range lines {
		if strings.HasPrefix(l, "datahelix: rank ") {
			at = append(at, i)
			ranks = append(ranks, l)
		}
	}
	slices.Sort(ranks)
	for k, i := range at {
		lines[i] = ranks[k]
	}
	return strings.Join(lines, "")
}

// sortLines returns the lines of out sorted: a job's lines, which reach
// mpirun through one pipe per rank, in an order no test can rely on.
func sortLines(out string) string {
	lines := strings.SplitAfter(out, "\n")
	slices.Sort(lines)
	return strings.Join(lines, "")
}

// exitCode returns the exit status of the process err reports on: 0 for
// nil, -1 for an error that is no exit status.
func exitCode(err error) int {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.ExitCode()
	}
	return -1
}
