package launcher

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"

	"github.com/datahelix/datahelix/internal/shardindex"
	"github.com/datahelix/datahelix/python"
)

// releaseVersion is datahelix's version; the Python client that comes
// with it says the same (python/datahelix/__init__.py).
const releaseVersion = "0.1.0"

// version names this binary as the bridge's WELCOME and REFUSE do:
// "datahelix 0.1.0", with the commit Go recorded when there is one.
func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				return fmt.Sprintf("datahelix %s (%s)", releaseVersion, s.Value[:12])
			}
		}
	}
	return "datahelix " + releaseVersion
}

// pythonPath is the PYTHONPATH a trainer gets: the directory holding the
// datahelix package first, then the caller's PYTHONPATH. The package is
// the repository's python/ beside the binary (.bin/datahelix, as
// mpirun.sh builds it), else a copy of the embedded one, written once per
// content into the cache directory.
func pythonPath() (string, error) {
	dir, err := clientDir()
	if err != nil {
		return "", err
	}
	if old := os.Getenv("PYTHONPATH"); old != "" {
		return dir + string(os.PathListSeparator) + old, nil
	}
	return dir, nil
}

func clientDir() (string, error) {
	if exe, err := os.Executable(); err == nil {
		dir := filepath.Join(filepath.Dir(filepath.Dir(exe)), "python")
		if _, err := os.Stat(filepath.Join(dir, "datahelix", "__init__.py")); err == nil {
			return dir, nil
		}
	}
	// The embedded copy, named by its content so that a binary never
	// uses another binary's client.
	h := sha256.New()
	var files []string
	fs.WalkDir(python.Package, ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, p)
			b, _ := python.Package.ReadFile(p)
			fmt.Fprintf(h, "%s %d\n", p, len(b))
			h.Write(b)
		}
		return nil
	})
	dir := filepath.Join(shardindex.DefaultCacheDir(), "python-"+hex.EncodeToString(h.Sum(nil))[:12])
	if _, err := os.Stat(filepath.Join(dir, "datahelix", "__init__.py")); err == nil {
		return dir, nil
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", fmt.Errorf("cannot write the Python client: %w", err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), ".python-*")
	if err != nil {
		return "", fmt.Errorf("cannot write the Python client: %w", err)
	}
	for _, p := range files {
		b, _ := python.Package.ReadFile(p)
		dst := filepath.Join(tmp, filepath.FromSlash(p))
		err := os.MkdirAll(filepath.Dir(dst), 0o755)
		if err == nil {
			err = os.WriteFile(dst, b, 0o644)
		}
		if err != nil {
			os.RemoveAll(tmp)
			return "", fmt.Errorf("cannot write the Python client: %w", err)
		}
	}
	if err := os.Rename(tmp, dir); err != nil {
		os.RemoveAll(tmp) // another rank got there first
		if _, serr := os.Stat(filepath.Join(dir, "datahelix", "__init__.py")); serr != nil {
			return "", fmt.Errorf("cannot write the Python client: %w", err)
		}
	}
	return dir, nil
}
