package av

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const mediaDir = "../../decode/testdata/media"

// clips are the committed test videos (see ../../decode/testdata/media/make.sh).
var clips = []string{
	"h264_bframes.mp4", "h264_odd.mp4", "h264_intra444.mp4", "h264_audio.mkv",
	"hevc.mp4", "vp9.webm", "vp8.webm", "av1.mp4",
}

func readMedia(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(mediaDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func needFFmpeg(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("ffmpeg")
	if err != nil {
		t.Skip("ffmpeg CLI not installed")
	}
	return p
}

// ffmpegFrameMD5 runs `ffmpeg -i path -f framemd5 -` and returns the pts
// and md5 columns of the video stream and the time base of the pts.
func ffmpegFrameMD5(t testing.TB, path string) (pts []int64, sums []string, tb Rational) {
	t.Helper()
	out, err := exec.Command(needFFmpeg(t), "-nostdin", "-v", "error", "-i", path, "-map", "0:v:0", "-f", "framemd5", "-").Output()
	if err != nil {
		t.Fatalf("ffmpeg framemd5 %s: %v", path, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if n, _ := fmt.Sscanf(line, "#tb 0: %d/%d", &tb.Num, &tb.Den); n == 2 || strings.HasPrefix(line, "#") || line == "" {
			continue
		}
		f := strings.Split(line, ",")
		if len(f) != 6 {
			t.Fatalf("framemd5 line %q", line)
		}
		p, err := strconv.ParseInt(strings.TrimSpace(f[2]), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		pts = append(pts, p)
		sums = append(sums, strings.TrimSpace(f[5]))
	}
	if tb.Den == 0 {
		t.Fatalf("framemd5 of %s has no time base", path)
	}
	return pts, sums, tb
}

// rescale converts ts from one time base to another, rounding to nearest
// like av_rescale_q.
func rescale(ts int64, from, to Rational) int64 {
	n := new(big.Int).Mul(big.NewInt(ts), big.NewInt(int64(from.Num)*int64(to.Den)))
	d := big.NewInt(int64(from.Den) * int64(to.Num))
	n.Mul(n, big.NewInt(2)).Add(n, d)
	d2 := new(big.Int).Mul(d, big.NewInt(2))
	return new(big.Int).Div(n, d2).Int64()
}

// genClip encodes a clip with the ffmpeg CLI into a temporary file.
func genClip(t testing.TB, name string, args ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	cmd := exec.Command(needFFmpeg(t), append(append([]string{"-nostdin", "-v", "error", "-y"}, args...), p)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ffmpeg %v: %v\n%s", args, err, out)
	}
	return p
}

func lavfi(size string, seconds string) []string {
	return []string{"-f", "lavfi", "-i", "testsrc2=size=" + size + ":rate=25:duration=" + seconds + ",noise=alls=10:allf=t+u:all_seed=1", "-threads", "1"}
}

// extraClips are longer clips with other GOP structures, made at test time.
func extraClips(t *testing.T) []string {
	if testing.Short() {
		return nil
	}
	return []string{
		genClip(t, "long_gop.mp4", append(lavfi("192x108", "8"), "-c:v", "libx264", "-preset", "ultrafast", "-g", "48", "-bf", "2", "-x264-params", "b-adapt=0")...),
		genClip(t, "openish.mp4", append(lavfi("176x100", "4"), "-c:v", "libx264", "-preset", "veryfast", "-g", "25", "-bf", "3", "-x264-params", "open-gop=1")...),
		genClip(t, "hevc_long.mkv", append(lavfi("160x96", "5"), "-c:v", "libx265", "-preset", "ultrafast", "-x265-params", "pools=none:frame-threads=1:log-level=error:keyint=40:bframes=4")...),
	}
}

func TestFrameMD5sMatchFFmpeg(t *testing.T) {
	needFFmpeg(t)
	paths := extraClips(t)
	for _, c := range clips {
		paths = append(paths, filepath.Join(mediaDir, c))
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			wantPTS, wantSums, wantTB := ffmpegFrameMD5(t, path)
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			got, st, err := FrameMD5s(context.Background(), data, DefaultConfig())
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(wantSums) {
				t.Fatalf("got %d frames, want %d (ffmpeg)", len(got), len(wantSums))
			}
			for i, h := range got {
				if s := hex.EncodeToString(h.MD5[:]); s != wantSums[i] {
					t.Errorf("frame %d: got md5 %s, want %s", i, s, wantSums[i])
				}
				// framemd5 prints pts in the encoder's time base (1/frame rate).
				if p := rescale(h.PTS, st.TimeBase, wantTB); p != wantPTS[i] {
					t.Errorf("frame %d: got pts %d (%d in %v), want %d", i, p, h.PTS, st.TimeBase, wantPTS[i])
				}
			}
			if st.FramesDecoded != len(got) {
				t.Errorf("got FramesDecoded %d, want %d", st.FramesDecoded, len(got))
			}
		})
	}
}

func TestPacketsMatchContainer(t *testing.T) {
	tests := []struct {
		name    string
		frames  int
		keyEach int // a keyframe every keyEach frames (0: do not check)
		codec   string
		w, h    int
	}{
		{"h264_bframes.mp4", 90, 30, "h264", 320, 240},
		{"h264_intra444.mp4", 30, 1, "h264", 160, 96},
		{"hevc.mp4", 60, 0, "hevc", 256, 144},
		{"av1.mp4", 30, 0, "av1", 128, 72},
		{"vp9.webm", 60, 0, "vp9", 255, 143},
	}
	for _, tc := range tests {
		pk, info, err := Packets(context.Background(), readMedia(t, tc.name), DefaultConfig())
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if len(pk) != tc.frames {
			t.Errorf("%s: got %d packets, want %d", tc.name, len(pk), tc.frames)
		}
		if info.Codec != tc.codec || info.Width != tc.w || info.Height != tc.h {
			t.Errorf("%s: got %s %dx%d, want %s %dx%d", tc.name, info.Codec, info.Width, info.Height, tc.codec, tc.w, tc.h)
		}
		if len(pk) > 0 && !pk[0].Key {
			t.Errorf("%s: first packet is not a keyframe", tc.name)
		}
		for i, p := range pk {
			if tc.keyEach > 0 && p.Key != (i%tc.keyEach == 0) {
				t.Errorf("%s: packet %d: got key %v, want %v", tc.name, i, p.Key, i%tc.keyEach == 0)
			}
			if p.Size <= 0 {
				t.Errorf("%s: packet %d: got size %d", tc.name, i, p.Size)
			}
		}
	}
}

func TestLimitsAndAllowLists(t *testing.T) {
	h264 := readMedia(t, "h264_bframes.mp4")
	webm := readMedia(t, "vp9.webm")
	ctx := context.Background()
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	tests := []struct {
		name string
		data []byte
		ctx  context.Context
		edit func(*Config)
		want error
	}{
		{"ok", h264, ctx, func(*Config) {}, nil},
		{"pixels", h264, ctx, func(c *Config) { c.MaxPixels = 320*240 - 1 }, ErrLimit},
		{"frames", h264, ctx, func(c *Config) { c.MaxFrames = 10 }, ErrLimit},
		{"packets", h264, ctx, func(c *Config) { c.MaxPackets = 10 }, ErrLimit},
		{"format", webm, ctx, func(c *Config) { c.Formats = "mov,mp4" }, ErrUnsupported},
		{"codec", h264, ctx, func(c *Config) { c.Codecs = "hevc,vp9" }, ErrUnsupported},
		{"timeout", h264, ctx, func(c *Config) { c.Timeout = 1 }, ErrTimeout},
		{"canceled", h264, canceled, func(*Config) {}, context.Canceled},
		{"garbage", bytes.Repeat([]byte("not a video "), 300), ctx, func(*Config) {}, ErrCorrupt},
		{"config", h264, ctx, func(c *Config) { c.ProbeSize = 0 }, ErrConfig},
	}
	for _, tc := range tests {
		cfg := DefaultConfig()
		tc.edit(&cfg)
		_, err := DecodeAll(tc.ctx, tc.data, cfg)
		if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("%s: got error %v, want %v", tc.name, err, tc.want)
		}
	}
}
