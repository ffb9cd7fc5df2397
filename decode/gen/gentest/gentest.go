// Package gentest gives tests small generated datasets, made once per
// machine and shared by every test binary.
package gentest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/datahelix/datahelix/decode/gen"
)

// Tiny returns the directory of a small mixed dataset: 8 source-homogeneous
// shards (kinetics-like clips, imagenet-like images, text, howto100m-like
// clips, twice) of 4 samples, pictures at 0.4x and clips at 0.3x their preset
// sizes and durations. It is generated on first use (a few seconds) into
// the system's temporary directory and reused afterwards.
func Tiny(tb testing.TB) string {
	tb.Helper()
	dir, err := TinyDir()
	if err != nil {
		tb.Fatal(err)
	}
	return dir
}

// TinyDir is Tiny for code without a testing.TB, such as examples.
func TinyDir() (string, error) {
	cfg := gen.Config{Preset: "mixed", Samples: 32, Shards: 8, Seed: 3, SizeScale: 0.4, DurationScale: 0.3}
	dir := filepath.Join(os.TempDir(), "datahelix-testdata", gen.CacheName("tiny-mixed"))
	if _, err := gen.Ensure(context.Background(), cfg, dir); err != nil {
		return "", fmt.Errorf("generate test dataset %s: %w", dir, err)
	}
	return dir, nil
}
