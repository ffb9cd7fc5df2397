package bench

import (
	"testing"

	"github.com/datahelix/datahelix/internal/cli"
	"github.com/datahelix/datahelix/internal/cli/clitest"
)

// commands are bench's commands, as the datahelix command dispatches
// them (bench exchange, an MPI job, is the launcher's).
var commands = []cli.Command{Command, PlanCommand, CalibrateCommand}

// runMain runs a command line of bench's commands as datahelix does.
var runMain = clitest.Main(commands...)

// usageLine runs args and checks that it fails as a usage error
// (clitest.UsageLine).
func usageLine(t *testing.T, args ...string) string {
	t.Helper()
	return clitest.UsageLine(t, runMain, args...)
}

// commandErr runs args as datahelix does but returns the command's error.
func commandErr(t *testing.T, args ...string) error {
	t.Helper()
	return clitest.CommandErr(t, commands, args...)
}
