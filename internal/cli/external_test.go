package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestExternal: an External command runs its binary with its words and
// arguments, on the given output, and exits with its status without a
// line of its own; a missing binary is an error naming how to get it.
func TestExternal(t *testing.T) {
	t.Setenv("DH_TEST_EXT", "/bin/sh")
	// sh -c 'echo "$0 $1"; exit 3' x: the words become sh's arguments.
	c := External("-c", "", "datahelix-nonexistent", "DH_TEST_EXT")
	var out, errb bytes.Buffer
	code := Main(context.Background(), []Command{c}, []string{"-c", `echo "$0 $1"; exit 3`, "a", "b"}, &out, &errb)
	if code != 3 || out.String() != "a b\n" || errb.Len() != 0 {
		t.Errorf("exit %d, stdout %q, stderr %q; want 3, %q and nothing", code, out.String(), errb.String(), "a b\n")
	}
	t.Setenv("DH_TEST_EXT", "")
	c = External("gone", "", "datahelix-nonexistent", "DH_TEST_EXT")
	errb.Reset()
	if code := Main(context.Background(), []Command{c}, []string{"gone"}, &out, &errb); code != 1 ||
		!strings.Contains(errb.String(), "datahelix-nonexistent is not installed") || !strings.Contains(errb.String(), "DH_TEST_EXT") {
		t.Errorf("missing binary: exit %d, stderr %q", code, errb.String())
	}
}
