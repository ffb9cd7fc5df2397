package cli

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
)

// testCommands are a command with two subcommands and one without.
func testCommands() []Command {
	cmd := func(name string) Command {
		return Command{Name: name, Summary: "the " + name + " command", Run: func(_ context.Context, stdout, _ io.Writer, args []string) error {
			fs := NewFlags(name, "[flags]")
			n := fs.Int("n", 1, "a `number`")
			if err := ParseFlags(fs, args, stdout); err != nil {
				return err
			}
			if *n < 0 {
				return FlagErrorf(name, "n", *n, "want 0 or more")
			}
			return nil
		}}
	}
	return []Command{cmd("top"), cmd("top sub"), cmd("top other"), cmd("lone")}
}

// TestMainSubcommands checks what Main says of a command's subcommands:
// listed after its flags by -h, named when an argument after the flags
// is one of them or is none; a command without any refuses the argument.
func TestMainSubcommands(t *testing.T) {
	for _, tt := range []struct {
		args   []string
		code   int
		stdout string // a part of it
		stderr string
	}{
		{[]string{"top", "-h"}, 0, "\nsubcommands (datahelix top NAME -h shows their flags):\n  other      the top other command\n  sub        the top sub command\n", ""},
		{[]string{"help", "top"}, 0, "  sub        the top sub command\n", ""},
		{[]string{"top", "sub", "-h"}, 0, "usage: datahelix top sub [flags]\n", ""},
		{[]string{"top", "--n", "2", "sub"}, 2, "", "datahelix: top: the subcommand sub comes before the flags: datahelix top sub [flags]\n"},
		{[]string{"top", "sbu"}, 2, "", "datahelix: top: unknown subcommand \"sbu\" (have other, sub; see datahelix top -h)\n"},
		{[]string{"top", "sub", "x"}, 2, "", "datahelix: top sub: unexpected argument \"x\" (see datahelix top sub -h)\n"},
		{[]string{"lone", "x"}, 2, "", "datahelix: lone: unexpected argument \"x\" (see datahelix lone -h)\n"},
		{[]string{"lone", "--n", "-1"}, 2, "", "datahelix: lone: --n -1: want 0 or more\n"},
		{[]string{"nope"}, 2, "", "datahelix: unknown command \"nope\" (run \"datahelix help\" for the list)\n"},
		{[]string{"help", "top", "nope"}, 2, "", "datahelix: help: unknown command \"top nope\" (run \"datahelix help\" for the list)\n"},
	} {
		var stdout, stderr bytes.Buffer
		code := Main(context.Background(), testCommands(), tt.args, &stdout, &stderr)
		if code != tt.code || !strings.Contains(stdout.String(), tt.stdout) || stderr.String() != tt.stderr {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want %d, stdout with %q, stderr %q", tt.args, code, stdout.String(), stderr.String(), tt.code, tt.stdout, tt.stderr)
		}
	}
}

// TestHelpListsCommandsByName checks that the command list is in name
// order whatever the order of the table.
func TestHelpListsCommandsByName(t *testing.T) {
	var stdout bytes.Buffer
	if code := Main(context.Background(), testCommands(), []string{"help"}, &stdout, io.Discard); code != 0 {
		t.Fatalf("help: exit %d", code)
	}
	want := "  lone       the lone command\n  top        the top command\n  top other  the top other command\n  top sub    the top sub command\n"
	if !strings.Contains(stdout.String(), want) {
		t.Errorf("help:\n%s\nwant the commands in name order:\n%s", stdout.String(), want)
	}
}

// TestExitStatusClasses checks the status of each kind of error: a
// signal wins over the class it caused, and the outermost status over
// those it wraps.
func TestExitStatusClasses(t *testing.T) {
	sig := InterruptedError{Sig: 15}
	for _, tt := range []struct {
		name string
		err  error
		want int
	}{
		{"nil", nil, ExitOK},
		{"help", ErrHelp, ExitOK},
		{"usage", Usagef("bad"), ExitUsage},
		{"flag", FlagErrorf("", "n", 1, "no"), ExitUsage},
		{"class", WithStatus(ExitStall, errors.New("stalled")), ExitStall},
		{"outermost class", WithStatus(ExitPeerLost, WithStatus(ExitStall, errors.New("x"))), ExitPeerLost},
		{"signal over class", WithStatus(ExitStall, sig), 143},
		{"reported", Reported(WithStatus(ExitTrainer, errors.New("x"))), ExitTrainer},
		{"other", errors.New("x"), ExitFailure},
	} {
		if got := ExitStatus(tt.err); got != tt.want {
			t.Errorf("%s: got %d, want %d", tt.name, got, tt.want)
		}
	}
}
