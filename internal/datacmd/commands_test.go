package datacmd

import (
	"testing"

	"github.com/datahelix/datahelix/internal/cli"
	"github.com/datahelix/datahelix/internal/cli/clitest"
)

// commands are the dataset commands, as the datahelix command
// dispatches them.
var commands = []cli.Command{Gen, Cache, Inspect, CostModel}

// runMain runs a command line of these commands as datahelix does.
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
