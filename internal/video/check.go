package video

import "fmt"

// Check reports the first invariant of a parsed track that t breaks, or
// nil: a frame count within MaxFrames, per-frame slices of that length
// (unless estimated), keyframes and discarded frames ascending within
// the track, and a rotation within -180 to 180. The fuzzers of every
// container parser hold their results to it.
func (t *Track) Check() error {
	if t.Frames <= 0 || t.Frames > MaxFrames || t.Timescale == 0 {
		return fmt.Errorf("frames %d, timescale %d", t.Frames, t.Timescale)
	}
	if !t.FrameCountEstimated && (len(t.FrameBytes) != t.Frames || len(t.FramePTS) != t.Frames) {
		return fmt.Errorf("%d frames but %d sizes, %d pts", t.Frames, len(t.FrameBytes), len(t.FramePTS))
	}
	if len(t.Keyframes) == 0 {
		return fmt.Errorf("no keyframes")
	}
	for i, k := range t.Keyframes {
		if k < 0 || k >= t.Frames || (i > 0 && k <= t.Keyframes[i-1]) {
			return fmt.Errorf("keyframes %v not ascending within [0,%d)", t.Keyframes, t.Frames)
		}
	}
	for i, k := range t.Discarded {
		if k < 0 || k >= t.Frames || (i > 0 && k <= t.Discarded[i-1]) {
			return fmt.Errorf("discarded frames %v not ascending within [0,%d)", t.Discarded, t.Frames)
		}
	}
	if turn := t.Turn(); !(t.Rotation >= -180 && t.Rotation <= 180) || turn < 0 || turn > 270 || turn%90 != 0 {
		return fmt.Errorf("rotation %v, turn %d: want -180 to 180, and 0, 90, 180 or 270", t.Rotation, turn)
	}
	return nil
}
