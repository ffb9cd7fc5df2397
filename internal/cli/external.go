package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// External is a command that lives in another binary of the project,
// binary, installed beside this one: it runs that binary with the
// command's words and its arguments, on this process's standard input
// and on stdout and stderr, and exits with its status. Its help, its
// usage errors and its output are the other binary's. The environment
// variable env, when set, names the binary's path instead (for a binary
// built elsewhere, and for tests). ctx's end sends it SIGTERM.
func External(name, summary, binary, env string) Command {
	return Command{Name: name, Summary: summary, Run: func(ctx context.Context, stdout, stderr io.Writer, args []string) error {
		path, err := FindBinary(binary, env)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		cmd := exec.Command(path, append(strings.Fields(name), args...)...)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, stdout, stderr
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		done := make(chan struct{})
		go func() {
			select {
			case <-ctx.Done():
				cmd.Process.Signal(syscall.SIGTERM)
			case <-done:
			}
		}()
		err = cmd.Wait()
		close(done)
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code := ee.ExitCode()
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				code = 128 + int(ws.Signal())
			}
			return childExit{code: code}
		}
		return err
	}}
}

// FindBinary returns the path of binary, one of the project's commands:
// env's value when set, else the file beside this executable, else
// binary on $PATH.
func FindBinary(binary, env string) (string, error) {
	if p := os.Getenv(env); p != "" {
		return p, nil
	}
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), binary)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	if p, err := exec.LookPath(binary); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("%s is not installed beside this binary or on $PATH (./mpirun.sh builds it into .bin; "+
		"go install github.com/datahelix/datahelix/cmd/%s; or set %s to its path)", binary, binary, env)
}

// childExit is an External command's exit status: the other binary has
// said what went wrong, so Exit prints nothing more.
type childExit struct{ code int }

func (e childExit) Error() string   { return fmt.Sprintf("exit status %d", e.code) }
func (e childExit) ExitStatus() int { return e.code }
