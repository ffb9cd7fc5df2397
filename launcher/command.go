package launcher

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// command is one subcommand of datahelix. Each lives in its own file,
// named cmd_<name>.go, and registers itself from an init function so that
// adding a command touches no other file.
type command struct {
	name    string // as typed: "info", "run", "bench plan"
	summary string // one line for the command list
	// run executes the command with the arguments after its name. It
	// returns a usageError for bad flags or arguments.
	run func(ctx context.Context, stdout, stderr io.Writer, args []string) error
}

var commands = map[string]command{}

func register(c command) {
	if _, dup := commands[c.name]; dup {
		panic("datahelix: command registered twice: " + c.name)
	}
	commands[c.name] = c
}

// lookup finds the longest registered command name that prefixes args
// ("bench plan" before "bench") and returns it with the remaining args.
func lookup(args []string) (command, []string, bool) {
	for n := min(len(args), 2); n >= 1; n-- {
		if c, ok := commands[strings.Join(args[:n], " ")]; ok {
			return c, args[n:], true
		}
	}
	return command{}, nil, false
}

// errUsage matches every problem with the command line (usageError,
// flagError): the command prints it on one line and exits with status 2
// (exitUsage), before MPI is initialized.
var errUsage = errors.New("usage error")

// usageError is a problem with the command line that no single flag's
// value explains: an unknown command, a stray argument, two flags that
// exclude each other.
type usageError struct {
	msg   string
	cause error // what format's %w verbs wrapped, for errors.Is and errors.As; nil if none
}

func (e usageError) Error() string        { return e.msg }
func (e usageError) Unwrap() error        { return e.cause }
func (e usageError) Is(target error) bool { return target == errUsage }

// usagef returns a usageError formatted as fmt.Errorf formats, keeping
// the errors its %w verbs wrap (an outputError, a package's sentinel)
// visible to errors.Is and errors.As.
func usagef(format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	u := usageError{msg: err.Error()}
	switch err.(type) {
	case interface{ Unwrap() error }, interface{ Unwrap() []error }:
		u.cause = err
	}
	return u
}

// flagError is a usage error about one flag: the value given is out of
// range, names what does not exist, or does not suit the rest of the
// command line. It reads "bench plan: --ranks 0: want 1..4096".
type flagError struct {
	cmd    string // the command whose flag it is, when the message names it: "bench plan"
	flag   string // the flag's name, without dashes: "ranks"
	value  string // the value as given, "" for a boolean flag
	reason string // what is wrong with it, or what is wanted
}

func (e flagError) Error() string {
	s := "--" + e.flag
	if e.value != "" { // a boolean flag has none
		s += " " + e.value
	}
	s += ": " + e.reason
	if e.cmd != "" {
		s = e.cmd + ": " + s
	}
	return s
}

func (e flagError) Is(target error) bool { return target == errUsage }

// flagErrorf returns a flagError for the flag named flag of command cmd
// ("" where the message does not name the command), value as given, and
// the reason formatted from format and args.
func flagErrorf(cmd, flag string, value any, format string, args ...any) error {
	return flagError{cmd: cmd, flag: flag, value: fmt.Sprint(value), reason: fmt.Sprintf(format, args...)}
}

// subcommands lists the commands one word below name ("bench plan"
// under "bench") in name order.
func subcommands(name string) []command {
	var out []command
	for _, c := range sortedCommands() {
		if rest, ok := strings.CutPrefix(c.name, name+" "); ok && !strings.Contains(rest, " ") {
			out = append(out, c)
		}
	}
	return out
}

// newFlags returns a flag set for a subcommand that reports errors instead
// of exiting and prints its usage only when asked for with -h, followed
// by the command's own subcommands if it has any.
func newFlags(name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet("datahelix "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "usage: datahelix %s %s\n\nflags:\n", name, synopsis)
		fs.PrintDefaults()
		if subs := subcommands(name); len(subs) > 0 {
			fmt.Fprintf(w, "\nsubcommands (datahelix %s NAME -h shows their flags):\n", name)
			for _, c := range subs {
				fmt.Fprintf(w, "  %-10s %s\n", strings.TrimPrefix(c.name, name+" "), c.summary)
			}
		}
	}
	return fs
}

// parseFlags parses args into fs, turning flag errors into usage errors
// and -h into errHelp (which the caller reports as success after printing
// the usage to stdout).
func parseFlags(fs *flag.FlagSet, args []string, stdout io.Writer) error {
	return parseFlagsHint(fs, args, stdout, nil)
}

// parseFlagsHint is parseFlags for a command that can say what a stray
// argument was meant to be: hint, given the arguments left after the
// flags, returns a usage message, or "" to refuse them as usual.
//
// For every command it says what went wrong in two common slips: a value
// given to a boolean flag after a space ("--pin false", where "false" is
// an argument: it asks for --pin=false), and a duration without a unit
// ("--stall-timeout 5").
func parseFlagsHint(fs *flag.FlagSet, args []string, stdout io.Writer, hint func(rest []string) string) error {
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
			return errHelp
		}
		if badDuration.flag != "" {
			return flagErrorf(name, badDuration.flag, badDuration.value, "want a duration such as 30s or 10m (see %s -h)", fs.Name())
		}
		return usagef("%s: %v (see %s -h)", name, err, fs.Name())
	}
	if fs.NArg() > 0 {
		if msg := boolValueHint(fs, args); msg != "" {
			return usagef("%s: %s (see %s -h)", name, msg, fs.Name())
		}
		if hint != nil {
			if msg := hint(fs.Args()); msg != "" {
				return usagef("%s", msg)
			}
		}
		subs := subcommands(name)
		if len(subs) == 0 {
			return usagef("%s: unexpected argument %q (see %s -h)", name, fs.Arg(0), fs.Name())
		}
		names := make([]string, len(subs))
		for i, c := range subs {
			names[i] = strings.TrimPrefix(c.name, name+" ")
		}
		if slices.Contains(names, fs.Arg(0)) {
			return usagef("%s: the subcommand %s comes before the flags: datahelix %s %s [flags]", name, fs.Arg(0), name, fs.Arg(0))
		}
		return usagef("%s: unknown subcommand %q (have %s; see %s -h)", name, fs.Arg(0), strings.Join(names, ", "), fs.Name())
	}
	return nil
}

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
	if _, auto := f.Value.(*autoBool); err != nil && !(auto && value == "auto") {
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

// errHelp reports that help was printed and nothing else is to be done.
var errHelp = fmt.Errorf("help requested")

// sortedCommands lists the commands in name order for the help text.
func sortedCommands() []command {
	out := make([]command, 0, len(commands))
	for _, c := range commands {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// setFlags returns those of names that were given on the command line,
// in the order of names.
func setFlags(fs *flag.FlagSet, names []string) []string {
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
