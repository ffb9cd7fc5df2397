package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// ErrUsage matches every problem with the command line (usageError,
// FlagError): the command prints it on one line and exits with status 2
// (ExitUsage), before MPI is initialized.
var ErrUsage = errors.New("usage error")

// usageError is a problem with the command line that no single flag's
// value explains: an unknown command, a stray argument, two flags that
// exclude each other.
type usageError struct {
	msg   string
	cause error // what format's %w verbs wrapped, for errors.Is and errors.As; nil if none
}

func (e usageError) Error() string        { return e.msg }
func (e usageError) Unwrap() error        { return e.cause }
func (e usageError) Is(target error) bool { return target == ErrUsage }

// Usagef returns a usageError formatted as fmt.Errorf formats, keeping
// the errors its %w verbs wrap (an OutputError, a package's sentinel)
// visible to errors.Is and errors.As.
func Usagef(format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	u := usageError{msg: err.Error()}
	switch err.(type) {
	case interface{ Unwrap() error }, interface{ Unwrap() []error }:
		u.cause = err
	}
	return u
}

// FlagError is a usage error about one flag: the value given is out of
// range, names what does not exist, or does not suit the rest of the
// command line. It reads "bench plan: --ranks 0: want 1..4096".
type FlagError struct {
	Cmd    string // the command whose flag it is, when the message names it: "bench plan"
	Flag   string // the flag's name, without dashes: "ranks"
	Value  string // the value as given, "" for a boolean flag
	Reason string // what is wrong with it, or what is wanted
}

func (e FlagError) Error() string {
	s := "--" + e.Flag
	if e.Value != "" { // a boolean flag has none
		s += " " + e.Value
	}
	s += ": " + e.Reason
	if e.Cmd != "" {
		s = e.Cmd + ": " + s
	}
	return s
}

func (e FlagError) Is(target error) bool { return target == ErrUsage }

// FlagErrorf returns a FlagError for the flag named flag of command cmd
// ("" where the message does not name the command), value as given, and
// the reason formatted from format and args.
func FlagErrorf(cmd, flag string, value any, format string, args ...any) error {
	return FlagError{Cmd: cmd, Flag: flag, Value: fmt.Sprint(value), Reason: fmt.Sprintf(format, args...)}
}

// NewFlags returns a flag set for a command that reports errors instead
// of exiting and prints its usage only when asked for with -h (Main
// follows it with the command's own subcommands if it has any).
func NewFlags(name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet("datahelix "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: datahelix %s %s\n\nflags:\n", name, synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// ParseFlags parses args into fs, turning flag errors into usage errors
// and -h into ErrHelp (which the caller reports as success after printing
// the usage to stdout).
func ParseFlags(fs *flag.FlagSet, args []string, stdout io.Writer) error {
	return ParseFlagsHint(fs, args, stdout, nil)
}

// ParseFlagsHint is ParseFlags for a command that can say what a stray
// argument was meant to be: hint, given the arguments left after the
// flags, returns a usage message, or "" to refuse them as usual.
//
// For every command it says what went wrong in two common slips: a value
// given to a boolean flag after a space ("--pin false", where "false" is
// an argument: it asks for --pin=false), and a duration without a unit
// ("--stall-timeout 5").
func ParseFlagsHint(fs *flag.FlagSet, args []string, stdout io.Writer, hint func(rest []string) string) error {
	name := strings.TrimPrefix(fs.Name(), "datahelix ")
	var badDuration struct{ flag, value string } // a duration that did not parse
	restore := wrapDurations(fs, func(flagName, value string) {
		badDuration.flag, badDuration.value = flagName, value
	})
	err := fs.Parse(args)
	restore()
	if err != nil {
		if err == flag.ErrHelp {
			fs.SetOutput(stdout)
			fs.Usage()
			return ErrHelp
		}
		if badDuration.flag != "" {
			return FlagErrorf(name, badDuration.flag, badDuration.value, "want a duration such as 30s or 10m (see %s -h)", fs.Name())
		}
		return Usagef("%s: %v (see %s -h)", name, err, fs.Name())
	}
	if fs.NArg() > 0 {
		if msg := boolValueHint(fs, args); msg != "" {
			return Usagef("%s: %s (see %s -h)", name, msg, fs.Name())
		}
		if hint != nil {
			if msg := hint(fs.Args()); msg != "" {
				return Usagef("%s", msg)
			}
		}
		return strayArgError{cmd: name, arg: fs.Arg(0)}
	}
	return nil
}

// strayArgError is an argument left after a command's flags that no hint
// explained. It reads "info: unexpected argument "x" (see datahelix info
// -h)"; Main says more for a command with subcommands, which the
// argument may have meant.
type strayArgError struct{ cmd, arg string }

func (e strayArgError) Error() string {
	return fmt.Sprintf("%s: unexpected argument %q (see datahelix %s -h)", e.cmd, e.arg, e.cmd)
}

func (e strayArgError) Is(target error) bool { return target == ErrUsage }

// boolValueHint says what to write instead when the first argument left
// after the flags is a value of the boolean flag just before it
// ("--pin false"), or returns "".
func boolValueHint(fs *flag.FlagSet, args []string) string {
	i := len(args) - fs.NArg() - 1
	if i < 0 {
		return ""
	}
	prev, value := args[i], fs.Arg(0)
	if !strings.HasPrefix(prev, "-") || strings.Contains(prev, "=") {
		return ""
	}
	f := fs.Lookup(strings.TrimLeft(prev, "-"))
	if f == nil {
		return ""
	}
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	if !ok || !b.IsBoolFlag() {
		return ""
	}
	_, err := strconv.ParseBool(value)
	if _, auto := f.Value.(*AutoBool); err != nil && !(auto && value == "auto") {
		return ""
	}
	return fmt.Sprintf("%q after %s is an argument, not the flag's value: write %s=%s", value, prev, prev, value)
}

// wrapDurations makes every duration flag of fs call failed with the
// flag's name and the value it could not read, until the returned
// function restores the flags as they were.
func wrapDurations(fs *flag.FlagSet, failed func(flagName, value string)) (restore func()) {
	type orig struct {
		f *flag.Flag
		v flag.Value
	}
	var wrapped []orig
	fs.VisitAll(func(f *flag.Flag) {
		g, ok := f.Value.(flag.Getter)
		if !ok {
			return
		}
		if _, ok := g.Get().(time.Duration); !ok {
			return
		}
		wrapped = append(wrapped, orig{f, f.Value})
		f.Value = durationValue{Getter: g, failed: func(v string) { failed(f.Name, v) }}
	})
	return func() {
		for _, o := range wrapped {
			o.f.Value = o.v
		}
	}
}

// durationValue is a duration flag that reports a value it cannot read.
type durationValue struct {
	flag.Getter
	failed func(value string)
}

func (d durationValue) Set(v string) error {
	err := d.Getter.Set(v)
	if err != nil {
		d.failed(v)
	}
	return err
}

// ErrHelp reports that help was printed and nothing else is to be done.
var ErrHelp = fmt.Errorf("help requested")

// SetFlags returns those of names that were given on the command line,
// in the order of names.
func SetFlags(fs *flag.FlagSet, names []string) []string {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var set []string
	for _, n := range names {
		if given[n] {
			set = append(set, n)
		}
	}
	return set
}
