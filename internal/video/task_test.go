package video

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"sort"
	"testing"
)

func TestPlanTasks(t *testing.T) {
	clip := cfrClip(30, 10) // keyframes 0, 10, 20; 100 bytes per frame
	// Decode order I0 P3 B1 B2 P6 B4 B5: pts are presentation positions.
	bframes := &Track{Frames: 7, Timescale: 1, Duration: 7, FramePTS: []int64{0, 3, 1, 2, 6, 4, 5},
		FrameBytes: []uint32{10, 5, 1, 1, 5, 1, 1}, Keyframes: []int{0}, Bytes: 24}
	estimated := &Track{Frames: 100, Duration: 4000, Timescale: 1000, FrameCountEstimated: true, Keyframes: []int{0}, Bytes: 1000}
	// An open GOP: I0 P2 B1 P4 B3 | I7 B5 B6 P9 B8, the second keyframe
	// followed by two leading pictures (pts 5 and 6) that refer to P4.
	open := &Track{Frames: 10, Timescale: 1, Duration: 10, FramePTS: []int64{0, 2, 1, 4, 3, 7, 5, 6, 9, 8},
		FrameBytes: []uint32{10, 5, 1, 5, 1, 10, 1, 1, 5, 1}, Keyframes: []int{0, 5}, Bytes: 40}
	all := []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}
	task := func(key int, targets, slots []int, frames int, bytes int64) Task {
		return Task{Keyframe: key, Targets: targets, Slots: slots, DecodeFrames: frames, DecodeBytes: bytes}
	}
	btask := func(key int, targets, slots []int, frames int, bytes int64, reordered int) Task {
		t := task(key, targets, slots, frames, bytes)
		t.ReorderedFrames = reordered
		return t
	}
	tests := []struct {
		name     string
		v        *Track
		targets  []int
		maxTasks int
		want     []Task
	}{
		{"sequential", clip, []int{2, 5, 15, 25}, 1,
			[]Task{task(0, []int{2, 5, 15, 25}, []int{0, 1, 2, 3}, 18, 1800)}},
		{"two workers", clip, []int{2, 5, 15, 25}, 2,
			[]Task{task(0, []int{2, 5, 15}, []int{0, 1, 2}, 12, 1200), task(20, []int{25}, []int{3}, 6, 600)}},
		{"one task per GOP", clip, []int{2, 5, 15, 25}, 8,
			[]Task{task(0, []int{2, 5}, []int{0, 1}, 6, 600), task(10, []int{15}, []int{2}, 6, 600), task(20, []int{25}, []int{3}, 6, 600)}},
		{"no seek inside a GOP", clip, []int{11, 19}, 4,
			[]Task{task(10, []int{11, 19}, []int{0, 1}, 10, 1000)}},
		{"slots follow the input order", clip, []int{25, 2}, 1,
			[]Task{task(0, []int{2, 25}, []int{1, 0}, 9, 900)}},
		{"repeated frame", clip, []int{5, 5}, 1,
			[]Task{task(0, []int{5, 5}, []int{0, 1}, 6, 600)}},
		{"out of range ignored", clip, []int{-1, 40, 3}, 1,
			[]Task{task(0, []int{3}, []int{2}, 4, 400)}},
		{"b-frame needs its anchor", bframes, []int{2}, 1,
			[]Task{btask(0, []int{2}, []int{0}, 3, 16, 1)}},
		{"anchor already decoded", bframes, []int{1, 2}, 1,
			[]Task{btask(0, []int{2, 1}, []int{1, 0}, 3, 16, 1)}},
		{"presentation order across anchors", bframes, []int{4, 2}, 1,
			[]Task{btask(0, []int{2, 4}, []int{1, 0}, 5, 22, 2)}},
		// Decoded from I0, not from I7, where FFmpeg drops it.
		{"leading picture", open, []int{6}, 1,
			[]Task{btask(0, []int{6}, []int{0}, 7, 33, 3)}},
		{"after the leading pictures", open, []int{8}, 1,
			[]Task{btask(5, []int{8}, []int{0}, 4, 17, 2)}},
		// One run through I7; a task may still start at I7, decoding I7
		// B5 B6 again (3 frames, 12 bytes, 2 reordered).
		{"open GOP in one task", open, all, 1,
			[]Task{btask(0, []int{0, 2, 1, 4, 3, 6, 7, 5, 9, 8}, []int{0, 2, 1, 4, 3, 6, 7, 5, 9, 8}, 10, 40, 5)}},
		{"open GOP in two tasks", open, all, 2,
			[]Task{btask(0, []int{0, 2, 1, 4, 3, 6, 7}, []int{0, 2, 1, 4, 3, 6, 7}, 8, 34, 4),
				btask(5, []int{5, 9, 8}, []int{5, 9, 8}, 5, 18, 3)}},
		{"estimated clip", estimated, []int{10, 90}, 4,
			[]Task{task(0, []int{10, 90}, []int{0, 1}, 91, 910)}},
		{"no targets", clip, nil, 1, nil},
	}
	for _, tt := range tests {
		if got := PlanTasks(tt.v, tt.targets, tt.maxTasks); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", tt.name, got, tt.want)
		}
	}
}

