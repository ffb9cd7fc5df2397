package decode

import (
	"math/rand/v2"
	"reflect"
	"sort"
	"testing"
)

func TestPlanVideoTasks(t *testing.T) {
	clip := cfrClip(30, 10) // keyframes 0, 10, 20; 100 bytes per frame
	// Decode order I0 P3 B1 B2 P6 B4 B5: pts are presentation positions.
	bframes := &VideoInfo{Frames: 7, Timescale: 1, Duration: 7, FramePTS: []int64{0, 3, 1, 2, 6, 4, 5},
		FrameBytes: []uint32{10, 5, 1, 1, 5, 1, 1}, Keyframes: []int{0}, Bytes: 24}
	estimated := &VideoInfo{Frames: 100, Duration: 4000, Timescale: 1000, FrameCountEstimated: true, Keyframes: []int{0}, Bytes: 1000}
	task := func(key int, targets, slots []int, frames int, bytes int64) VideoTask {
		return VideoTask{Keyframe: key, Targets: targets, Slots: slots, DecodeFrames: frames, DecodeBytes: bytes}
	}
	btask := func(key int, targets, slots []int, frames int, bytes int64, reordered int) VideoTask {
		t := task(key, targets, slots, frames, bytes)
		t.ReorderedFrames = reordered
		return t
	}
	tests := []struct {
		name     string
		v        *VideoInfo
		targets  []int
		maxTasks int
		want     []VideoTask
	}{
		{"sequential", clip, []int{2, 5, 15, 25}, 1,
			[]VideoTask{task(0, []int{2, 5, 15, 25}, []int{0, 1, 2, 3}, 18, 1800)}},
		{"two workers", clip, []int{2, 5, 15, 25}, 2,
			[]VideoTask{task(0, []int{2, 5, 15}, []int{0, 1, 2}, 12, 1200), task(20, []int{25}, []int{3}, 6, 600)}},
		{"one task per GOP", clip, []int{2, 5, 15, 25}, 8,
			[]VideoTask{task(0, []int{2, 5}, []int{0, 1}, 6, 600), task(10, []int{15}, []int{2}, 6, 600), task(20, []int{25}, []int{3}, 6, 600)}},
		{"no seek inside a GOP", clip, []int{11, 19}, 4,
			[]VideoTask{task(10, []int{11, 19}, []int{0, 1}, 10, 1000)}},
		{"slots follow the input order", clip, []int{25, 2}, 1,
			[]VideoTask{task(0, []int{2, 25}, []int{1, 0}, 9, 900)}},
		{"repeated frame", clip, []int{5, 5}, 1,
			[]VideoTask{task(0, []int{5, 5}, []int{0, 1}, 6, 600)}},
		{"out of range ignored", clip, []int{-1, 40, 3}, 1,
			[]VideoTask{task(0, []int{3}, []int{2}, 4, 400)}},
		{"b-frame needs its anchor", bframes, []int{2}, 1,
			[]VideoTask{btask(0, []int{2}, []int{0}, 3, 16, 1)}},
		{"anchor already decoded", bframes, []int{1, 2}, 1,
			[]VideoTask{btask(0, []int{2, 1}, []int{1, 0}, 3, 16, 1)}},
		{"presentation order across anchors", bframes, []int{4, 2}, 1,
			[]VideoTask{btask(0, []int{2, 4}, []int{1, 0}, 5, 22, 2)}},
		{"estimated clip", estimated, []int{10, 90}, 4,
			[]VideoTask{task(0, []int{10, 90}, []int{0, 1}, 91, 910)}},
		{"no targets", clip, nil, 1, nil},
	}
	for _, tt := range tests {
		if got := PlanVideoTasks(tt.v, tt.targets, tt.maxTasks); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", tt.name, got, tt.want)
		}
	}
}

