package bench

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/datahelix/datahelix/internal/bench/realrun"
)

// ffmpegOutput is the end of `ffmpeg -nostdin -benchmark -threads 1 -i
// 000000.mp4 -an -f null -` on a generated HowTo100M-like clip.
const ffmpegOutput = "      encoder         : Lavc59.37.100 wrapped_avframe\n" +
	"frame=    1 fps=0.0 q=-0.0 size=N/A time=00:00:00.04 bitrate=N/A speed=2.08x    \r" +
	"frame=   94 fps=0.0 q=-0.0 Lsize=N/A time=00:00:03.91 bitrate=N/A speed=20.8x    \n" +
	"video:43kB audio:0kB subtitle:0kB other streams:0kB global headers:0kB muxing overhead: unknown\n" +
	"bench: utime=0.033s stime=0.002s rtime=0.192s\n" +
	"bench: maxrss=56544kB\n"

func TestParseFFmpegBench(t *testing.T) {
	got, err := ParseFFmpegBench([]byte(ffmpegOutput))
	want := FFmpegBench{User: 33 * time.Millisecond, System: 2 * time.Millisecond, Real: 192 * time.Millisecond, Frames: 94}
	if err != nil || got != want {
		t.Errorf("got %+v, %v; want %+v", got, err, want)
	}
	noFrames := "bench: utime=1.5s stime=0.000s rtime=2s\n"
	if got, err := ParseFFmpegBench([]byte(noFrames)); err != nil || got.Frames != -1 || got.User != 1500*time.Millisecond {
		t.Errorf("without a frame count: got %+v, %v; want 1.5 s user, frames -1", got, err)
	}
	for _, bad := range []string{"", "frame= 10\n", "bench: utime=1e9s stime=0s rtime=0s", "bench: utime=1..2s stime=0s rtime=0s"} {
		if _, err := ParseFFmpegBench([]byte(bad)); err == nil || !errors.Is(err, realrun.ErrReal) {
			t.Errorf("%q: error %v, want an ErrReal error", bad, err)
		}
	}
}

func FuzzParseFFmpegBench(f *testing.F) {
	f.Add([]byte(ffmpegOutput))
	f.Add([]byte("frame=99999999999999999999\nbench: utime=0.1s stime=0.1s rtime=0.1s"))
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := ParseFFmpegBench(data)
		if err != nil {
			if !errors.Is(err, realrun.ErrReal) {
				t.Fatalf("error %v does not wrap ErrReal", err)
			}
			return
		}
		if b.User < 0 || b.System < 0 || b.Real < 0 || b.Frames < -1 {
			t.Fatalf("accepted %+v", b)
		}
	})
}

func TestDecodeTable(t *testing.T) {
	ms := []decodeMeasure{
		{preset: "kinetics", clips: 3, codecs: map[string]int{"h264": 2, "vp9": 1}, frames: 750, ffFrames: 750,
			ours: 300 * time.Millisecond, ffmpeg: 400 * time.Millisecond, sampled: 150 * time.Millisecond, sampledFrames: 300},
		{preset: "webvid", clips: 2, codecs: map[string]int{"h264": 2}, frames: 900, ffFrames: 899,
			ours: 500 * time.Millisecond, ffmpeg: 400 * time.Millisecond, sampled: 100 * time.Millisecond, sampledFrames: 200},
	}
	s := decodeTable(ms)
	if len(s.Rows) != 2 {
		t.Fatalf("%d rows", len(s.Rows))
	}
	for i, want := range [][]any{
		{"kinetics", 3, "h264 x2, vp9", 750, 300.0, 400.0, 0.75, 150.0, 300, 0.5},
		{"webvid", 2, "h264 x2", 900, 500.0, 400.0, 1.25, 100.0, 200, 0.2},
	} {
		for k := range want {
			if s.Rows[i][k] != want[k] {
				t.Errorf("row %d column %s = %v, want %v", i, s.Columns[k], s.Rows[i][k], want[k])
			}
		}
	}
	if want := "full decode 1.00x ffmpeg -threads 1's CPU time over 2 presets; sampled 8-frame decode 0.31x the full decode"; s.Headline != want {
		t.Errorf("headline %q, want %q", s.Headline, want)
	}
	if !strings.Contains(s.Note, "webvid: ffmpeg wrote 899 frames, we decoded 900") {
		t.Errorf("note %q does not report the frame count mismatch", s.Note)
	}
}
