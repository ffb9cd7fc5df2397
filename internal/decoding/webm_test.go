package decoding

import (
	"slices"
	"testing"

	"github.com/datahelix/datahelix/internal/video"
)

// TestSampleFramesBlockBeforeZero samples every frame of the track
// webm.Parse reads from a Matroska cluster whose blocks before time 0
// FFmpeg leaves without a timestamp (internal/webm's
// TestParseWebMBlockBeforeZero): those Discarded frames, whose pts of -80
// and -40 had made them the first frames sampled, are never picked.
func TestSampleFramesBlockBeforeZero(t *testing.T) {
	v := &VideoInfo{Container: "matroska", Codec: "vp9", Width: 320, Height: 180, Timescale: 1000, Duration: 160, Frames: 7,
		FrameBytes: []uint32{4, 4, 4, 3, 3, 2, 2}, FramePTS: []int64{0, -80, -40, 80, 40, -120, -120},
		Keyframes: []int{0}, Discarded: []int{1, 2, 5, 6}, Bytes: 22}
	if got, want := video.SampleFrames(v, v.Frames), []int{0, 4, 3}; !slices.Equal(got, want) {
		t.Errorf("sampling all %d frames picks %v (pts %v), want %v", v.Frames, got, v.FramePTS, want)
	}
}
