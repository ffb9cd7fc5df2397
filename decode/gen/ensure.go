package gen

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// doneFile marks a directory that Ensure finished generating.
const doneFile = "DONE"

// Ensure makes dir hold the dataset cfg describes, generating it only if
// it is not there yet (cfg.Out is ignored). Generation goes to a
// temporary sibling directory renamed into place when complete, so an
// interrupted run or several processes generating at once never leave a
// partial dataset behind. It reports whether it generated.
func Ensure(ctx context.Context, cfg Config, dir string) (bool, error) {
	if _, err := os.Stat(filepath.Join(dir, doneFile)); err == nil {
		return false, nil
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return false, fmt.Errorf("gen: %w", err)
	}
	tmp := fmt.Sprintf("%s.tmp-%d", dir, os.Getpid())
	os.RemoveAll(tmp)
	cfg.Out = tmp
	if _, err := Generate(ctx, cfg); err != nil {
		os.RemoveAll(tmp)
		return false, err
	}
	stamp := []byte(time.Now().UTC().Format(time.RFC3339) + "\n")
	if err := os.WriteFile(filepath.Join(tmp, doneFile), stamp, 0o644); err != nil {
		os.RemoveAll(tmp)
		return false, fmt.Errorf("gen: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		os.RemoveAll(tmp)
		if _, serr := os.Stat(filepath.Join(dir, doneFile)); serr == nil {
			return false, nil // another process finished first
		}
		return false, fmt.Errorf("gen: install %s: %w", dir, err)
	}
	return true, nil
}
