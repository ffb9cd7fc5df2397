// Package cli is the plumbing the datahelix commands share: the
// command type and the dispatch of a command line to one (Main), flag
// sets that report usage errors instead of exiting, the exit status of
// each class of failure, the output files a command checks before its
// work, and progress on a terminal. The launcher's dispatch table lists
// the commands; their bodies live beside what they drive.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
)

// Command is one subcommand of datahelix.
type Command struct {
	Name    string // as typed: "info", "run", "bench plan"
	Summary string // one line for the command list
	// Run executes the command with the arguments after its name. It
	// returns a usage error (Usagef, FlagErrorf) for bad flags or
	// arguments.
	Run func(ctx context.Context, stdout, stderr io.Writer, args []string) error
}

// Main runs the command line args with the commands cmds and returns
// the process exit code: 0 on success, 2 for a usage error (reported
// before MPI starts), 128+N when signal N (SIGINT, SIGTERM) cancelled ctx
// with an InterruptedError, the status of its class for the failures
// ExitStatus knows, 1 for any other.
func Main(ctx context.Context, cmds []Command, args []string, stdout, stderr io.Writer) int {
	cmds = sorted(cmds)
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		if len(args) > 1 {
			c, rest, ok := Lookup(cmds, args[1:])
			if !ok || len(rest) > 0 {
				fmt.Fprintf(stderr, "datahelix: help: unknown command %q (run \"datahelix help\" for the list)\n", strings.Join(args[1:], " "))
				return ExitUsage
			}
			return Exit(ctx, run(ctx, cmds, c, stdout, stderr, []string{"-h"}), stderr)
		}
		printHelp(stdout, cmds)
		if len(args) == 0 {
			return ExitUsage
		}
		return ExitOK
	}
	c, rest, ok := Lookup(cmds, args)
	if !ok {
		fmt.Fprintf(stderr, "datahelix: unknown command %q (run \"datahelix help\" for the list)\n", args[0])
		return ExitUsage
	}
	return Exit(ctx, run(ctx, cmds, c, stdout, stderr, rest), stderr)
}

// Lookup finds the longest command name of cmds that prefixes args
// ("bench plan" before "bench") and returns it with the remaining args.
func Lookup(cmds []Command, args []string) (Command, []string, bool) {
	for n := min(len(args), 2); n >= 1; n-- {
		name := strings.Join(args[:n], " ")
		if i := slices.IndexFunc(cmds, func(c Command) bool { return c.Name == name }); i >= 0 {
			return cmds[i], args[n:], true
		}
	}
	return Command{}, nil, false
}

// run runs c with args. For a command with subcommands in cmds ("bench
// plan" under "bench") it lists them after the usage that -h printed,
// and says what a stray argument may have meant: one of them misspelt,
// or one given after the flags.
func run(ctx context.Context, cmds []Command, c Command, stdout, stderr io.Writer, args []string) error {
	err := c.Run(ctx, stdout, stderr, args)
	subs := subcommands(cmds, c.Name)
	if len(subs) == 0 {
		return err
	}
	var stray strayArgError
	switch {
	case errors.Is(err, ErrHelp):
		fmt.Fprintf(stdout, "\nsubcommands (datahelix %s NAME -h shows their flags):\n", c.Name)
		for _, s := range subs {
			fmt.Fprintf(stdout, "  %-10s %s\n", strings.TrimPrefix(s.Name, c.Name+" "), s.Summary)
		}
	case errors.As(err, &stray):
		names := make([]string, len(subs))
		for i, s := range subs {
			names[i] = strings.TrimPrefix(s.Name, c.Name+" ")
		}
		if slices.Contains(names, stray.arg) {
			return Usagef("%s: the subcommand %s comes before the flags: datahelix %s %s [flags]", c.Name, stray.arg, c.Name, stray.arg)
		}
		return Usagef("%s: unknown subcommand %q (have %s; see datahelix %s -h)", c.Name, stray.arg, strings.Join(names, ", "), c.Name)
	}
	return err
}

// Exit prints err on one line, unless it was reported already, and maps
// it to an exit code. An error that is only the consequence of ctx's
// cancellation is replaced by the cause, which says what stopped the
// command.
func Exit(ctx context.Context, err error, stderr io.Writer) int {
	if ce, ok := errors.AsType[childExit](err); ok {
		return ce.code // an External command's binary reported it
	}
	err = StopReason(ctx, err)
	status := ExitStatus(err)
	if status != ExitOK && (status == ExitUsage || !errors.Is(err, ErrReported)) {
		fmt.Fprintf(stderr, "datahelix: %v\n", err)
	}
	return status
}

// subcommands lists the commands of cmds one word below name ("bench
// plan" under "bench") in the order of cmds.
func subcommands(cmds []Command, name string) []Command {
	var out []Command
	for _, c := range cmds {
		if rest, ok := strings.CutPrefix(c.Name, name+" "); ok && !strings.Contains(rest, " ") {
			out = append(out, c)
		}
	}
	return out
}

// sorted returns cmds in name order, for the help text.
func sorted(cmds []Command) []Command {
	out := slices.Clone(cmds)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func printHelp(w io.Writer, cmds []Command) {
	fmt.Fprintln(w, `datahelix keeps GPUs fed in multimodal data-parallel training.
Every rank of an MPI job runs the same command, e.g.

	./mpirun.sh -np 4 datahelix run
	srun datahelix run --data /scratch/shards

commands:`)
	width := 0
	for _, c := range cmds {
		width = max(width, len(c.Name))
	}
	for _, c := range cmds {
		fmt.Fprintf(w, "  %-*s  %s\n", width, c.Name, c.Summary)
	}
	fmt.Fprintln(w, `
"datahelix help COMMAND" or "datahelix COMMAND -h" shows a command's flags.`)
}
