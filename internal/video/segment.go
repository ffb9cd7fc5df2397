package video

import (
	"math/bits"
	"slices"
	"sort"
)

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

// SampleRate picks the frames of a clip shown at a fixed rate from its
// first shown frame: at times start + k/rate for k = 0, 1, ... while the
// time lies within the clip and k < limit (the frame shown at each
// time, the last one whose pts is at or before it), rate given in
// thousandths of a frame per second. The count, and so the clip tensor's
// F, varies with the clip's duration, up to limit.
//
// It returns decode-order indices sorted by presentation time, without
// duplicates, as SampleFrames does: the time steps that would show the
// same frame again are skipped, so a rate above the clip's gives its
// frames one after another. Times are integer ticks in 128-bit
// arithmetic: no rounding differs between machines.
func SampleRate(v *Track, milliFPS int64, limit int) []int {
	if v == nil || limit <= 0 || milliFPS <= 0 || v.Frames <= 0 || v.Timescale == 0 {
		return nil
	}
	var order []int
	var at func(j int) int64 // presentation time of order[j]
	if v.PerFrame() {
		order = slices.DeleteFunc(presentationOrder(v), v.Hidden)
		if len(order) == 0 {
			order = presentationOrder(v)
		}
		at = func(j int) int64 { return v.FramePTS[order[j]] }
	} else {
		order = make([]int, v.Frames)
		for i := range order {
			order[i] = i
		}
		at = func(j int) int64 { return v.FrameTime(j) }
	}
	start, last := at(0), at(len(order)-1)
	step := int64(0) // the last frame lasts as long as an average frame
	if len(order) > 1 {
		step = (last - start) / int64(len(order)-1)
	} else {
		step = v.Duration / int64(v.Frames)
	}
	end := last + max(step, 1)
	out := make([]int, 0, min(limit, len(order)))
	unit := 1000 * uint64(v.Timescale) // ticks x milliFPS in one frame time
	for k := uint64(0); len(out) < limit; {
		// k/rate seconds in ticks, k x 1000 x timescale / milliFPS, in
		// 128 bits; a quotient past 64 bits is past the clip.
		hi, lo := bits.Mul64(k, unit)
		if hi >= uint64(milliFPS) {
			break
		}
		q, _ := bits.Div64(hi, lo, uint64(milliFPS))
		if q >= uint64(end-start) {
			break
		}
		t := start + int64(q)
		j := max(sort.Search(len(order), func(j int) bool { return at(j) > t })-1, 0)
		if len(out) == 0 || out[len(out)-1] != order[j] {
			out = append(out, order[j])
		}
		if j+1 >= len(order) {
			break
		}
		// The first time step at or after the next frame: the steps
		// before it would show frame j again.
		need := uint64(at(j+1) - start)
		nh, nl := bits.Mul64(need, uint64(milliFPS))
		if nh >= unit {
			break
		}
		next, rem := bits.Div64(nh, nl, unit)
		if rem != 0 {
			next++
		}
		k = max(k+1, next)
	}
	return out
}
