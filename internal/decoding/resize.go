package decoding

import "math"

// Images are resized with one method, shared by JPEG, PNG and WebP: a
// separable triangle (bilinear) filter whose support widens by the scale
// factor when shrinking, as PIL's Image.resize(BILINEAR) and swscale's
// SWS_BILINEAR (which the video path uses) do, so a downscale averages
// every source pixel instead of aliasing. Pixel centres are at +0.5; edges
// are clamped by renormalising the weights. Arithmetic is fixed point with
// 14-bit weights and an 8-bit intermediate row pass.

const resizeBits = 14

// resizeTaps holds, per output coordinate, the first source coordinate and
// the fixed-point weights of the source coordinates from there on.
type resizeTaps struct {
	start []int
	n     int     // taps per output coordinate
	w     []int32 // len(start)*n weights, each row summing to 1<<resizeBits
}

// triangleWeights returns the normalised float weights of output
// coordinate i when resampling in samples to out, and the first source
// coordinate they apply to.
func triangleWeights(i, in, out int) (start int, w []float64) {
	scale := float64(in) / float64(out)
	support := math.Max(scale, 1)
	center := (float64(i) + 0.5) * scale
	lo := max(int(math.Floor(center-support)), 0)
	hi := min(int(math.Ceil(center+support)), in)
	sum := 0.0
	for j := lo; j < hi; j++ {
		v := math.Max(0, 1-math.Abs((float64(j)+0.5-center)/support))
		w = append(w, v)
		sum += v
	}
	if sum == 0 { // cannot happen for in, out >= 1; keep the nearest sample
		return min(int(center), in-1), []float64{1}
	}
	for k := range w {
		w[k] /= sum
	}
	return lo, w
}

func newResizeTaps(in, out int) resizeTaps {
	t := resizeTaps{start: make([]int, out)}
	ws := make([][]float64, out)
	for i := range out {
		t.start[i], ws[i] = triangleWeights(i, in, out)
		t.n = max(t.n, len(ws[i]))
	}
	t.w = make([]int32, out*t.n)
	for i, w := range ws {
		row := t.w[i*t.n : (i+1)*t.n]
		var sum int32
		big := 0
		for k, v := range w {
			row[k] = int32(math.Round(v * (1 << resizeBits)))
			sum += row[k]
			if row[k] > row[big] {
				big = k
			}
		}
		row[big] += 1<<resizeBits - sum // exact unit gain
		if t.start[i]+t.n > in {        // keep every tap inside the source
			shift := t.start[i] + t.n - in
			copy(row[shift:], row[:t.n-shift])
			clear(row[:shift])
			t.start[i] -= shift
		}
	}
	return t
}

func clampByte(v int32) byte {
	v = (v + 1<<(resizeBits-1)) >> resizeBits
	return byte(min(max(v, 0), 255))
}

// resizeRGB resamples the packed RGB image src (sw x sh) into dst (dw x dh,
// packed RGB, len dw*dh*3).
func resizeRGB(dst []byte, dw, dh int, src []byte, sw, sh int) {
	if sw == dw && sh == dh {
		copy(dst, src[:dw*dh*3])
		return
	}
	h := newResizeTaps(sw, dw)
	v := newResizeTaps(sh, dh)
	// Horizontal pass over every source row into tmp (sh x dw).
	tmp := make([]byte, sh*dw*3)
	n := h.n
	for y := range sh {
		srow := src[y*sw*3 : (y+1)*sw*3]
		trow := tmp[y*dw*3 : (y+1)*dw*3]
		for x := range dw {
			ws := h.w[x*n : x*n+n]
			p := srow[h.start[x]*3 : h.start[x]*3+3*n]
			var r, g, b int32
			for k, w := range ws {
				q := p[3*k : 3*k+3 : 3*k+3]
				r += w * int32(q[0])
				g += w * int32(q[1])
				b += w * int32(q[2])
			}
			o := trow[3*x : 3*x+3 : 3*x+3]
			o[0], o[1], o[2] = clampByte(r), clampByte(g), clampByte(b)
		}
	}
	// Vertical pass: accumulate the weighted source rows of each output row.
	acc := make([]int32, dw*3)
	for y := range dh {
		clear(acc)
		ws := v.w[y*v.n : (y+1)*v.n]
		for k, w := range ws {
			if w == 0 {
				continue
			}
			trow := tmp[(v.start[y]+k)*dw*3 : (v.start[y]+k+1)*dw*3]
			a := acc[:len(trow)]
			for i, c := range trow {
				a[i] += w * int32(c)
			}
		}
		drow := dst[y*dw*3 : (y+1)*dw*3]
		a := acc[:len(drow)]
		for i := range drow {
			drow[i] = clampByte(a[i])
		}
	}
}
