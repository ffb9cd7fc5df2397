package decode

import "sort"

// VideoTask is a keyframe-aligned piece of a clip's decoding: seek to
// Keyframe, then decode forward, outputting Targets. Tasks of one clip are
// independent, so several workers can run them at once.
type VideoTask struct {
	// Keyframe is the decode-order index of the keyframe the task seeks
	// to first.
	Keyframe int
	// Targets are the decode-order indices of the frames the task
	// outputs, in presentation order; a frame wanted in several output
	// positions appears once per position.
	Targets []int
	// Slots[j] is the position of Targets[j] in the sample's frame
	// tensor: its index in the targets passed to PlanVideoTasks.
	Slots []int
	// DecodeFrames counts the frames the task must decode, from each
	// keyframe it seeks to up to each target in decode order (frames
	// decoded and discarded included).
	DecodeFrames int
	// DecodeBytes is the compressed size of those frames.
	DecodeBytes int64
	// ReorderedFrames counts the frames of DecodeFrames that are shown
	// before a frame decoded earlier in their GOP (B-frames): a decoder
	// that skips non-reference frames it does not output may not decode
	// them, so they cost less than the others.
	ReorderedFrames int
}

// segment is a run of targets decoded forward without a seek.
type segment struct {
	key, end  int // decode-order range [key, end] decoded
	targets   []int
	slots     []int
	frames    int
	bytes     int64
	reordered int
}

// PlanVideoTasks plans the decoding of the frames targets (decode-order
// indices, such as SampleFrames returns; position j of targets is output
// slot j) the way decord and torchcodec decode: targets are visited in
// presentation order, and the decoder seeks — to the last keyframe at or
// before the target — only when a keyframe lies between its current
// position and the next target; otherwise it decodes forward, discarding
// the frames in between. A frame already decoded costs nothing more.
// Because decode order may differ from presentation order (B-frames),
// outputting a frame means decoding every frame from its GOP's keyframe up
// to it in decode order, which is what DecodeFrames counts.
//
// Each seek starts an independent run. With maxTasks <= 1 the result is
// one task, the sequential plan. With maxTasks > 1 consecutive runs are
// grouped into at most maxTasks tasks so that the largest DecodeFrames is
// as small as possible (fewest tasks among the optimal groupings), for
// workers to decode a long clip in parallel. The DecodeFrames of the
// tasks add up to those of the sequential plan.
//
// Targets outside [0, Frames) are ignored. Without per-frame data
// (FrameCountEstimated) the clip has one keyframe, frame 0, and
// DecodeBytes uses the average frame size.
func PlanVideoTasks(v *VideoInfo, targets []int, maxTasks int) []VideoTask {
	return groupSegments(decodeRuns(v, targets), maxTasks)
}

// decodeRuns simulates the decoder over targets and returns the runs
// between seeks.
func decodeRuns(v *VideoInfo, targets []int) []segment {
	if v == nil || v.Frames <= 0 {
		return nil
	}
	type want struct{ frame, slot int }
	ws := make([]want, 0, len(targets))
	for slot, f := range targets {
		if f >= 0 && f < v.Frames {
			ws = append(ws, want{f, slot})
		}
	}
	if len(ws) == 0 {
		return nil
	}
	perFrame := v.perFrame()
	sort.SliceStable(ws, func(a, b int) bool {
		if perFrame {
			if pa, pb := v.FramePTS[ws[a].frame], v.FramePTS[ws[b].frame]; pa != pb {
				return pa < pb
			}
		}
		if ws[a].frame != ws[b].frame {
			return ws[a].frame < ws[b].frame
		}
		return ws[a].slot < ws[b].slot
	})
	bytesOf := frameBytes(v)
	reorderedOf := reorderedFrames(v)
	var segs []segment
	pos := -1 // last frame decoded, in decode order
	for _, w := range ws {
		t := w.frame
		s := decodedBy(segs, t)
		switch key := gopStart(v.Keyframes, t); {
		case s != nil:
			// Already decoded, by the current run or an earlier one.
		case key > pos || t < pos || len(segs) == 0:
			// A keyframe lies between the position and the target (or
			// the target is behind us): seek to the target's GOP.
			segs = append(segs, segment{key: key, end: t, frames: t - key + 1, bytes: bytesOf(key, t), reordered: reorderedOf(key, t)})
			s, pos = &segs[len(segs)-1], t
		default:
			s = &segs[len(segs)-1]
			s.frames += t - pos
			s.bytes += bytesOf(pos+1, t)
			s.reordered += reorderedOf(pos+1, t)
			s.end, pos = t, t
		}
		s.targets = append(s.targets, t)
		s.slots = append(s.slots, w.slot)
	}
	return segs
}

