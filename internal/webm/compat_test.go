package webm

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/datahelix/datahelix/internal/av"
	"github.com/datahelix/datahelix/internal/video/videotest"
)

// TestParseWebMMatchesFFmpeg compares the record of each clip with the
// packets FFmpeg's demuxer gives for the stream the decoder decodes
// (av.Packets): count, pts (as times, since the time bases may differ),
// sizes, keyframes and the turn of the frames; a packet FFmpeg leaves without a pts must be one
// SampleFrames never picks. Where ffprobe shows the same stream, it is
// compared with ffprobe too.
func TestParseWebMMatchesFFmpeg(t *testing.T) {
	for _, c := range videotest.WebMClips {
		t.Run(c.File, func(t *testing.T) {
			data := videotest.Read(t, c.File)
			v, err := Parse(data)
			if err != nil {
				t.Fatal(err)
			}
			if err := v.Check(); err != nil {
				t.Fatal(err)
			}
			pk, si, err := av.Packets(context.Background(), data, av.DefaultConfig())
			if err != nil {
				t.Fatal(err)
			}
			if len(pk) != c.Frames || v.Frames != len(pk) {
				t.Fatalf("%d frames, FFmpeg reads %d packets, want %d", v.Frames, len(pk), c.Frames)
			}
			var keys []int
			for i, p := range pk {
				if p.Key {
					keys = append(keys, i)
				}
				if int(v.FrameBytes[i]) != p.Size {
					t.Errorf("frame %d: %d bytes, FFmpeg's packet %d", i, v.FrameBytes[i], p.Size)
				}
				if p.PTS == math.MinInt64 {
					if !v.Hidden(i) {
						t.Errorf("frame %d: FFmpeg gives it no pts, but SampleFrames may pick it (pts %d)", i, v.FramePTS[i])
					}
				} else if videotest.CompareTime(v.FramePTS[i], v.Timescale, p.PTS, si.TimeBase) != 0 {
					t.Errorf("frame %d: pts %d/%d s, FFmpeg's %d*%d/%d s", i, v.FramePTS[i], v.Timescale, p.PTS, si.TimeBase.Num, si.TimeBase.Den)
				}
			}
			if !slices.Equal(v.Keyframes, keys) {
				t.Errorf("keyframes %v, FFmpeg's %v", v.Keyframes, keys)
			}
			if v.Turn() != si.Rotation {
				t.Errorf("rotation %v, turn %d; FFmpeg turns the frames by %d", v.Rotation, v.Turn(), si.Rotation)
			}
			if c.Probe {
				videotest.Compare(t, c.File, "v:0", v)
			}
		})
	}
}
