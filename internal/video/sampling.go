package video

import (
	"slices"
	"sort"
)

// SampleFrames picks n frames of a clip spread uniformly over its
// presentation timeline, as VLM loaders built on decord or torchcodec do:
// the timeline [first pts, last pts + one frame) is cut into n equal
// segments and the frame shown at each segment's centre is taken (the
// last frame whose pts is at or before it). Frames FFmpeg decodes but
// does not show — those in Discarded, and in MP4/MOV those with a negative
// pts (the pre-roll of a cut) — are never picked, unless no other frame is
// listed.
//
// It returns decode-order indices sorted by presentation time, without
// duplicates: a clip shorter than n frames gives fewer than n.
//
// When the container gave no per-frame timing (FrameCountEstimated), the
// clip is taken as constant frame rate with decode order equal to
// presentation order, and index i is the centre rule applied to Frames
// equal slots; the decoder turns such an index into a time with
// FrameTime(i) and outputs the frame shown at that time.
func SampleFrames(v *Track, n int) []int {
	if v == nil || n <= 0 || v.Frames <= 0 {
		return nil
	}
	if !v.PerFrame() {
		out := make([]int, 0, min(n, v.Frames))
		for k := 0; k < n; k++ {
			i := centre(0, int64(v.Frames), k, n)
			if len(out) == 0 || out[len(out)-1] != int(i) {
				out = append(out, int(i))
			}
		}
		return out
	}
	order := slices.DeleteFunc(presentationOrder(v), v.Hidden)
	if len(order) == 0 {
		order = presentationOrder(v) // every frame is hidden: pick among them
	}
	start, last := v.FramePTS[order[0]], v.FramePTS[order[len(order)-1]]
	step := int64(0) // the last frame lasts as long as an average frame
	if len(order) > 1 {
		step = (last - start) / int64(len(order)-1)
	} else if v.Frames > 0 {
		step = v.Duration / int64(v.Frames)
	}
	end := last + max(step, 1)
	out := make([]int, 0, min(n, len(order)))
	for k := 0; k < n; k++ {
		t := centre(start, end, k, n)
		// The last frame with pts <= t.
		j := sort.Search(len(order), func(j int) bool { return v.FramePTS[order[j]] > t }) - 1
		if j < 0 {
			j = 0
		}
		if len(out) == 0 || out[len(out)-1] != order[j] {
			out = append(out, order[j])
		}
	}
	return out
}

// centre returns the centre of segment k of n equal segments of
// [start, end), rounded down, without overflowing for long timelines.
func centre(start, end int64, k, n int) int64 {
	span, den := end-start, 2*int64(n)
	num := 2*int64(k) + 1
	return start + span/den*num + span%den*num/den
}

// presentationOrder returns the decode-order indices of v's frames sorted
// by pts (ties by decode order).
func presentationOrder(v *Track) []int {
	order := make([]int, v.Frames)
	sorted := true
	for i := range order {
		order[i] = i
		if i > 0 && v.FramePTS[i] < v.FramePTS[i-1] {
			sorted = false
		}
	}
	if !sorted {
		sort.SliceStable(order, func(a, b int) bool { return v.FramePTS[order[a]] < v.FramePTS[order[b]] })
	}
	return order
}

// Spread completes the tensor dst of a clip, f slots of plane bytes each,
// for which SampleFrames returned n < f frames: once slots 0..n-1 hold
// them, it repeats them over all f slots, in presentation order and
// evenly (slot k takes frame k*n/f), as decoding a whole clip does. It
// does nothing when n >= f or dst holds fewer than f slots.
func Spread(dst []byte, f, plane, n int) {
	if n <= 0 || n >= f || len(dst) < f*plane {
		return
	}
	// From the back, so that every source slot (k*n/f <= k) is read before
	// it is overwritten.
	for k := f - 1; k >= 0; k-- {
		if src := k * n / f; src != k {
			copy(dst[k*plane:(k+1)*plane], dst[src*plane:(src+1)*plane])
		}
	}
}
