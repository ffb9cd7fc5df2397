package launcher

import (
	"strings"
	"testing"
)

// TestBenchHelpMetavars checks bench -h for metavars taken from the middle
// of a sentence and for a second "(default ...)" after the flag package's.
func TestBenchHelpMetavars(t *testing.T) {
	_, stdout, _ := runMain("bench", "-h")
	for _, bad := range []string{"-parallel once", "(default 4 with --real) (default", "(default 40 with --real) (default"} {
		if strings.Contains(stdout, bad) {
			t.Errorf("bench -h contains %q:\n%s", bad, stdout)
		}
	}
}

func TestBenchExchangeRanks(t *testing.T) {
	code, _, stderr := runMain("bench", "exchange", "--ranks", "3")
	if code != 2 || !strings.Contains(stderr, "needs 2 ranks") {
		t.Errorf("bench exchange --ranks 3: got exit %d, stderr %q; want 2 and a line saying it needs 2 ranks", code, stderr)
	}
}
