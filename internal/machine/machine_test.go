package machine

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestGitDirty checks that an untracked file (a report redirected into
// the repository) does not mark it dirty, and a change to a tracked file
// does, staged or not.
func TestGitDirty(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	dir := t.TempDir()
	git := func(args ...string) (string, bool) {
		cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_SYSTEM=/dev/null",
			"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
		out, err := cmd.CombinedOutput()
		return strings.TrimSpace(string(out)), err == nil
	}
	write := func(name, data string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("tracked.go", "package x\n")
	for _, args := range [][]string{{"init", "-q"}, {"add", "tracked.go"}, {"commit", "-q", "-m", "x"}} {
		if out, ok := git(args...); !ok {
			t.Fatalf("git %v: %s", args, out)
		}
	}
	steps := []struct {
		name string
		do   func()
		want bool
	}{
		{"clean", func() {}, false},
		{"untracked report", func() { write("report.txt", "datahelix bench ...\n") }, false},
		{"tracked change", func() { write("tracked.go", "package y\n") }, true},
		{"staged change", func() { git("add", "tracked.go") }, true},
	}
	for _, s := range steps {
		s.do()
		if got := gitDirty(git); got != s.want {
			t.Errorf("%s: dirty %v, want %v", s.name, got, s.want)
		}
	}
}

// TestCommitOf checks which commit a report records: the one stamped
// into the binary first (saying when the repository has moved on since),
// then Go's, then the repository's HEAD at run time.
func TestCommitOf(t *testing.T) {
	const a, b = "aaaa", "bbbb"
	asked := false
	repoDirty := func() bool { asked = true; return true }
	for _, tt := range []struct {
		name, stamp, vcs, head        string
		wantCommit, wantSrc, wantRepo string
		wantDirty                     bool
	}{
		{"stamped, repository at it", a, "", a, a, "binary", "", false},
		{"stamped dirty", a + DirtySuffix, "", a, a, "binary", "", true},
		{"stamped, repository moved on", a, "", b, a, "binary", b, false},
		{"stamped, no repository", a, "", "", a, "binary", "", false},
		{"Go's vcs stamp", "", a, b, a, "binary", b, false},
		{"repository only", "", "", b, b, "repo", "", true},
		{"nothing", "", "", "", "unknown", "", "", false},
	} {
		asked = false
		c, d, src, repo := commitOf(tt.stamp, tt.vcs, false, tt.head, repoDirty)
		if c != tt.wantCommit || d != tt.wantDirty || src != tt.wantSrc || repo != tt.wantRepo {
			t.Errorf("%s: got %q dirty %v source %q repo %q, want %q %v %q %q", tt.name, c, d, src, repo, tt.wantCommit, tt.wantDirty, tt.wantSrc, tt.wantRepo)
		}
		if asked != (tt.wantSrc == "repo") {
			t.Errorf("%s: asked the repository whether it is dirty: %v", tt.name, asked)
		}
	}
}