// decodedBy returns the run that decoded frame t, or nil.
func decodedBy(segs []segment, t int) *segment {
	for i := len(segs) - 1; i >= 0; i-- {
		if segs[i].key <= t && t <= segs[i].end {
			return &segs[i]
		}
	}
	return nil
}

// gopStart returns the last keyframe at or before frame t (0 when the
// list has none there: decoding then starts at the first frame).
func gopStart(keyframes []int, t int) int {
	i := sort.SearchInts(keyframes, t+1) - 1
	if i < 0 {
		return 0
	}
	return keyframes[i]
}

// frameBytes returns a function summing the compressed bytes of frames
// [a, b] in decode order, from per-frame sizes or, when those are
// unknown, the average frame size.
func frameBytes(v *VideoInfo) func(a, b int) int64 {
	if !v.perFrame() {
		avg := v.Bytes / int64(v.Frames)
		return func(a, b int) int64 { return avg * int64(b-a+1) }
	}
	prefix := make([]int64, len(v.FrameBytes)+1)
	for i, n := range v.FrameBytes {
		prefix[i+1] = prefix[i] + int64(n)
	}
	return func(a, b int) int64 { return prefix[b+1] - prefix[a] }
}

// reorderedFrames returns a function counting the frames in [a, b]
// (decode order) whose pts is below that of an earlier frame of their GOP;
// without per-frame timing there are none.
func reorderedFrames(v *VideoInfo) func(a, b int) int {
	if !v.perFrame() {
		return func(a, b int) int { return 0 }
	}
	prefix := make([]int32, v.Frames+1)
	var high int64
	next := 0 // index into Keyframes of the next GOP start
	for i, p := range v.FramePTS {
		if next < len(v.Keyframes) && v.Keyframes[next] == i || i == 0 {
			high = p
			for next < len(v.Keyframes) && v.Keyframes[next] <= i {
				next++
			}
		}
		prefix[i+1] = prefix[i]
		if p < high {
			prefix[i+1]++
		}
		high = max(high, p)
	}
	return func(a, b int) int { return int(prefix[b+1] - prefix[a]) }
}

// groupSegments merges consecutive runs into at most maxTasks tasks,
// minimising the largest DecodeFrames with the fewest tasks.
func groupSegments(segs []segment, maxTasks int) []VideoTask {
	limit := 0 // the smallest achievable maximum
	if maxTasks > 1 && len(segs) > 1 {
		lo, hi := 0, 0
		for _, s := range segs {
			lo, hi = max(lo, s.frames), hi+s.frames
		}
		for lo < hi {
			mid := lo + (hi-lo)/2
			if groupsNeeded(segs, mid) <= maxTasks {
				hi = mid
			} else {
				lo = mid + 1
			}
		}
		limit = lo
	}
	var tasks []VideoTask
	for i, s := range segs {
		if i == 0 || limit > 0 && tasks[len(tasks)-1].DecodeFrames+s.frames > limit {
			tasks = append(tasks, VideoTask{Keyframe: s.key})
		}
		t := &tasks[len(tasks)-1]
		t.Targets = append(t.Targets, s.targets...)
		t.Slots = append(t.Slots, s.slots...)
		t.DecodeFrames += s.frames
		t.DecodeBytes += s.bytes
		t.ReorderedFrames += s.reordered
	}
	return tasks
}

// groupsNeeded counts the groups greedy packing of consecutive runs needs
// when no group may exceed limit frames.
func groupsNeeded(segs []segment, limit int) int {
	n, sum := 1, 0
	for _, s := range segs {
		if sum+s.frames > limit {
			n, sum = n+1, 0
		}
		sum += s.frames
	}
	return n
}
