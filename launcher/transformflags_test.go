package launcher

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/datahelix/datahelix/internal/cli"
)

// TestTransformFlagsRefused: a transform parameter out of range is a
// usage error (exit status 2, one line naming the flag) for run, train,
// serve and decode, before any data is opened or decoded.
func TestTransformFlagsRefused(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "none") // never opened
	for _, bad := range []struct {
		args []string
		flag string
	}{
		{[]string{"--resize", "stretch"}, "--resize"},
		{[]string{"--resize", "random-crop", "--crop-scale", "0.5,0.1"}, "--crop-scale"},
		{[]string{"--resize", "random-crop", "--crop-ratio", "0,2"}, "--crop-ratio"},
		{[]string{"--crop-scale", "0.5,1"}, "--crop-scale"},
		{[]string{"--hflip", "1.01"}, "--hflip"},
		{[]string{"--hflip", "NaN"}, "--hflip"},
		{[]string{"--frame-sampling", "every"}, "--frame-sampling"},
		{[]string{"--frame-sampling", "segment", "--frame-stride", "0"}, "--frame-stride"},
		{[]string{"--frame-sampling", "fps", "--fps", "0"}, "--fps"},
		{[]string{"--frame-sampling", "fps"}, "--frame-sampling"},
		{[]string{"--fps", "2"}, "--fps"},
		{[]string{"--pad-to", "16"}, "--pad-to"},
		{[]string{"--resize", "native", "--pad-to", "100"}, "--pad-to"}, // does not divide --size 224
	} {
		for _, cmd := range [][]string{
			{"run", "--data", missing},
			{"decode", missing},
			{"train", "--data", missing},
			{"serve", "--data", missing},
		} {
			args := append(append([]string{cmd[0]}, bad.args...), cmd[1:]...)
			if cmd[0] == "train" {
				args = append(args, "--", "true")
			}
			code, _, stderr := runMain(args...)
			if code != cli.ExitUsage || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, bad.flag+" ") {
				t.Errorf("%q: exit %d, stderr %q; want %d and one line naming %s", args, code, stderr, cli.ExitUsage, bad.flag)
			}
		}
	}
}

// TestDecodeMD5Transformed: decode --md5 with a random transform prints
// one MD5 per output tensor, the same on every run; another --epoch or
// --seed changes them, and squash keeps the full-size picture MD5s.
func TestDecodeMD5Transformed(t *testing.T) {
	media := filepath.Join("..", "decode", "testdata", "media")
	files := []string{filepath.Join(media, "h264_bframes.mp4"), filepath.Join(media, "image420.jpg"), filepath.Join(media, "image.png")}
	md5s := func(extra ...string) string {
		t.Helper()
		args := append([]string{"decode", "--md5", "--resize", "random-crop", "--hflip", "0.5", "--frame-sampling", "segment",
			"--frames", "3", "--size", "32"}, extra...)
		code, stdout, stderr := runMain(append(args, files...)...)
		if code != 0 {
			t.Fatalf("%q: exit %d: %s", args, code, stderr)
		}
		return stdout
	}
	first := md5s()
	if lines := strings.Split(strings.TrimSpace(first), "\n"); len(lines) != 3 {
		t.Fatalf("got %d lines, want one per tensor (3):\n%s", len(lines), first)
	}
	if again := md5s(); again != first {
		t.Errorf("a second run printed\n%s\nthe first\n%s", again, first)
	}
	if other := md5s("--epoch", "1"); other == first {
		t.Error("--epoch 1 printed the MD5s of epoch 0")
	}
	if other := md5s("--seed", "2"); other == first {
		t.Error("--seed 2 printed the MD5s of seed 1")
	}
	code, plain, _ := runMain("decode", "--md5", files[1])
	if code != 0 || strings.Count(plain, "\n") != 1 || strings.Contains(plain, "\t") {
		t.Errorf("decode --md5 without a transform: exit %d, %q; want the one full-size MD5", code, plain)
	}
}
