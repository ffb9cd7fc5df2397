// Package clitest helps the tests of the datahelix commands: it runs
// command lines as the command does, and compares what they print with
// golden files under the package's testdata/, which go test -rewrite
// writes instead.
package clitest

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/datahelix/datahelix/internal/cli"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the golden outputs under testdata/ (go test -run TestName -rewrite)")

// Golden compares got with the file testdata/name, or writes got there
// when the tests run with -rewrite: what the user reads is pinned
// there, so that rewording a message is a rewrite and a one-line diff,
// and a changed behaviour (another flag named, a line more) still fails.
func Golden(t *testing.T, name, got string) {
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

// MainFunc runs a command line as the datahelix command does and
// returns its exit status and what it printed on standard output and
// standard error.
type MainFunc func(args ...string) (code int, stdout, stderr string)

// Main returns the MainFunc of the commands cmds (cli.Main with them).
func Main(cmds ...cli.Command) MainFunc {
	return func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := cli.Main(context.Background(), cmds, args, &out, &errb)
		return code, out.String(), errb.String()
	}
}

// UsageLine runs args with main and checks that it fails as a usage
// error: exit status 2, one line on standard error, nothing on standard
// output. It returns that line, for a transcript.
func UsageLine(t *testing.T, main MainFunc, args ...string) string {
	t.Helper()
	code, stdout, stderr := main(args...)
	if code != cli.ExitUsage || strings.Count(stderr, "\n") != 1 || stdout != "" {
		t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit %d, one line on stderr and nothing on stdout", args, code, stdout, stderr, cli.ExitUsage)
	}
	return stderr
}

// CommandErr runs the command line args with the commands cmds as
// cli.Main does, but returns the command's error instead of printing it,
// for errors.Is and errors.As.
func CommandErr(t *testing.T, cmds []cli.Command, args ...string) error {
	t.Helper()
	c, rest, ok := cli.Lookup(cmds, args)
	if !ok {
		t.Fatalf("%q: no such command", args)
	}
	var out, errb strings.Builder
	return c.Run(t.Context(), &out, &errb, rest)
}

// Transcript collects command lines and what they printed, with volatile
// parts (temporary directories) replaced by stable names, for Golden.
type Transcript struct {
	b    strings.Builder
	norm *strings.Replacer
	res  []normalizer // applied to what commands print, after norm
}

// normalizer replaces what re matches with with (regexp's $1 expansion).
type normalizer struct {
	re   *regexp.Regexp
	with string
}

// NewTranscript returns a transcript that replaces each old of the
// old, new pairs with its new.
func NewTranscript(oldnew ...string) *Transcript {
	return &Transcript{norm: strings.NewReplacer(oldnew...)}
}

// SetNames makes tr replace each old of the old, new pairs with its new
// from now on, instead of the pairs it had (a new temporary directory
// for each command line).
func (tr *Transcript) SetNames(oldnew ...string) { tr.norm = strings.NewReplacer(oldnew...) }

// machineFacts are the parts of messages that depend on the machine
// the tests run on: its memory, its cores.
var machineFacts = []normalizer{
	{regexp.MustCompile(`--real runs at most \d+ ranks here \(4 per core of this machine's \d+, at least 8\)`), "--real runs at most N ranks here (4 per core of this machine's CORES, at least 8)"},
}

// Add records "$ datahelix ARGS" and out, with the machine's facts
// replaced too.
func (tr *Transcript) Add(args []string, out string) { tr.AddAs("datahelix", args, out) }

// AddJob records "$ mpirun -np NP datahelix ARGS" and out, a job's
// output, as Add does.
func (tr *Transcript) AddJob(np int, args []string, out string) {
	tr.AddAs(fmt.Sprintf("mpirun -np %d datahelix", np), args, out)
}

// AddAs records "$ CMD ARGS" and out, as Add does.
func (tr *Transcript) AddAs(cmd string, args []string, out string) {
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

// Replace makes tr replace what expr matches in commands' output with
// with (a time, a count that depends on the machine), and returns tr.
func (tr *Transcript) Replace(expr, with string) *Transcript {
	tr.res = append(tr.res, normalizer{regexp.MustCompile(expr), with})
	return tr
}

// Run runs args with main and records standard output, then standard
// error's lines marked "2> ", then the exit status if not 0. It returns
// the exit status and both outputs.
func (tr *Transcript) Run(main MainFunc, args ...string) (code int, stdout, stderr string) {
	code, stdout, stderr = main(args...)
	tr.AddOutputs(args, code, stdout, stderr)
	return code, stdout, stderr
}

// AddOutputs records args with a command's exit status and outputs, as
// Run does.
func (tr *Transcript) AddOutputs(args []string, code int, stdout, stderr string) {
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
	tr.Add(args, b.String())
}

func (tr *Transcript) String() string { return tr.b.String() }
