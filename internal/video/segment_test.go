package video

import (
	"math/big"
	"math/rand/v2"
	"reflect"
	"slices"
	"sort"
	"testing"
)

// sampleRateReference is SampleRate the slow way: every time step k/rate
// in exact rational arithmetic, the frame shown then, duplicates dropped,
// until limit frames or the clip's end.
func sampleRateReference(v *Track, milliFPS int64, limit int) []int {
	order := slices.DeleteFunc(presentationOrder(v), v.Hidden)
	if len(order) == 0 {
		order = presentationOrder(v)
	}
	start, last := v.FramePTS[order[0]], v.FramePTS[order[len(order)-1]]
	step := int64(0)
	if len(order) > 1 {
		step = (last - start) / int64(len(order)-1)
	} else {
		step = v.Duration / int64(v.Frames)
	}
	end := last + max(step, 1)
	var out []int
	for k := int64(0); len(out) < limit; k++ {
		q := new(big.Int).Mul(big.NewInt(k), big.NewInt(1000*int64(v.Timescale)))
		q.Quo(q, big.NewInt(milliFPS))
		if q.Cmp(big.NewInt(end-start)) >= 0 {
			break
		}
		t := start + q.Int64()
		j := max(sort.Search(len(order), func(j int) bool { return v.FramePTS[order[j]] > t })-1, 0)
		if len(out) == 0 || out[len(out)-1] != order[j] {
			out = append(out, order[j])
		}
	}
	return out
}

func TestSampleRateAgainstReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for iter := range 2000 {
		v := randomClip(rng)
		milli := int64(1 + rng.IntN(200_000)) // 0.001 to 200 fps
		limit := 1 + rng.IntN(40)
		got := SampleRate(v, milli, limit)
		if want := sampleRateReference(v, milli, limit); !reflect.DeepEqual(got, want) {
			t.Fatalf("clip %d (pts %v), %d mfps, limit %d: got %v, want %v", iter, v.FramePTS, milli, limit, got, want)
		}
	}
}

func TestSampleRateCFR(t *testing.T) {
	v := cfrClip(250, 25) // 10 s at 25 fps
	for _, tc := range []struct {
		milli int64
		limit int
		want  []int
	}{
		{1000, 100, []int{0, 25, 50, 75, 100, 125, 150, 175, 200, 225}},
		{1000, 3, []int{0, 25, 50}},
		{5000, 4, []int{0, 5, 10, 15}},
		{100_000, 4, []int{0, 1, 2, 3}}, // faster than the clip: its frames in turn
		{100, 100, []int{0}},            // one frame per 10 s
	} {
		if got := SampleRate(v, tc.milli, tc.limit); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%d mfps, limit %d: got %v, want %v", tc.milli, tc.limit, got, tc.want)
		}
	}
}

func TestSampleSegment(t *testing.T) {
	v := cfrClip(100, 10)
	for _, tc := range []struct {
		n, stride, start int
		want             []int
	}{
		{4, 3, 10, []int{10, 13, 16, 19}},
		{4, 3, 1000, []int{90, 93, 96, 99}}, // clamped to the last start
		{4, 50, 0, []int{0, 50}},            // longer than the clip: fewer frames
		{1, 1, 99, []int{99}},
	} {
		got := SampleSegment(v, tc.n, tc.stride, func(count, span int) int { return tc.start })
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("n %d stride %d start %d: got %v, want %v", tc.n, tc.stride, tc.start, got, tc.want)
		}
	}
}
