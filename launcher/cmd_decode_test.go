package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDecodeMD5MatchesFFmpeg checks `datahelix decode --md5` against the
// md5 column of `ffmpeg -i FILE -f framemd5 -` on clips of several codecs,
// GOP structures, sizes and containers.
func TestDecodeMD5MatchesFFmpeg(t *testing.T) {
	ff, err := exec.LookPath("ffmpeg")
	if err != nil {
		t.Skip("ffmpeg CLI not installed")
	}
	for _, name := range []string{"h264_bframes.mp4", "h264_odd.mp4", "h264_intra444.mp4", "h264_audio.mkv", "hevc.mp4", "vp9.webm", "vp8.webm", "av1.mp4"} {
		path := filepath.Join("..", "decode", "testdata", "media", name)
		out, err := exec.Command(ff, "-nostdin", "-v", "error", "-i", path, "-map", "0:v:0", "-f", "framemd5", "-").Output()
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, line := range strings.Split(string(out), "\n") {
			if f := strings.Split(line, ","); len(f) == 6 && !strings.HasPrefix(line, "#") {
				want = append(want, strings.TrimSpace(f[5]))
			}
		}
		code, stdout, stderr := runMain("decode", "--md5", path)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", name, code, stderr)
		}
		got := strings.Fields(stdout)
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("%s: got %d md5s, ffmpeg %d; first differing at %d", name, len(got), len(want), firstDiff(got, want))
		}
	}
}

func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func TestDecodeCommand(t *testing.T) {
	media := filepath.Join("..", "decode", "testdata", "media")
	code, stdout, stderr := runMain("decode", "--frames", "4", "--size", "32",
		filepath.Join(media, "h264_bframes.mp4"), filepath.Join(media, "image420.jpg"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"h264_bframes\tvideo\ttensors [4 32 32 3]", "image420\timage\ttensors [32 32 3]"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("got %q, want a line with %q", stdout, want)
		}
	}
	code, _, stderr = runMain("decode", filepath.Join(media, "make.sh"))
	if code != 1 || !strings.Contains(stderr, "make.sh") {
		t.Errorf("a non-media file: got exit %d and %q, want 1 and an error naming it", code, stderr)
	}
	if code, _, _ := runMain("decode"); code != 2 {
		t.Errorf("no file: got exit %d, want 2", code)
	}
}

func TestGenCommand(t *testing.T) {
	if _, err := exec.LookPath("ffmpeg"); err != nil {
		t.Skip("ffmpeg CLI not installed")
	}
	dir := t.TempDir()
	code, stdout, stderr := runMain("gen", "--preset", "imagenet", "--samples", "3", "--shards", "2", "--out", dir, "--size-scale", "0.2")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if got := strings.Fields(stdout); len(got) != 2 || filepath.Base(got[1]) != "imagenet-000001.tar" {
		t.Errorf("got shards %v, want imagenet-000000.tar and imagenet-000001.tar", got)
	}
	if code, _, _ := runMain("gen", "--preset", "nope", "--samples", "1", "--out", dir); code != 1 {
		t.Errorf("unknown preset: got exit %d, want 1", code)
	}
	if code, _, _ := runMain("gen", "--samples", "1"); code != 2 {
		t.Errorf("no --out: got exit %d, want 2", code)
	}
}
