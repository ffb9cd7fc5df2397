package av

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"testing"
)

const testSize = 64

// stream is what the tests know of a clip: its packets in decode order and
// the decode-order indices sorted by presentation time.
type stream struct {
	data  []byte
	pk    []Packet
	order []int // decode-order indices in presentation order
	tb    Rational
}

func loadStream(t testing.TB, data []byte) stream {
	t.Helper()
	pk, info, err := Packets(context.Background(), data, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	order := make([]int, len(pk))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool { return pk[order[a]].PTS < pk[order[b]].PTS })
	return stream{data: data, pk: pk, order: order, tb: info.TimeBase}
}

// plan builds targets for decode-order frames idx (sorted by pts) the way
// video.PlanTasks does for one task: seek to a target's keyframe
// only when it lies after everything fed to the decoder so far.
func (s stream) plan(idx []int) []Target {
	keyOf := func(i int) int {
		for k := i; k >= 0; k-- {
			if s.pk[k].Key {
				return k
			}
		}
		return 0
	}
	fed := -1
	var out []Target
	for slot, i := range idx {
		t := Target{PTS: s.pk[i].PTS, Slot: slot}
		if k := keyOf(i); k > fed && (fed >= 0 || k > 0) {
			t.Seek, t.SeekPTS = SeekTo, s.pk[k].PTS
		}
		fed = max(fed, i)
		out = append(out, t)
	}
	return out
}

func cfgSize(n int) Config {
	c := DefaultConfig()
	c.Width, c.Height = n, n
	return c
}

// reference decodes every frame in presentation order, sequentially.
func (s stream) reference(t testing.TB) []byte {
	t.Helper()
	targets := make([]Target, len(s.order))
	for slot, i := range s.order {
		targets[slot] = Target{PTS: s.pk[i].PTS, Slot: slot}
	}
	dst := make([]byte, len(targets)*testSize*testSize*3)
	st, err := DecodeTargets(context.Background(), s.data, cfgSize(testSize), Rational{}, targets, dst)
	if err != nil {
		t.Fatal(err)
	}
	if st.Missed != 0 || st.Seeks != 0 || st.FramesDecoded != len(s.pk) {
		t.Fatalf("reference: got missed %d seeks %d frames %d, want 0 0 %d", st.Missed, st.Seeks, st.FramesDecoded, len(s.pk))
	}
	return dst
}

func TestDecodeTargetsMatchesSequentialDecode(t *testing.T) {
	plane := testSize * testSize * 3
	for _, name := range clips {
		t.Run(name, func(t *testing.T) {
			s := loadStream(t, readMedia(t, name))
			ref := s.reference(t)
			rng := rand.New(rand.NewPCG(1, uint64(len(name))))
			for trial := range 12 {
				// Random frames in presentation order, with repeats.
				n := 1 + rng.IntN(10)
				var pos []int
				for range n {
					pos = append(pos, rng.IntN(len(s.order)))
				}
				slices.Sort(pos)
				idx := make([]int, n)
				for j, p := range pos {
					idx[j] = s.order[p]
				}
				for _, skip := range []bool{false, true} {
					cfg := cfgSize(testSize)
					cfg.SkipNonRef = skip
					targets := s.plan(idx)
					dst := make([]byte, n*plane)
					st, err := DecodeTargets(context.Background(), s.data, cfg, Rational{}, targets, dst)
					if err != nil {
						t.Fatalf("trial %d: %v", trial, err)
					}
					if st.Missed != 0 {
						t.Errorf("trial %d skip %v: got %d missed targets, want 0", trial, skip, st.Missed)
					}
					for j, p := range pos {
						if targets[j].Got != targets[j].PTS {
							t.Errorf("trial %d: target %d: got pts %d, want %d", trial, j, targets[j].Got, targets[j].PTS)
						}
						if !bytes.Equal(dst[j*plane:(j+1)*plane], ref[p*plane:(p+1)*plane]) {
							t.Errorf("trial %d skip %v: frame at presentation position %d differs from the sequential decode", trial, skip, p)
						}
					}
					if skip && st.FramesDecoded > len(s.pk) {
						t.Errorf("trial %d: decoded %d frames of %d", trial, st.FramesDecoded, len(s.pk))
					}
				}
			}
		})
	}
}

