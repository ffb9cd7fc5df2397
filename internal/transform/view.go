package transform

import "math"

// Rect is a rectangle of a picture, in its pixels: columns X..X+W-1,
// rows Y..Y+H-1.
type Rect struct{ X, Y, W, H int }

// View is what one picture's transform does: the rectangle of the
// upright source that is scaled to S x S, and whether the result is
// mirrored left to right.
type View struct {
	Crop Rect
	Flip bool
}

// Whole reports whether v is the whole w x h picture, unflipped: the
// squash of today's decoder.
func (v View) Whole(w, h int) bool {
	return !v.Flip && v.Crop == Rect{0, 0, w, h}
}

// View returns the transform of picture index (a document's image
// number; 0 for a clip, whose frames share one) of the sample key handed
// out in epoch, whose upright source is w x h pixels. A picture too
// small for the crop is not refused: the crop is the picture's own
// rectangle and the decoder scales it up to S x S.
func (s Spec) View(epoch int, key string, index, w, h int) View {
	s = s.WithDefaults()
	w, h = max(w, 1), max(h, 1)
	v := View{Crop: Rect{0, 0, w, h}}
	seed := Seed(s.Seed, epoch, key)
	switch s.Resize {
	case ShortSide:
		side := min(w, h)
		v.Crop = Rect{(w - side) / 2, (h - side) / 2, side, side}
	case RandomCrop:
		v.Crop = randomCrop(stream(seed, streamCrop, index), w, h, s.Scale, s.Ratio)
	}
	if s.HFlip > 0 {
		v.Flip = stream(seed, streamFlip, index).Float64() < s.HFlip
	}
	return v
}

// randomCrop is torchvision's RandomResizedCrop.get_params: up to 10
// tries of an area fraction uniform in scale and an aspect ratio
// log-uniform in ratio, the first that fits placed uniformly; else the
// whole picture cut to the nearest ratio in range, centred.
func randomCrop(r *Rand, w, h int, scale, ratio [2]float64) Rect {
	area := float64(w) * float64(h)
	for range 10 {
		target := float64(area * r.uniform(scale[0], scale[1]))
		aspect := r.logUniform(ratio[0], ratio[1])
		cw := int(math.Round(math.Sqrt(float64(target * aspect))))
		ch := int(math.Round(math.Sqrt(float64(target / aspect))))
		if cw > 0 && cw <= w && ch > 0 && ch <= h {
			y := r.Intn(h - ch + 1)
			x := r.Intn(w - cw + 1)
			return Rect{x, y, cw, ch}
		}
	}
	in := float64(w) / float64(h)
	cw, ch := w, h
	switch {
	case in < ratio[0]:
		ch = max(min(int(math.Round(float64(w)/ratio[0])), h), 1)
	case in > ratio[1]:
		cw = max(min(int(math.Round(float64(float64(h)*ratio[1]))), w), 1)
	}
	return Rect{(w - cw) / 2, (h - ch) / 2, cw, ch}
}

// Scaled maps r, a rectangle of a w x h picture, onto the same picture
// decoded at sw x sh (a JPEG's DCT-scaled size): the smallest whole-pixel
// rectangle covering it, inside the picture.
func (r Rect) Scaled(w, h, sw, sh int) Rect {
	if w == sw && h == sh {
		return r
	}
	x0 := r.X * sw / w
	y0 := r.Y * sh / h
	x1 := min(ceilDiv((r.X+r.W)*sw, w), sw)
	y1 := min(ceilDiv((r.Y+r.H)*sh, h), sh)
	return Rect{x0, y0, max(x1-x0, 1), max(y1-y0, 1)}
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// SegmentStart returns the first index, in 0..n-span, of Segment's frames
// for the sample key of epoch: uniform over the places a span of frames
// fits among n, 0 when it does not.
func (s Spec) SegmentStart(epoch int, key string, n, span int) int {
	if n <= span {
		return 0
	}
	return stream(Seed(s.Seed, epoch, key), streamSegment, 0).Intn(n - span + 1)
}