// decodeFramesReference counts the frames, bytes and reordered frames the
// decord-style decoder decodes for targets, keeping an explicit bitmap of
// the frames it can output and scanning frame by frame for keyframes. A
// frame shown before its keyframe (a leading picture of an open GOP) is
// decoded from a keyframe shown at or before it, and a run that starts at
// its own keyframe cannot output it.
func decodeFramesReference(v *Track, targets []int) (count int, bytes int64, reordered int) {
	order := append([]int(nil), targets...)
	sort.SliceStable(order, func(a, b int) bool {
		pa, pb := v.FramePTS[order[a]], v.FramePTS[order[b]]
		return pa < pb || pa == pb && order[a] < order[b]
	})
	isKey := make([]bool, v.Frames)
	for _, k := range v.Keyframes {
		isKey[k] = true
	}
	gop := func(i int) int { // the keyframe at or before i, else 0
		for i > 0 && !isKey[i] {
			i--
		}
		return i
	}
	start := func(t int) int {
		k := gop(t)
		for k > 0 && k > v.Keyframes[0] && v.FramePTS[t] < v.FramePTS[k] {
			k = gop(k - 1)
		}
		return k
	}
	output := make([]bool, v.Frames)
	pos, run := -1, 0
	for _, t := range order {
		if output[t] {
			continue
		}
		from := pos + 1
		if s := start(t); pos < 0 || s > pos || s < run {
			from, run = s, s
		}
		for i := from; i <= t; i++ {
			output[i] = output[i] || start(i) >= run
			count++
			bytes += int64(v.FrameBytes[i])
			for j := gop(i); j < i; j++ {
				if v.FramePTS[j] > v.FramePTS[i] {
					reordered++
					break
				}
			}
		}
		pos = t
	}
	return count, bytes, reordered
}

// bestMaxReference returns the smallest possible largest group cost when
// splitting runs into at most k consecutive groups, by trying every
// placement of the cuts. A segment costs its frames at the start of a
// group, less the frames it shares with the one before inside a group.
func bestMaxReference(runs []segment, k int) int {
	best := 1 << 62
	var try func(start, groups, worst int)
	try = func(start, groups, worst int) {
		if start == len(runs) {
			best = min(best, worst)
			return
		}
		if groups == k {
			return
		}
		sum := 0
		for end := start; end < len(runs); end++ {
			sum += runs[end].frames
			if end > start {
				sum -= runs[end].shared
			}
			try(end+1, groups+1, max(worst, sum))
		}
	}
	try(0, 0, 0)
	return best
}

// randomOpenClip is randomClip with open GOPs: each keyframe after the
// first is followed in decode order by up to 3 leading pictures, shown
// before it and after every frame decoded before it.
func randomOpenClip(rng *rand.Rand) *Track {
	n := 1 + rng.IntN(200)
	v := &Track{Timescale: 90000, Frames: n}
	origin := int64(rng.IntN(7000)) - 2000
	for start := 0; start < n; {
		size := min(1+rng.IntN(40), n-start)
		lead := 0
		if start > 0 {
			lead = min(rng.IntN(4), size-1)
		}
		// Display positions start..start+size-1: the leading pictures
		// first, then the keyframe, then anchors each followed by the
		// B-frames shown before it.
		v.Keyframes = append(v.Keyframes, start)
		v.FramePTS = append(v.FramePTS, origin+int64(start+lead)*3000)
		for b := start + lead - 1; b >= start; b-- {
			v.FramePTS = append(v.FramePTS, origin+int64(b)*3000)
		}
		bf := rng.IntN(4)
		for j := start + lead + 1; j < start+size; j += bf + 1 {
			anchor := min(j+bf, start+size-1)
			v.FramePTS = append(v.FramePTS, origin+int64(anchor)*3000)
			for b := j; b < anchor; b++ {
				v.FramePTS = append(v.FramePTS, origin+int64(b)*3000)
			}
		}
		start += size
	}
	for range n {
		b := uint32(50 + rng.IntN(5000))
		v.FrameBytes = append(v.FrameBytes, b)
		v.Bytes += int64(b)
	}
	v.Duration = int64(n) * 3000
	return v
}

func TestPlanTasksRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	continued, cut := 0, 0 // open-GOP continuations, and tasks that start at one
	for iter := 0; iter < 6000; iter++ {
		openGOP := iter >= 3000
		v := randomClip(rng)
		if openGOP {
			v = randomOpenClip(rng)
		}
		var targets []int
		if iter%2 == 0 {
			targets = SampleFrames(v, 1+rng.IntN(32))
		} else {
			for range 1 + rng.IntN(12) {
				targets = append(targets, rng.IntN(v.Frames))
			}
		}
		seq := PlanTasks(v, targets, 1)
		if len(seq) != 1 {
			t.Fatalf("sequential plan has %d tasks", len(seq))
		}
		if want, wantB, wantR := decodeFramesReference(v, targets); seq[0].DecodeFrames != want || seq[0].DecodeBytes != wantB || seq[0].ReorderedFrames != wantR {
			t.Fatalf("clip %d: DecodeFrames %d, DecodeBytes %d, ReorderedFrames %d; reference %d, %d, %d (keyframes %v, pts %v, targets %v)",
				iter, seq[0].DecodeFrames, seq[0].DecodeBytes, seq[0].ReorderedFrames, want, wantB, wantR, v.Keyframes, v.FramePTS, targets)
		}
		runs := decodeRuns(v, targets)
		k := 1 + rng.IntN(4)
		split := PlanTasks(v, targets, k)
		for i, r := range runs {
			if r.shared > 0 {
				continued++
				if slices.ContainsFunc(split, func(t Task) bool { return t.Keyframe == r.key && t.Targets[0] == r.targets[0] }) {
					cut++
				}
			}
			if r.shared > 0 && (i == 0 || !openGOP) {
				t.Fatalf("clip %d: run %d of %+v shares frames; only open-GOP continuations may", iter, i, runs)
			}
		}
		checkTasks(t, v, targets, split, seq[0], k, !openGOP)
		worst := 0
		for _, s := range split {
			worst = max(worst, s.DecodeFrames)
		}
		if len(runs) <= 10 {
			if want := bestMaxReference(runs, k); worst != want {
				t.Fatalf("clip %d: runs %+v into %d tasks: largest %d, optimum %d", iter, runs, k, worst, want)
			}
		}
	}
	if continued < 100 || cut < 20 {
		t.Fatalf("%d open-GOP continuations, %d tasks starting at one: the random clips no longer test them", continued, cut)
	}
	t.Logf("%d open-GOP continuations, %d tasks starting at one", continued, cut)
}

// checkTasks verifies that split tasks cover every valid target slot once,
// start at keyframes before their targets, and each decode what the
// reference decoder decodes for its targets alone; for closed GOPs
// (closed) they add up to the sequential plan, and for open ones to at
// least that.
func checkTasks(t *testing.T, v *Track, targets []int, tasks []Task, seq Task, k int, closed bool) {
	t.Helper()
	if len(tasks) > k {
		t.Fatalf("%d tasks for maxTasks %d", len(tasks), k)
	}
	seen := map[int]bool{}
	frames, bytes, reordered := 0, int64(0), 0
	for _, task := range tasks {
		if task.Keyframe != 0 && sort.SearchInts(v.Keyframes, task.Keyframe) == len(v.Keyframes) {
			t.Fatalf("task keyframe %d not in %v", task.Keyframe, v.Keyframes)
		}
		for j, f := range task.Targets {
			slot := task.Slots[j]
			if seen[slot] || targets[slot] != f || f < task.Keyframe {
				t.Fatalf("task %+v: slot %d (frame %d, targets %v) repeated, wrong or before the keyframe", task, slot, f, targets)
			}
			seen[slot] = true
		}
		if task.ReorderedFrames < 0 || task.ReorderedFrames >= max(task.DecodeFrames, 1) {
			t.Fatalf("task %+v: %d reordered of %d frames (a run starts with a keyframe)", task, task.ReorderedFrames, task.DecodeFrames)
		}
		if n, b, r := decodeFramesReference(v, task.Targets); task.DecodeFrames != n || task.DecodeBytes != b || task.ReorderedFrames != r {
			t.Fatalf("task %+v: the reference decodes %d frames, %d bytes, %d reordered for its targets", task, n, b, r)
		}
		frames += task.DecodeFrames
		bytes += task.DecodeBytes
		reordered += task.ReorderedFrames
	}
	sum := frames == seq.DecodeFrames && bytes == seq.DecodeBytes && reordered == seq.ReorderedFrames
	if !closed {
		sum = frames >= seq.DecodeFrames && bytes >= seq.DecodeBytes && reordered >= seq.ReorderedFrames
	}
	if len(seen) != len(targets) || !sum {
		t.Fatalf("tasks cover %d of %d slots, %d frames %d bytes; sequential %d frames %d bytes", len(seen), len(targets), frames, bytes, seq.DecodeFrames, seq.DecodeBytes)
	}
}