func TestDecodeTargetsSeeksSaveWork(t *testing.T) {
	s := loadStream(t, readMedia(t, "h264_bframes.mp4")) // 90 frames, keyframe every 30
	last := s.order[len(s.order)-1]
	for _, tc := range []struct {
		skip      bool
		maxFrames int
	}{{false, 34}, {true, 24}} {
		cfg := cfgSize(testSize)
		cfg.SkipNonRef = tc.skip
		targets := s.plan([]int{last})
		if targets[0].Seek != SeekTo {
			t.Fatalf("plan: got seek %v, want SeekTo", targets[0].Seek)
		}
		st, err := DecodeTargets(context.Background(), s.data, cfg, Rational{}, targets, make([]byte, testSize*testSize*3))
		if err != nil {
			t.Fatal(err)
		}
		if st.Seeks != 1 || st.FramesDecoded > tc.maxFrames {
			t.Errorf("skip %v: got %d seeks, %d frames decoded; want 1 seek, at most %d frames", tc.skip, st.Seeks, st.FramesDecoded, tc.maxFrames)
		}
	}
}

func TestDecodeTargetsShownAtAndAuto(t *testing.T) {
	for _, name := range []string{"vp9.webm", "h264_bframes.mp4", "h264_audio.mkv"} {
		s := loadStream(t, readMedia(t, name))
		ref := s.reference(t)
		plane := testSize * testSize * 3
		// Targets in microseconds, two thirds of a frame after frames 3,
		// 40, 41 and beyond the end: the frame shown then (the one before
		// the target; the last one at the end) is used.
		us := Rational{1, 1_000_000}
		frame := func(p int) int64 { return rescale(s.pk[s.order[p]].PTS, s.tb, us) }
		n := len(s.order)
		step := frame(1) - frame(0)
		pos := []int{3, min(40, n-2), min(41, n-1), n - 1}
		var targets []Target
		for slot, p := range pos {
			targets = append(targets, Target{PTS: frame(p) + 2*step/3, Slot: slot, Seek: SeekAuto})
		}
		targets[len(targets)-1].PTS += 10 * step
		dst := make([]byte, len(pos)*plane)
		st, err := DecodeTargets(context.Background(), s.data, cfgSize(testSize), us, targets, dst)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for j, p := range pos {
			if want := s.pk[s.order[p]].PTS; targets[j].Got != want {
				t.Errorf("%s: target %d: got pts %d, want %d", name, j, targets[j].Got, want)
			}
			if !bytes.Equal(dst[j*plane:(j+1)*plane], ref[p*plane:(p+1)*plane]) {
				t.Errorf("%s: target %d: frame differs from the sequential decode", name, j)
			}
		}
		if st.Missed != len(pos) {
			t.Errorf("%s: got %d missed, want %d (no target is on a frame)", name, st.Missed, len(pos))
		}
	}
}

// TestDecodeTargetsMatchesFFmpegScale checks the colour conversion against
// the ffmpeg CLI's bilinear scale to rgb24 of the same frames.
func TestDecodeTargetsMatchesFFmpegScale(t *testing.T) {
	ff := needFFmpeg(t)
	for _, name := range []string{"h264_bframes.mp4", "vp9.webm", "h264_intra444.mp4"} {
		path := filepath.Join(mediaDir, name)
		out, err := exec.Command(ff, "-nostdin", "-v", "error", "-i", path, "-map", "0:v:0", "-vf", "scale=64:64:flags=bilinear", "-pix_fmt", "rgb24", "-f", "rawvideo", "-").Output()
		if err != nil {
			t.Fatal(err)
		}
		data, _ := os.ReadFile(path)
		ref := loadStream(t, data).reference(t)
		if len(out) != len(ref) {
			t.Fatalf("%s: got %d bytes, ffmpeg %d", name, len(ref), len(out))
		}
		var sum, worst int
		for i := range ref {
			d := int(ref[i]) - int(out[i])
			d = max(d, -d)
			sum += d
			worst = max(worst, d)
		}
		if mean := float64(sum) / float64(len(ref)); mean > 0.5 || worst > 8 {
			t.Errorf("%s: got mean abs diff %.3f, max %d against ffmpeg's scale; want <= 0.5, <= 8", name, mean, worst)
		}
	}
}

func TestDecodeTargetsArguments(t *testing.T) {
	data := readMedia(t, "h264_bframes.mp4")
	plane := testSize * testSize * 3
	tests := []struct {
		name    string
		targets []Target
		dst     int
	}{
		{"slot beyond dst", []Target{{PTS: 0, Slot: 1}}, plane},
		{"negative slot", []Target{{PTS: 0, Slot: -1}}, plane},
		{"unsorted", []Target{{PTS: 512, Slot: 0}, {PTS: 0, Slot: 1}}, 2 * plane},
	}
	for _, tc := range tests {
		_, err := DecodeTargets(context.Background(), data, cfgSize(testSize), Rational{}, tc.targets, make([]byte, tc.dst))
		if !errors.Is(err, ErrConfig) {
			t.Errorf("%s: got %v, want ErrConfig", tc.name, err)
		}
	}
}
