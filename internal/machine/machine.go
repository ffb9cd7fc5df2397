package machine

import (
	"bufio"
	"context"
	"fmt"
	"hash/fnv"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"time"
)

// Machine says where a report or a calibration was made.
type Machine struct {
	Host      string `json:"host"`
	CPU       string `json:"cpu"`
	Cores     int    `json:"cores"`
	OS        string `json:"os"`
	Arch      string `json:"arch"`
	GoVersion string `json:"go"`
	// Commit is the commit the binary was built from when the build
	// stamped it (buildCommit, as mpirun.sh does, or Go's vcs.revision),
	// else `git rev-parse HEAD` of the repository holding the executable
	// or the working directory ("unknown" outside one); Dirty is set when
	// the build, or that repository, had uncommitted changes to tracked
	// files (gitDirty).
	Commit string `json:"commit"`
	Dirty  bool   `json:"dirty"`
	// CommitSource says where Commit came from: "binary" (stamped at
	// build) or "repo" (the repository's HEAD at run time, which may not
	// be what the binary was built from); "" when unknown.
	CommitSource string `json:"commit_source,omitempty"`
	// RepoCommit is the repository's HEAD at run time when it differs
	// from the binary's stamped commit: the tree was changed after the
	// build.
	RepoCommit string `json:"repo_commit,omitempty"`
	// DecodeCommit is the last commit that changed decode/: the decoder
	// a calibration measured.
	DecodeCommit string `json:"decode_commit"`
}

// This describes the machine the process runs on and the commit
// of the code: the revision the binary was built from when the build
// stamped it (buildCommit) or Go recorded it, else that of the repository
// holding the executable or the working directory (commitOf).
func This(ctx context.Context) Machine {
	host, _ := os.Hostname()
	m := Machine{Host: host, CPU: cpuModel(), Cores: runtime.NumCPU(), OS: runtime.GOOS, Arch: runtime.GOARCH,
		GoVersion: runtime.Version(), Commit: "unknown", DecodeCommit: "unknown"}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	// One repository answers every question: the executable's (a binary
	// built in the repository, as mpirun.sh does), else the working
	// directory's (go test, go run).
	dir := ""
	cands := []string{"."}
	if exe, err := os.Executable(); err == nil {
		cands = []string{filepath.Dir(exe), "."}
	}
	for _, d := range cands {
		if err := exec.CommandContext(ctx, "git", "-C", d, "rev-parse", "--git-dir").Run(); err == nil {
			dir = d
			break
		}
	}
	git := func(args ...string) (string, bool) {
		if dir == "" {
			return "", false
		}
		out, err := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...).Output()
		return strings.TrimSpace(string(out)), err == nil
	}
	var vcsRev string
	vcsDirty := false
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, kv := range bi.Settings {
			switch kv.Key {
			case "vcs.revision":
				vcsRev = kv.Value
			case "vcs.modified":
				vcsDirty = kv.Value == "true"
			}
		}
	}
	head, _ := git("rev-parse", "HEAD")
	m.Commit, m.Dirty, m.CommitSource, m.RepoCommit = commitOf(buildCommit, vcsRev, vcsDirty, head, func() bool { return gitDirty(git) })
	// The last change to decode/ as of the commit that ran.
	rev := "HEAD"
	if m.Commit != "unknown" {
		rev = m.Commit
	}
	if c, ok := git("log", "-1", "--format=%H", rev, "--", ":/decode"); ok && c != "" {
		m.DecodeCommit = c
	}
	return m
}

// buildCommit is the commit the binary was built from, stamped by the
// build (mpirun.sh):
//
//	go build -ldflags "-X github.com/datahelix/datahelix/internal/machine.buildCommit=$(git rev-parse HEAD)" ./cmd/datahelix
//
// with DirtySuffix appended when the tree had uncommitted changes to
// tracked files; empty when the build did not stamp it (or had no git).
var buildCommit string

// DirtySuffix marks a stamped buildCommit built from a tree with
// uncommitted changes.
const DirtySuffix = "-dirty"

// commitOf picks the commit a report records: the stamped one (stamp,
// with DirtySuffix when dirty), else Go's vcs.revision (vcsRev and
// vcsDirty), both "binary"; else the repository's HEAD at run time (head,
// with repoDirty called to ask), "repo"; else "unknown". repoCommit is
// head when it differs from a binary's commit.
func commitOf(stamp, vcsRev string, vcsDirty bool, head string, repoDirty func() bool) (commit string, dirty bool, source, repoCommit string) {
	switch {
	case stamp != "":
		commit, dirty = strings.CutSuffix(stamp, DirtySuffix)
		source = "binary"
	case vcsRev != "":
		commit, dirty, source = vcsRev, vcsDirty, "binary"
	case head != "":
		return head, repoDirty(), "repo", ""
	default:
		return "unknown", false, "", ""
	}
	if head != "" && head != commit {
		repoCommit = head
	}
	return commit, dirty, source, repoCommit
}

// gitDirty reports whether the repository git runs in has changes to
// tracked files, staged or not. Untracked files do not count: the report
// of `datahelix bench > report.txt` run in the repository would otherwise
// mark itself, as the shell creates report.txt first. (Go's vcs.modified,
// used when the binary carries it, counts them as of the build.)
func gitDirty(git func(args ...string) (string, bool)) bool {
	st, ok := git("status", "--porcelain", "--untracked-files=no")
	return ok && st != ""
}

// Key identifies the hardware and software a calibration holds for: the
// host, CPU and core count hashed, with the decoder's commit (a
// calibration measured on other hardware or with another decoder is not
// this one's; commits that leave decode/ alone keep it).
func (m Machine) Key() string {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s\x00%s\x00%d\x00%s\x00%s", m.Host, m.CPU, m.Cores, m.OS, m.Arch)
	commit := m.DecodeCommit
	if len(commit) > 12 {
		commit = commit[:12]
	}
	return fmt.Sprintf("%016x-%s", h.Sum64(), commit)
}

// String is a one-line description.
func (m Machine) String() string {
	dirty := ""
	if m.Dirty {
		dirty = " (uncommitted changes)"
	}
	if m.RepoCommit != "" {
		dirty += fmt.Sprintf(" (the binary's; the repository is now at %.12s)", m.RepoCommit)
	}
	return fmt.Sprintf("%s: %s, %d cores, %s/%s, %s, commit %s%s", m.Host, m.CPU, m.Cores, m.OS, m.Arch, m.GoVersion, m.Commit, dirty)
}

// cpuModel reads the CPU's model name on Linux.
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}
