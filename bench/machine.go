package bench

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
	// Commit is `git rev-parse HEAD` of the working directory ("unknown"
	// outside a repository); Dirty is set when it has uncommitted changes
	// to tracked files (gitDirty).
	Commit string `json:"commit"`
	Dirty  bool   `json:"dirty"`
	// DecodeCommit is the last commit that changed decode/: the decoder
	// a calibration measured.
	DecodeCommit string `json:"decode_commit"`
}

// ThisMachine describes the machine the process runs on and the commit
// of the code: the revision the binary was built from when Go recorded
// it, else that of the repository holding the executable or the working
// directory.
func ThisMachine(ctx context.Context) Machine {
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
	built := false
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, kv := range bi.Settings {
			switch kv.Key {
			case "vcs.revision":
				m.Commit, built = kv.Value, true
			case "vcs.modified":
				m.Dirty = kv.Value == "true"
			}
		}
	}
	if !built {
		if c, ok := git("rev-parse", "HEAD"); ok && c != "" {
			m.Commit = c
			m.Dirty = gitDirty(git)
		}
	}
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
