// Package gentest gives tests small generated datasets, made once per
// machine and shared by every test binary.
package gentest

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/datahelix/datahelix/internal/gen"
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

// WriteFirstSample writes the members of the first sample of the tar
// shard src (those sharing the first member's key) as the shard dst: a
// shard cut short at a member boundary, as a truncated copy would be.
func WriteFirstSample(tb testing.TB, src, dst string) {
	tb.Helper()
	in, err := os.Open(src)
	if err != nil {
		tb.Fatal(err)
	}
	defer in.Close()
	var buf bytes.Buffer
	tr, tw := tar.NewReader(in), tar.NewWriter(&buf)
	key := ""
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			tb.Fatal(err)
		}
		k, _, _ := strings.Cut(h.Name, ".")
		if key != "" && k != key {
			break
		}
		key = k
		if err := tw.WriteHeader(h); err != nil {
			tb.Fatal(err)
		}
		if _, err := io.Copy(tw, tr); err != nil {
			tb.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(dst, buf.Bytes(), 0o644); err != nil {
		tb.Fatal(err)
	}
}
