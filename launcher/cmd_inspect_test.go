package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/datahelix/datahelix/decode/gen/gentest"
)

// TestInspectFailsBeforeTable checks that a missing path or a truncated
// shard fails without printing the table's header first.
func TestInspectFailsBeforeTable(t *testing.T) {
	data := gentest.Tiny(t)
	shards, _ := filepath.Glob(filepath.Join(data, "*.tar"))
	raw, err := os.ReadFile(shards[0])
	if err != nil {
		t.Fatal(err)
	}
	trunc := filepath.Join(t.TempDir(), "cut.tar")
	if err := os.WriteFile(trunc, raw[:len(raw)/3], 0o644); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/nonexistent/shards", trunc} {
		code, stdout, stderr := runMain("inspect", "--cache", t.TempDir(), path)
		if code != 1 || stdout != "" || !strings.Contains(stderr, filepath.Base(path)) {
			t.Errorf("inspect %s: got exit %d, stdout %q, stderr %q; want exit 1, no output, an error naming it", path, code, stdout, stderr)
		}
	}
	code, stdout, _ := runMain("inspect", "--cache", t.TempDir(), shards[0])
	if code != 0 || !strings.HasPrefix(stdout, "key") {
		t.Errorf("inspect %s: got exit %d, stdout %q; want the table", shards[0], code, stdout)
	}
}

// TestInspectShapeBounds checks that inspect bounds --frames and --size
// as run does: an estimate for a shape run refuses would mislead.
func TestInspectShapeBounds(t *testing.T) {
	for _, args := range [][]string{{"--frames", "100000"}, {"--size", "99999999"}, {"--size", "4"}} {
		code, stdout, stderr := runMain(append(append([]string{"inspect"}, args...), "x.tar")...)
		if code != 2 || stdout != "" || !strings.Contains(stderr, args[0]+" "+args[1]+": want ") {
			t.Errorf("inspect %v: exit %d, stdout %q, stderr %q; want exit 2 naming the flag and its bounds", args, code, stdout, stderr)
		}
	}
}