// decodeFramesReference counts the frames the decord-style decoder
// decodes for targets, keeping an explicit bitmap of decoded frames and a
// linear keyframe scan.
func decodeFramesReference(v *VideoInfo, targets []int) (count, reordered int) {
	order := append([]int(nil), targets...)
	sort.SliceStable(order, func(a, b int) bool {
		pa, pb := v.FramePTS[order[a]], v.FramePTS[order[b]]
		return pa < pb || pa == pb && order[a] < order[b]
	})
	decoded := make([]bool, v.Frames)
	pos := -1
	isKey := make([]bool, v.Frames)
	for _, k := range v.Keyframes {
		isKey[k] = true
	}
	for _, t := range order {
		if decoded[t] {
			continue
		}
		from := pos + 1
		keyBetween := false
		for i := pos + 1; i <= t; i++ {
			keyBetween = keyBetween || isKey[i]
		}
		if keyBetween || t < pos || pos < 0 {
			from = t
			for !isKey[from] && from > 0 {
				from--
			}
		}
		for i := from; i <= t; i++ {
			decoded[i] = true
			count++
			g := i
			for g > 0 && !isKey[g] {
				g--
			}
			for j := g; j < i; j++ {
				if v.FramePTS[j] > v.FramePTS[i] {
					reordered++
					break
				}
			}
		}
		pos = t
	}
	return count, reordered
}

// bestMaxReference returns the smallest possible largest group sum when
// splitting runs into at most k consecutive groups, by trying every
// placement of the cuts.
func bestMaxReference(runs []int, k int) int {
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
			sum += runs[end]
			try(end+1, groups+1, max(worst, sum))
		}
	}
	try(0, 0, 0)
	return best
}

func TestPlanVideoTasksRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for iter := 0; iter < 3000; iter++ {
		v := randomClip(rng)
		var targets []int
		if iter%2 == 0 {
			targets = SampleFrames(v, 1+rng.IntN(32))
		} else {
			for range 1 + rng.IntN(12) {
				targets = append(targets, rng.IntN(v.Frames))
			}
		}
		seq := PlanVideoTasks(v, targets, 1)
		if len(seq) != 1 {
			t.Fatalf("sequential plan has %d tasks", len(seq))
		}
		if want, wantR := decodeFramesReference(v, targets); seq[0].DecodeFrames != want || seq[0].ReorderedFrames != wantR {
			t.Fatalf("clip %d: DecodeFrames %d, ReorderedFrames %d; reference %d, %d (keyframes %v, pts %v, targets %v)",
				iter, seq[0].DecodeFrames, seq[0].ReorderedFrames, want, wantR, v.Keyframes, v.FramePTS, targets)
		}
		var runFrames []int
		for _, r := range decodeRuns(v, targets) {
			runFrames = append(runFrames, r.frames)
		}
		k := 1 + rng.IntN(4)
		split := PlanVideoTasks(v, targets, k)
		checkTasks(t, v, targets, split, seq[0], k)
		worst := 0
		for _, s := range split {
			worst = max(worst, s.DecodeFrames)
		}
		if len(runFrames) <= 10 {
			if want := bestMaxReference(runFrames, k); worst != want {
				t.Fatalf("runs %v into %d tasks: largest %d, optimum %d", runFrames, k, worst, want)
			}
		}
	}
}

// checkTasks verifies that split tasks cover every valid target slot once,
// start at keyframes before their targets, and add up to the sequential
// plan.
func checkTasks(t *testing.T, v *VideoInfo, targets []int, tasks []VideoTask, seq VideoTask, k int) {
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
		frames += task.DecodeFrames
		bytes += task.DecodeBytes
		reordered += task.ReorderedFrames
	}
	if len(seen) != len(targets) || frames != seq.DecodeFrames || bytes != seq.DecodeBytes || reordered != seq.ReorderedFrames {
		t.Fatalf("tasks cover %d of %d slots, %d frames %d bytes; sequential %d frames %d bytes", len(seen), len(targets), frames, bytes, seq.DecodeFrames, seq.DecodeBytes)
	}
}

// BenchmarkPlanVideoTasks plans 8 frames of the 30 s clip into 4 tasks.
func BenchmarkPlanVideoTasks(b *testing.B) {
	v, err := ParseMP4(readVideo(b, "h264_30s.mp4"))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		PlanVideoTasks(v, SampleFrames(v, 8), 4)
	}
}
