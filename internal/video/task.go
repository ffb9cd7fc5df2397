package video

import "sort"

// Task is a keyframe-aligned piece of a clip's decoding: seek to
// Keyframe, then decode forward, outputting Targets. Tasks of one clip are
// independent, so several workers can run them at once.
type Task struct {
	// Keyframe is the decode-order index of the keyframe the task seeks
	// to first.
	Keyframe int
	// Targets are the decode-order indices of the frames the task
	// outputs, in presentation order; a frame wanted in several output
	// positions appears once per position.
	Targets []int
	// Slots[j] is the position of Targets[j] in the sample's frame
	// tensor: its index in the targets passed to PlanTasks.
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

// segment is a run of targets decoded forward without a seek, or the part
// of such a run from a later keyframe on.
type segment struct {
	key, end  int // decode-order range [key, end] decoded
	targets   []int
	slots     []int
	frames    int
	bytes     int64
	reordered int
	// shared, sharedBytes and sharedReordered are what the segment
	// before decoded of [key, end] too: a segment that continues a run
	// past an open GOP's keyframe, whose leading pictures the run decoded,
	// shares that keyframe and those pictures. A task that starts with the
	// segment decodes them again; one that holds the run too does not.
	shared, sharedReordered int
	sharedBytes             int64
}

// PlanTasks plans the decoding of the frames targets (decode-order
// indices, such as SampleFrames returns; position j of targets is output
// slot j) the way decord and torchcodec decode: targets are visited in
// presentation order, and the decoder seeks — to the last keyframe at or
// before the target — only when that keyframe lies after its current
// position or before the keyframe of its current run; otherwise it
// decodes forward, discarding the frames in between. A frame already
// decoded costs nothing more. Because decode order may differ from
// presentation order (B-frames), outputting a frame means decoding every
// frame from its GOP's keyframe up to it in decode order, which is what
// DecodeFrames counts. A leading picture of an open GOP (decoded after
// its keyframe but shown before it, referring to the GOP before, which
// FFmpeg drops when decoding starts at that keyframe) is decoded from the
// keyframe before instead.
//
// Each seek starts an independent run. A run that decodes a keyframe's
// leading pictures goes on into that keyframe's GOP without a seek; the
// plan may still start a task at that keyframe, which then decodes the
// keyframe and the leading pictures the run decoded after it again. With
// maxTasks <= 1 the result is one task, the sequential plan. With
// maxTasks > 1 consecutive runs (and such open-GOP continuations) are
// grouped into at most maxTasks tasks so that the largest DecodeFrames is
// as small as possible (fewest tasks among the optimal groupings), for
// workers to decode a long clip in parallel. The DecodeFrames of the
// tasks add up to those of the sequential plan, plus the frames decoded
// twice where a task starts at an open GOP's keyframe (none for closed
// GOPs).
//
// Targets outside [0, Frames) are ignored. Without per-frame data
// (FrameCountEstimated) the clip has one keyframe, frame 0, and
// DecodeBytes uses the average frame size.
func PlanTasks(v *Track, targets []int, maxTasks int) []Task {
	return groupSegments(decodeRuns(v, targets), maxTasks)
}

// decodeRuns simulates the decoder over targets and returns the runs
// between seeks.
func decodeRuns(v *Track, targets []int) []segment {
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
	perFrame := v.PerFrame()
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
	for _, w := range ws {
		t := w.frame
		key := v.DecodeStart(t)
		s := decodedBy(segs, t, key)
		var last *segment // the current run, or its open-GOP continuation
		if len(segs) > 0 {
			last = &segs[len(segs)-1]
		}
		switch {
		case s != nil && (s != last || key <= s.key):
			// Already decoded, by the current run or an earlier one.
		case s == nil && (last == nil || key > last.end || key < last.key):
			// A keyframe lies between the position and the target (or
			// the target is behind the run's keyframe, or is a leading
			// picture of it): seek to the target's DecodeStart.
			segs = append(segs, segment{key: key, end: t, frames: t - key + 1, bytes: bytesOf(key, t), reordered: reorderedOf(key, t)})
			s = &segs[len(segs)-1]
		default:
			// The run decodes on to t, or has decoded it. When t's GOP
			// starts after the run's keyframe (the run went through an
			// open GOP's keyframe for its leading pictures), a segment
			// starts there, so that a task may start at that keyframe.
			if key > last.key {
				n, b, r := last.end-key+1, bytesOf(key, last.end), reorderedOf(key, last.end)
				segs = append(segs, segment{key: key, end: last.end, frames: n, bytes: b, reordered: r,
					shared: n, sharedBytes: b, sharedReordered: r})
				last = &segs[len(segs)-1]
			}
			if t > last.end {
				last.frames += t - last.end
				last.bytes += bytesOf(last.end+1, t)
				last.reordered += reorderedOf(last.end+1, t)
				last.end = t
			}
			s = last
		}
		s.targets = append(s.targets, t)
		s.slots = append(s.slots, w.slot)
	}
	return segs
}

// decodedBy returns the segment that output frame t, whose DecodeStart is
// key, or nil: the last one whose range holds t and that started at or
// before key (one that started at t's own keyframe did not output t if t
// is a leading picture).
func decodedBy(segs []segment, t, key int) *segment {
	for i := len(segs) - 1; i >= 0; i-- {
		if segs[i].key <= key && t <= segs[i].end {
			return &segs[i]
		}
	}
	return nil
}

// DecodeStart returns the keyframe from which decoding outputs
// decode-order frame f: the last keyframe at or before f, or, when f is
// shown before that keyframe, the keyframe before it (the last one shown
// at or before f). Such a frame is a leading picture of an open GOP
// (x264's open-gop, HEVC's RASL pictures after a CRA keyframe): it refers
// to the GOP before, and FFmpeg drops it when decoding starts at its own
// keyframe. Frames before the first keyframe start at frame 0, and the
// leading pictures of the first keyframe at that keyframe (there is
// nothing before it to decode them from). Closed GOPs have no leading
// pictures.
func (v *Track) DecodeStart(f int) int {
	i := sort.SearchInts(v.Keyframes, f+1) - 1
	if i < 0 {
		return 0
	}
	if v.PerFrame() && f < len(v.FramePTS) {
		for i > 0 && v.FramePTS[f] < v.FramePTS[v.Keyframes[i]] {
			i--
		}
	}
	return v.Keyframes[i]
}

// frameBytes returns a function summing the compressed bytes of frames
// [a, b] in decode order, from per-frame sizes or, when those are
// unknown, the average frame size.
func frameBytes(v *Track) func(a, b int) int64 {
	if !v.PerFrame() {
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
func reorderedFrames(v *Track) func(a, b int) int {
	if !v.PerFrame() {
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
// minimising the largest DecodeFrames with the fewest tasks. A segment
// costs its frames at the start of a task, and its frames less those it
// shares with the segment before inside one.
func groupSegments(segs []segment, maxTasks int) []Task {
	limit := 0 // the smallest achievable maximum
	if maxTasks > 1 && len(segs) > 1 {
		lo, hi := 0, 0
		for _, s := range segs {
			lo, hi = max(lo, s.frames), hi+s.frames-s.shared
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
	var tasks []Task
	for i, s := range segs {
		if i == 0 || limit > 0 && tasks[len(tasks)-1].DecodeFrames+s.frames-s.shared > limit {
			tasks = append(tasks, Task{Keyframe: s.key})
			s.shared, s.sharedBytes, s.sharedReordered = 0, 0, 0
		}
		t := &tasks[len(tasks)-1]
		t.Targets = append(t.Targets, s.targets...)
		t.Slots = append(t.Slots, s.slots...)
		t.DecodeFrames += s.frames - s.shared
		t.DecodeBytes += s.bytes - s.sharedBytes
		t.ReorderedFrames += s.reordered - s.sharedReordered
	}
	return tasks
}

// groupsNeeded counts the groups greedy packing of consecutive runs needs
// when no group may exceed limit frames. Greedy packing is optimal: a
// group costs no more without its first segment, whose frames include
// those the next one shares.
func groupsNeeded(segs []segment, limit int) int {
	n, sum := 1, 0
	for _, s := range segs {
		if sum+s.frames-s.shared > limit {
			n, sum = n+1, s.frames
			continue
		}
		sum += s.frames - s.shared
	}
	return n
}
