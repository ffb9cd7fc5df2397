package decoding

import (
	"math"
	"math/rand/v2"
	"testing"
)

// resizeReference computes every output pixel directly as the 2-D product
// of the float triangle weights, with no fixed point and no intermediate
// rounding.
func resizeReference(dst []byte, dw, dh int, src []byte, sw, sh int) {
	for y := range dh {
		y0, wy := triangleWeights(y, sh, dh)
		for x := range dw {
			x0, wx := triangleWeights(x, sw, dw)
			for c := range 3 {
				s := 0.0
				for j, a := range wy {
					for i, b := range wx {
						s += a * b * float64(src[((y0+j)*sw+x0+i)*3+c])
					}
				}
				dst[(y*dw+x)*3+c] = byte(math.Min(255, math.Max(0, math.Round(s))))
			}
		}
	}
}

func TestResizeMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	sizes := [][4]int{{1, 1, 3, 3}, {7, 5, 7, 5}, {313, 235, 224, 224}, {100, 60, 224, 224}, {640, 40, 17, 33}, {2, 3, 1, 1}}
	for range 12 {
		sizes = append(sizes, [4]int{1 + rng.IntN(300), 1 + rng.IntN(300), 1 + rng.IntN(120), 1 + rng.IntN(120)})
	}
	for _, s := range sizes {
		sw, sh, dw, dh := s[0], s[1], s[2], s[3]
		src := make([]byte, sw*sh*3)
		for i := range src {
			src[i] = byte(rng.Uint32())
		}
		got := make([]byte, dw*dh*3)
		want := make([]byte, dw*dh*3)
		resizeRGB(got, dw, dh, src, sw, sh)
		resizeReference(want, dw, dh, src, sw, sh)
		worst := 0
		for i := range got {
			d := int(got[i]) - int(want[i])
			worst = max(worst, d, -d)
		}
		// Two roundings (row pass, column pass) and 14-bit weights.
		if worst > 2 {
			t.Errorf("%dx%d -> %dx%d: got max diff %d from the reference, want <= 2", sw, sh, dw, dh, worst)
		}
	}
}

func TestResizeProperties(t *testing.T) {
	// A constant image stays constant at any size.
	src := make([]byte, 37*23*3)
	for i := range src {
		src[i] = []byte{10, 200, 77}[i%3]
	}
	dst := make([]byte, 224*224*3)
	resizeRGB(dst, 224, 224, src, 37, 23)
	for i, v := range dst {
		if want := []byte{10, 200, 77}[i%3]; v != want {
			t.Fatalf("constant image: byte %d: got %d, want %d", i, v, want)
		}
	}
	// Halving a 2x2 checkerboard of 0/255 averages it.
	cb := []byte{0, 0, 0, 255, 255, 255, 255, 255, 255, 0, 0, 0}
	one := make([]byte, 3)
	resizeRGB(one, 1, 1, cb, 2, 2)
	for i, v := range one {
		if v < 127 || v > 128 {
			t.Errorf("checkerboard mean: channel %d: got %d, want 127 or 128", i, v)
		}
	}
}

func BenchmarkResize313x235To224(b *testing.B) {
	src := make([]byte, 313*235*3)
	dst := make([]byte, 224*224*3)
	for b.Loop() {
		resizeRGB(dst, 224, 224, src, 313, 235)
	}
}
