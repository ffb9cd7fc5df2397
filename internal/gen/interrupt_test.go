package gen

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// readShards returns the contents of dir's .tar files by name.
func readShards(t *testing.T, dir string) map[string]string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.tar"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(p)] = string(b)
	}
	return out
}

// textConfig is a text dataset of 4 shards of 4 samples: text needs no
// ffmpeg (any binary does for the look-up), and one worker renders the
// samples one after the other, in key order.
func textConfig(out string, seed uint64) Config {
	return Config{Preset: "text", Samples: 16, Shards: 4, Out: out, Seed: seed, Workers: 1, FFmpeg: "/bin/true"}
}

// cancelAfter returns a context cancelled when Progress reports done
// samples, and cfg's Progress doing it.
func cancelAfter(cfg *Config, done int) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cfg.Progress = func(d, _ int) {
		if d == done {
			cancel()
		}
	}
	return ctx
}

// TestInterruptedGenerateKeepsOldDataset interrupts a generation over an
// existing dataset after its first shard is complete (5 samples of 16,
// one worker): the directory must hold the old dataset, every shard as
// it was, and no scratch directory, not a new shard 0 beside old shards
// 1-3 that reuse its keys.
func TestInterruptedGenerateKeepsOldDataset(t *testing.T) {
	dir := t.TempDir()
	if _, err := Generate(context.Background(), textConfig(dir, 1)); err != nil {
		t.Fatal(err)
	}
	before := readShards(t, dir)
	if len(before) != 4 {
		t.Fatalf("first generation wrote %d shards, want 4", len(before))
	}
	cfg := textConfig(dir, 7)
	ctx := cancelAfter(&cfg, 5)
	if _, err := Generate(ctx, cfg); !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted Generate: got %v, want context.Canceled", err)
	}
	after := readShards(t, dir)
	for name, b := range before {
		if after[name] != b {
			t.Errorf("%s changed by the interrupted generation", name)
		}
	}
	if len(after) != len(before) {
		t.Errorf("directory holds %d shards after the interruption, want the old %d", len(after), len(before))
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".gen-*")); len(left) != 0 {
		t.Errorf("scratch directories left behind: %v", left)
	}
	// Run to the end, the same generation replaces every shard.
	cfg.Progress = nil
	if _, err := Generate(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	for name, b := range readShards(t, dir) {
		if before[name] == b {
			t.Errorf("%s not replaced by a complete generation with another seed", name)
		}
	}
}

// TestFailedGenerateLeavesNoDirectory checks that a generation into a
// new directory that stops, before any shard or after some, leaves no
// shard and removes the directories it created, but not one that
// existed before.
func TestFailedGenerateLeavesNoDirectory(t *testing.T) {
	for _, done := range []int{1, 5} {
		root := t.TempDir()
		out := filepath.Join(root, "new", "dataset")
		cfg := textConfig(out, 1)
		ctx := cancelAfter(&cfg, done)
		if _, err := Generate(ctx, cfg); !errors.Is(err, context.Canceled) {
			t.Fatalf("stopped after %d samples: got %v, want context.Canceled", done, err)
		}
		if left, _ := os.ReadDir(root); len(left) != 0 {
			t.Errorf("stopped after %d samples: %s holds %v, want the directories Generate made removed", done, root, left)
		}
		// An existing, empty output directory stays, empty.
		cfg = textConfig(root, 1)
		ctx = cancelAfter(&cfg, done)
		if _, err := Generate(ctx, cfg); !errors.Is(err, context.Canceled) {
			t.Fatalf("stopped after %d samples: got %v, want context.Canceled", done, err)
		}
		if left, err := os.ReadDir(root); err != nil || len(left) != 0 {
			t.Errorf("stopped after %d samples: existing %s holds %v (%v), want it kept, empty", done, root, left, err)
		}
	}
}

// TestConfigBounds checks that counts no machine could generate and
// scales beyond the encoders' limits, or not numbers, are refused
// before any work, naming the value.
func TestConfigBounds(t *testing.T) {
	ok := Config{Preset: "laion", Samples: 4, Shards: 2, Out: "x"}
	for _, tt := range []struct {
		change func(*Config)
		want   string // "" accepted
	}{
		{func(c *Config) {}, ""},
		{func(c *Config) { c.Samples, c.Shards = MaxSamples, MaxShards }, ""},
		{func(c *Config) { c.SizeScale, c.DurationScale = MaxSizeScale, MaxDurationScale }, ""},
		{func(c *Config) { c.Samples = MaxSamples + 1 }, "10000001 samples: want at most 10000000"},
		{func(c *Config) { c.Samples = 99999999999 }, "99999999999 samples"},
		{func(c *Config) { c.Samples, c.Shards = MaxSamples, MaxShards+1 }, "100001 shards: want at most 100000"},
		{func(c *Config) { c.SizeScale = math.NaN() }, "size scale NaN"},
		{func(c *Config) { c.SizeScale = math.Inf(1) }, "size scale +Inf"},
		{func(c *Config) { c.SizeScale = 100 }, "size scale 100: want a number in 0..2"},
		{func(c *Config) { c.SizeScale = MaxSizeScale + 0.01 }, "size scale 2.01"},
		{func(c *Config) { c.SizeScale = -1 }, "size scale -1"},
		{func(c *Config) { c.DurationScale = math.NaN() }, "duration scale NaN"},
		{func(c *Config) { c.DurationScale = math.Inf(1) }, "duration scale +Inf"},
		{func(c *Config) { c.DurationScale = math.Inf(-1) }, "duration scale -Inf"},
		{func(c *Config) { c.DurationScale = 3601 }, "duration scale 3601: want a number in 0..3600"},
	} {
		c := ok
		tt.change(&c)
		err := c.validate()
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%+v: got %v, want it accepted", c, err)
		case tt.want != "" && (!errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%+v: got %v, want ErrConfig with %q", c, err, tt.want)
		}
	}
	// Generate refuses before it makes anything, or looks for ffmpeg.
	out := filepath.Join(t.TempDir(), "out")
	_, err := Generate(context.Background(), Config{Preset: "text", Samples: MaxSamples + 1, Out: out, Shards: 1, FFmpeg: "/nonexistent/ffmpeg"})
	if !errors.Is(err, ErrConfig) {
		t.Errorf("Generate of %d samples: got %v, want ErrConfig", MaxSamples+1, err)
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Generate refused, but %s: %v, want it missing", out, err)
	}
}
