package video

import "slices"

// SampleSegment picks up to n frames of a clip stride frames apart in
// presentation order, from the start pick chooses: pick(count, span)
// returns an index in 0..count-span, where count is the clip's shown
// frames and span = (n-1) x stride + 1 the frames a full segment covers
// (pick is called with count <= span too, and its result is clamped).
// Frames FFmpeg does not show are skipped as SampleFrames skips them. A
// clip shorter than the span gives fewer than n frames, which Spread
// repeats to fill the tensor.
//
// It returns decode-order indices sorted by presentation time, without
// duplicates, as SampleFrames does; without per-frame timing
// (FrameCountEstimated) an index i stands for the time FrameTime(i).
func SampleSegment(v *Track, n, stride int, pick func(count, span int) int) []int {
	if v == nil || n <= 0 || v.Frames <= 0 {
		return nil
	}
	stride = max(stride, 1)
	var order []int
	if v.PerFrame() {
		order = slices.DeleteFunc(presentationOrder(v), v.Hidden)
		if len(order) == 0 {
			order = presentationOrder(v)
		}
	} else {
		order = make([]int, v.Frames)
		for i := range order {
			order[i] = i
		}
	}
	span := (n-1)*stride + 1
	start := min(max(pick(len(order), span), 0), max(len(order)-span, 0))
	out := make([]int, 0, n)
	for k := 0; k < n; k++ {
		i := start + k*stride
		if i >= len(order) {
			break
		}
		out = append(out, order[i])
	}
	return out
}
