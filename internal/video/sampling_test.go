package video

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// cfrClip returns a constant-frame-rate clip without reordering: frame i
// has pts i*512 (timescale 12800, 25 fps) and a keyframe every gop frames.
func cfrClip(frames, gop int) *Track {
	v := &Track{Timescale: 12800, Frames: frames, Duration: int64(frames) * 512}
	for i := 0; i < frames; i++ {
		v.FramePTS = append(v.FramePTS, int64(i)*512)
		v.FrameBytes = append(v.FrameBytes, 100)
		if i%gop == 0 {
			v.Keyframes = append(v.Keyframes, i)
		}
	}
	v.Bytes = int64(frames) * 100
	return v
}

// randomClip returns a clip with random GOP lengths, B-frame reordering
// (each anchor decoded before the B-frames shown before it), a random
// pts origin and random frame sizes.
func randomClip(rng *rand.Rand) *Track {
	n := 1 + rng.IntN(200)
	v := &Track{Timescale: 90000, Frames: n}
	origin := int64(rng.IntN(7000)) - 2000 // sometimes an edit-list pre-roll
	for start := 0; start < n; {
		gop := min(1+rng.IntN(40), n-start)
		bf := rng.IntN(4)
		v.Keyframes = append(v.Keyframes, start)
		v.FramePTS = append(v.FramePTS, origin+int64(start)*3000)
		for j := start + 1; j < start+gop; j += bf + 1 {
			anchor := min(j+bf, start+gop-1)
			v.FramePTS = append(v.FramePTS, origin+int64(anchor)*3000)
			for b := j; b < anchor; b++ {
				v.FramePTS = append(v.FramePTS, origin+int64(b)*3000)
			}
		}
		start += gop
	}
	for range n {
		b := uint32(50 + rng.IntN(5000))
		v.FrameBytes = append(v.FrameBytes, b)
		v.Bytes += int64(b)
	}
	v.Duration = int64(n) * 3000
	return v
}

// sampleFramesReference is the dumb version of SampleFrames: for each
// segment centre, scan every frame for the latest pts at or before it.
func sampleFramesReference(v *Track, n int) []int {
	lo, hi, count := int64(1<<62), int64(-1<<62), 0
	for _, p := range v.FramePTS {
		if p >= 0 {
			lo, hi, count = min(lo, p), max(hi, p), count+1
		}
	}
	nonneg := count > 0
	if !nonneg {
		for _, p := range v.FramePTS {
			lo, hi, count = min(lo, p), max(hi, p), count+1
		}
	}
	step := int64(0)
	if count > 1 {
		step = (hi - lo) / int64(count-1)
	} else {
		step = v.Duration / int64(v.Frames)
	}
	end := hi + max(step, 1)
	var out []int
	for k := 0; k < n; k++ {
		c := lo + (end-lo)*int64(2*k+1)/int64(2*n)
		best := -1
		for i, p := range v.FramePTS {
			if (p >= 0 || !nonneg) && p <= c && (best < 0 || p > v.FramePTS[best] || p == v.FramePTS[best] && i < best) {
				best = i
			}
		}
		if best < 0 { // centre before the first frame: take the first
			for i, p := range v.FramePTS {
				if (p >= 0 || !nonneg) && (best < 0 || p < v.FramePTS[best]) {
					best = i
				}
			}
		}
		if len(out) == 0 || out[len(out)-1] != best {
			out = append(out, best)
		}
	}
	return out
}

func TestSampleFrames(t *testing.T) {
	preroll := cfrClip(10, 5)
	for i := range preroll.FramePTS {
		preroll.FramePTS[i] -= 1024 // frames 0 and 1 are pre-roll
	}
	tests := []struct {
		name string
		v    *Track
		n    int
		want []int
	}{
		{"cfr 100 frames", cfrClip(100, 25), 8, []int{6, 18, 31, 43, 56, 68, 81, 93}},
		{"one frame", cfrClip(1, 1), 4, []int{0}},
		{"shorter than n", cfrClip(3, 3), 8, []int{0, 1, 2}},
		{"pre-roll skipped", preroll, 2, []int{4, 8}},
		{"estimated", &Track{Frames: 300, Duration: 10000, Timescale: 1000, FrameCountEstimated: true}, 8, []int{18, 56, 93, 131, 168, 206, 243, 281}},
		{"n zero", cfrClip(10, 5), 0, nil},
		{"no frames", &Track{}, 8, nil},
	}
	for _, tt := range tests {
		if got := SampleFrames(tt.v, tt.n); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: got %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestSampleFramesRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := 0; iter < 2000; iter++ {
		v := randomClip(rng)
		n := 1 + rng.IntN(40)
		got := SampleFrames(v, n)
		if want := sampleFramesReference(v, n); !reflect.DeepEqual(got, want) {
			t.Fatalf("clip %d (frames %d, pts %v), n %d: got %v, want %v", iter, v.Frames, v.FramePTS, n, got, want)
		}
		for i := 1; i < len(got); i++ {
			if v.FramePTS[got[i]] <= v.FramePTS[got[i-1]] {
				t.Fatalf("not strictly increasing in pts: %v", got)
			}
		}
	}
}

func TestFrameTime(t *testing.T) {
	v := &Track{Frames: 300, Duration: 10000, Timescale: 1000, FrameCountEstimated: true}
	for _, tt := range []struct {
		i    int
		want int64
	}{{0, 0}, {1, 33}, {150, 5000}, {299, 9966}} {
		if got := v.FrameTime(tt.i); got != tt.want {
			t.Errorf("estimated FrameTime(%d) = %d, want %d", tt.i, got, tt.want)
		}
	}
	c := cfrClip(10, 5)
	if got := c.FrameTime(3); got != 1536 {
		t.Errorf("FrameTime(3) = %d, want 1536", got)
	}
}

// TestSpread checks Spread against the rule it states, slot k holding
// frame k*n/f, on every n for a few f, with planes of 2 bytes marked by
// their frame.
func TestSpread(t *testing.T) {
	const plane = 2
	for _, f := range []int{1, 3, 8, 13} {
		for n := 0; n <= f+1; n++ {
			dst := make([]byte, f*plane)
			for k := range min(n, f) {
				dst[k*plane], dst[k*plane+1] = byte(k+1), byte(k+1)
			}
			want := slices.Clone(dst)
			if n > 0 && n < f {
				for k := range f {
					want[k*plane], want[k*plane+1] = byte(k*n/f+1), byte(k*n/f+1)
				}
			}
			Spread(dst, f, plane, n)
			if !slices.Equal(dst, want) {
				t.Errorf("Spread(f %d, n %d): got %v, want %v", f, n, dst, want)
			}
		}
	}
	short := []byte{1, 1, 2, 2} // two slots of a tensor of four: left alone
	Spread(short, 4, plane, 1)
	if !slices.Equal(short, []byte{1, 1, 2, 2}) {
		t.Errorf("Spread on a short tensor wrote %v", short)
	}
}
