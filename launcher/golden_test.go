package launcher

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the golden outputs under testdata/ (go test -run TestName -rewrite)")

// golden compares got with the file testdata/name, or writes got there
// when the tests run with -rewrite: what the user reads is pinned
// there, so that rewording a message is a rewrite and a one-line diff,
// and a changed behaviour (another flag named, a line more) still fails.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *rewrite {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run %s -rewrite to write it)", err, t.Name())
	}
	if got != string(want) {
		t.Errorf("output differs from %s (go test -run %s -rewrite accepts it):\n--- got\n%s--- want\n%s", path, t.Name(), got, want)
	}
}

// transcript collects command lines and what they printed, with volatile
// parts (temporary directories) replaced by stable names, for golden.
type transcript struct {
	b    strings.Builder
	norm *strings.Replacer
	res  []normalizer // applied to what commands print, after norm
}

// normalizer replaces what re matches with with (regexp's $1 expansion).
type normalizer struct {
	re   *regexp.Regexp
	with string
}

// newTranscript returns a transcript that replaces each old of the
// old, new pairs with its new.
func newTranscript(oldnew ...string) *transcript {
	return &transcript{norm: strings.NewReplacer(oldnew...)}
}

// machineFacts are the parts of messages that depend on the machine
// the tests run on: its memory, its cores.
var machineFacts = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`--real runs at most \d+ ranks here \(4 per core of this machine's \d+, at least 8\)`), "--real runs at most N ranks here (4 per core of this machine's CORES, at least 8)"},
}

// add records "$ datahelix ARGS" and out, with the machine's facts
// replaced too.
func (tr *transcript) add(args []string, out string) { tr.addAs("datahelix", args, out) }

// addJob records "$ mpirun -np NP datahelix ARGS" and out, a job's
// output (its datahelixLines, say), as add does.
func (tr *transcript) addJob(np int, args []string, out string) {
	tr.addAs(fmt.Sprintf("mpirun -np %d datahelix", np), args, out)
}

// addAs records "$ CMD ARGS" and out, as add does.
func (tr *transcript) addAs(cmd string, args []string, out string) {
	for _, f := range machineFacts {
		out = f.re.ReplaceAllString(out, f.with)
	}
	out = tr.norm.Replace(out)
	for _, f := range tr.res {
		out = f.re.ReplaceAllString(out, f.with)
	}
	tr.b.WriteString(tr.norm.Replace("$ "+cmd+" "+strings.Join(args, " ")+"\n") + out)
	if out != "" && !strings.HasSuffix(out, "\n") {
		tr.b.WriteString("\n")
	}
}

// replace makes tr replace what expr matches in commands' output with
// with (a time, a count that depends on the machine), and returns tr.
func (tr *transcript) replace(expr, with string) *transcript {
	tr.res = append(tr.res, normalizer{regexp.MustCompile(expr), with})
	return tr
}

// newRunTranscript is newTranscript for the outputs of datahelix run
// and train: the dataset data reads DATA, the pairs oldnew apply next
// (paths under the temporary directory), then the temporary directory
// reads TMPDIR; the table's figures that depend on the machine's speed
// read "…" (see runFigures).
func newRunTranscript(data string, oldnew ...string) *transcript {
	pairs := append(append([]string{data, "DATA"}, oldnew...), os.TempDir(), "TMPDIR")
	tr := newTranscript(pairs...)
	for _, f := range runFigures {
		tr.replace(f[0], f[1])
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

// run runs args as runMain does and records standard output, then
// standard error's lines marked "2> ", then the exit status if not 0.
// It returns the exit status and both outputs.
func (tr *transcript) run(args ...string) (code int, stdout, stderr string) {
	code, stdout, stderr = runMain(args...)
	tr.addOutputs(args, code, stdout, stderr)
	return code, stdout, stderr
}

// addOutputs records args with a command's exit status and outputs, as
// run does.
func (tr *transcript) addOutputs(args []string, code int, stdout, stderr string) {
	var b strings.Builder
	b.WriteString(stdout)
	for _, l := range strings.SplitAfter(stderr, "\n") {
		if l != "" {
			b.WriteString("2> " + l)
		}
	}
	if stderr != "" && !strings.HasSuffix(stderr, "\n") {
		b.WriteString("\n")
	}
	if code != 0 {
		fmt.Fprintf(&b, "[exit %d]\n", code)
	}
	tr.add(args, b.String())
}

func (tr *transcript) String() string { return tr.b.String() }

// usageLine runs args as runMain does and checks that it fails as a
// usage error: exit status 2, one line on standard error, nothing on
// standard output. It returns that line, for a transcript.
func usageLine(t *testing.T, args ...string) string {
	t.Helper()
	code, stdout, stderr := runMain(args...)
	if code != exitUsage || strings.Count(stderr, "\n") != 1 || stdout != "" {
		t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit %d, one line on stderr and nothing on stdout", args, code, stdout, stderr, exitUsage)
	}
	return stderr
}

// commandErr runs the command line args as Main does, but returns the
// command's error instead of printing it, for errors.Is and errors.As.
func commandErr(t *testing.T, args ...string) error {
	t.Helper()
	c, rest, ok := lookup(args)
	if !ok {
		t.Fatalf("%q: no such command", args)
	}
	var out, errb strings.Builder
	return c.run(t.Context(), &out, &errb, rest)
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
