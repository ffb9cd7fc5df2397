// Package video describes a clip's video track as its container gives it,
// without decoding: the Track that the MP4/MOV (internal/mp4) and
// WebM/Matroska (internal/webm) parsers fill and that a sample's record
// holds (decoding.VideoInfo); which of its frames a sample
// takes (SampleFrames) and the keyframe-aligned tasks that decode them
// (PlanTasks), which the decoder, the cost model and the loader share.
package video

import (
	"math"
	"slices"
)

// MaxFrames caps the frames a container parser accepts for one track,
// so that a forged count cannot make it allocate gigabytes (1<<20 frames is
// over 9 hours at 30 fps).
const MaxFrames = 1 << 20

// Track holds the cost features of a clip's video track, read from its
// container without decoding.
type Track struct {
	Container string // "mp4", "mov", "webm" or "matroska"
	Codec     string // FFmpeg codec name: "h264", "hevc", "av1", "vp9", "vp8"
	Width     int
	Height    int
	// Rotation is the rotation of the track's display matrix (MP4/MOV:
	// tkhd times mvhd; Matroska: the one FFmpeg makes of a Projection) in
	// degrees counterclockwise, -180 to 180, as av_display_rotation_get
	// reads it (ffprobe prints it truncated to an integer); 0 when there
	// is none. Turn gives the turn that shows the clip upright.
	Rotation  float64
	Timescale uint32 // ticks per second of Duration and FramePTS
	Duration  int64  // in Timescale ticks
	Frames    int    // frames in the track (estimated when FrameCountEstimated)
	// FrameCountEstimated is true when Frames was derived from duration and
	// frame rate instead of counted; per-frame slices are then nil.
	FrameCountEstimated bool
	// FrameBytes is the compressed size of each frame in decode order.
	FrameBytes []uint32
	// FramePTS is each frame's presentation time in Timescale ticks, in
	// decode order, edit lists applied so that it matches the timestamps
	// FFmpeg reports for the same stream.
	FramePTS []int64
	// Keyframes lists the decode-order indices of sync frames, ascending.
	// When the container does not say which frames are sync frames it
	// holds only frame 0: decoding must start at the beginning.
	Keyframes []int
	// Discarded lists, ascending, the decode-order indices of frames
	// FFmpeg does not show at a time of their own: those an MP4 edit list
	// hides (AVINDEX_DISCARD_FRAME; ffprobe flags their packets D), such
	// as the pre-roll of a cut and a P-frame past an edit's end that
	// B-frames before the end refer to, and the Matroska frames FFmpeg's
	// demuxer leaves without a timestamp (laced without a duration, or in
	// a block timed before 0). video.SampleFrames never picks them. FFmpeg 5.1
	// decodes them without output, except the untimed Matroska frames it
	// can decode, and AV1 frames (its libdav1d decoder ignores the
	// discard flag).
	Discarded []int
	// Bytes is the compressed size of the track's frames (the sum of
	// FrameBytes when those are known).
	Bytes int64
	// Member is the index in Sample.Members of the video member (set by
	// decoding.ParseRecord).
	Member int
}

// PerFrame reports whether per-frame timing and sizes are known.
func (v *Track) PerFrame() bool {
	return !v.FrameCountEstimated && len(v.FramePTS) == v.Frames && len(v.FrameBytes) == v.Frames
}

// Hidden reports whether FFmpeg decodes frame i without showing it:
// Discarded, or in an MP4/MOV file a frame with a negative pts (the
// pre-roll of an edit list FFmpeg does not apply frame by frame). A
// Matroska frame with a negative pts, as CodecDelay gives, is shown.
func (v *Track) Hidden(i int) bool {
	_, discarded := slices.BinarySearch(v.Discarded, i)
	return discarded || v.FramePTS[i] < 0 && v.Container != "webm" && v.Container != "matroska"
}

// FrameTime returns the presentation time of frame i in Timescale ticks:
// its pts when per-frame timing is known, else i*Duration/Frames (the
// constant-frame-rate estimate SampleFrames assumes).
func (v *Track) FrameTime(i int) int64 {
	if v.PerFrame() {
		if i < 0 || i >= len(v.FramePTS) {
			return 0
		}
		return v.FramePTS[i]
	}
	if v.Frames <= 0 {
		return 0
	}
	d, f, k := v.Duration, int64(v.Frames), int64(i)
	return d/f*k + d%f*k/f
}

// Turn returns the clockwise turn, 0, 90, 180 or 270 degrees, that shows
// the clip upright, as the ffmpeg 5.1 CLI (get_rotation) and package av
// (av.StreamInfo.Rotation) read it from Rotation: rounded to whole
// degrees, then to the nearest multiple of 90.
func (v *Track) Turn() int {
	theta := -math.Round(v.Rotation)
	theta -= 360 * math.Floor(theta/360+0.9/360)
	angle := int(theta)
	if angle < 0 || angle >= 360 {
		angle = 0
	}
	return (angle + 45) / 90 % 4 * 90
}

// DisplayRotation returns the rotation of the display matrix FFmpeg 5.1's
// mov demuxer gives a track, the tkhd matrix times the mvhd one
// (mov_read_tkhd), as av_display_rotation_get reads it: degrees
// counterclockwise, -180 to 180. FFmpeg exports no identity matrix, and
// none can be read from a degenerate one: both give 0.
func DisplayRotation(track, movie [9]int32) float64 {
	// res[i][j] = sum over e of track[i][e]*movie[e][j], shifted by the
	// fixed point of row e (16.16, 16.16, 2.30).
	var m [9]int32
	shift := [3]uint{16, 16, 30}
	for i := range 3 {
		for j := range 3 {
			var sum int64
			for e := range 3 {
				sum += int64(track[3*i+e]) * int64(movie[3*e+j]) >> shift[e]
			}
			m[3*i+j] = int32(sum)
		}
	}
	if m == [9]int32{0x10000, 0, 0, 0, 0x10000, 0, 0, 0, 1 << 30} {
		return 0
	}
	fp := func(k int) float64 { return float64(m[k]) / 0x10000 }
	s0, s1 := math.Hypot(fp(0), fp(3)), math.Hypot(fp(1), fp(4))
	if s0 == 0 || s1 == 0 {
		return 0
	}
	return -math.Atan2(fp(1)/s1, fp(0)/s0) * 180 / math.Pi
}
