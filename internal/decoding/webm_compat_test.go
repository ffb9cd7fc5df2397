package decoding

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/datahelix/datahelix/internal/av"
	"github.com/datahelix/datahelix/internal/video"
	"github.com/datahelix/datahelix/internal/video/videotest"
	"github.com/datahelix/datahelix/internal/webm"
)

// TestDecodeWebMSampledFrames decodes 8 sampled frames of each clip
// through Decode: none may be missed, and each sampled frame's pts must
// be that of exactly one frame FFmpeg outputs, so that the frame decoded
// at it is the frame the record names.
func TestDecodeWebMSampledFrames(t *testing.T) {
	for _, c := range videotest.WebMClips {
		// 8 frames, and every frame (vp9_codecdelay.webm's first two
		// have negative times: FFmpeg shows them, TestSampleMatroskaNegativePTS).
		for _, n := range []int{8, c.Frames} {
			testDecodeWebMSampled(t, c, n)
		}
	}
}

// testDecodeWebMSampled decodes n frames of clip c and checks that each
// sampled frame is one FFmpeg outputs.
func testDecodeWebMSampled(t *testing.T, c videotest.WebMClip, n int) {
	d := NewDecoder(Options{Frames: n, Size: 16})
	t.Run(fmt.Sprintf("%s/%d", c.File, n), func(t *testing.T) {
		data := videotest.Read(t, c.File)
		s := &Sample{Shard: "test.tar", Key: "clip", Members: []Member{{Name: "clip.webm", Ext: "webm", Data: data}}}
		rec, err := ParseRecord(s, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		out, err := d.Decode(context.Background(), s, rec)
		if err != nil {
			t.Fatal(err)
		}
		if out.MissedFrames != 0 {
			t.Errorf("%d sampled frames missed: the record's times are not FFmpeg's", out.MissedFrames)
		}
		hs, st, err := av.FrameMD5s(context.Background(), data, av.DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		v := rec.Video
		picked := video.SampleFrames(v, n)
		for _, f := range picked {
			matches := 0
			for _, h := range hs {
				if videotest.CompareTime(v.FramePTS[f], v.Timescale, h.PTS, st.TimeBase) == 0 {
					matches++
				}
			}
			if matches != 1 {
				t.Errorf("sampled frame %d (pts %d): %d frames FFmpeg outputs have its time, want 1", f, v.FramePTS[f], matches)
			}
		}
	})
}

// TestWebMFrameMD5sMatchFFmpeg checks FrameMD5s, what `decode --md5`
// prints, against the md5 column of the ffmpeg CLI's framemd5 for each
// clip (skipped without ffmpeg).
func TestWebMFrameMD5sMatchFFmpeg(t *testing.T) {
	if _, err := exec.LookPath("ffmpeg"); err != nil {
		t.Skip("ffmpeg not installed")
	}
	for _, c := range videotest.WebMClips {
		t.Run(c.File, func(t *testing.T) {
			path := filepath.Join(videotest.Dir, c.File)
			args := append([]string{"-v", "error", "-threads", "1", "-i", path}, strings.Fields(c.FFmpeg)...)
			raw, err := exec.Command("ffmpeg", append(args, "-f", "framemd5", "-")...).Output()
			if err != nil {
				t.Fatalf("ffmpeg %v: %v", args, err)
			}
			var want []string
			for _, line := range strings.Split(string(raw), "\n") {
				if f := strings.Split(line, ","); len(f) == 6 && !strings.HasPrefix(line, "#") {
					want = append(want, strings.TrimSpace(f[5]))
				}
			}
			got, err := frameMD5s(context.Background(), videotest.Read(t, c.File), Limits{})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Errorf("FrameMD5s gives %d frames, ffmpeg %s %d; they differ", len(got), c.FFmpeg, len(want))
			}
		})
	}
}

// TestSampleMatroskaNegativePTS checks that sampling may pick a Matroska
// frame with a negative time: CodecDelay gives vp9_codecdelay.webm's
// first two frames pts -80 and -40 ms, which FFmpeg shows (unlike an MP4
// pre-roll); sampling every frame skipped them.
func TestSampleMatroskaNegativePTS(t *testing.T) {
	v, err := webm.Parse(videotest.Read(t, "vp9_codecdelay.webm"))
	if err != nil {
		t.Fatal(err)
	}
	picked := video.SampleFrames(v, v.Frames)
	if len(picked) != 25 || v.FramePTS[picked[0]] != -80 {
		t.Errorf("sampling all %d frames picks %d, the first at pts %d; want 25 from -80", v.Frames, len(picked), v.FramePTS[picked[0]])
	}
}
