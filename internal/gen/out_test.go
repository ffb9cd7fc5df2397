package gen

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOutputDirectoryWithOtherShards checks that Generate refuses a
// directory holding .tar files it would not replace, before any work,
// and accepts one holding only its own shard names (a rerun).
func TestOutputDirectoryWithOtherShards(t *testing.T) {
	for _, tt := range []struct {
		name   string
		files  []string
		cfg    Config
		reject string // "": accepted; else in the error
	}{
		{"empty", nil, Config{Preset: "imagenet", Shards: 2}, ""},
		{"rerun", []string{"imagenet-000000.tar", "imagenet-000001.tar"}, Config{Preset: "imagenet", Shards: 2}, ""},
		{"more shards than before", []string{"imagenet-000000.tar"}, Config{Preset: "imagenet", Shards: 2}, ""},
		{"not a tar", []string{"README", "x.tar.gz"}, Config{Preset: "imagenet", Shards: 1}, ""},
		{"other preset", []string{"mixed-000000.tar", "mixed-000001.tar"}, Config{Preset: "text", Shards: 2},
			"holds mixed-000000.tar, mixed-000001.tar, not among the shards this command writes (text-000000.tar to text-000001.tar)"},
		{"fewer shards", []string{"text-000000.tar", "text-000001.tar"}, Config{Preset: "text", Shards: 1},
			"holds text-000001.tar, not among the shards this command writes (text-000000.tar)"},
		{"many", []string{"a.tar", "b.tar", "c.tar", "d.tar", "e.tar"}, Config{Preset: "text", Shards: 1},
			"holds a.tar, b.tar, c.tar and 2 more, not among"},
	} {
		dir := t.TempDir()
		for _, f := range tt.files {
			if err := os.WriteFile(filepath.Join(dir, f), []byte("old"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		tt.cfg.Out, tt.cfg.Samples = dir, 4
		err := checkOut(tt.cfg)
		switch {
		case tt.reject == "" && err != nil:
			t.Errorf("%s: got %v, want no error", tt.name, err)
		case tt.reject != "" && (!errors.Is(err, ErrOutInUse) || !strings.Contains(err.Error(), tt.reject) || !strings.Contains(err.Error(), dir)):
			t.Errorf("%s: got %v, want ErrOutInUse naming %s and %q", tt.name, err, dir, tt.reject)
		}
	}
	// Generate checks before it starts ffmpeg, and leaves the files be.
	dir := t.TempDir()
	old := filepath.Join(dir, "text-000000.tar")
	if err := os.WriteFile(old, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Generate(context.Background(), Config{Preset: "imagenet", Samples: 2, Shards: 1, Out: dir, FFmpeg: "/nonexistent/ffmpeg"})
	if !errors.Is(err, ErrOutInUse) {
		t.Errorf("Generate into a directory with another preset's shard: got %v, want ErrOutInUse", err)
	}
	if b, err := os.ReadFile(old); err != nil || string(b) != "old" {
		t.Errorf("the existing shard: %q, %v; want it untouched", b, err)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "*")); len(m) != 1 {
		t.Errorf("directory holds %v after the refusal, want only the old shard", m)
	}
}
