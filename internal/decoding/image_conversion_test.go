package decoding

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"os/exec"
	"testing"
)

// encodePNG encodes m with image/png, which writes an *image.NRGBA64 that
// is not opaque as 16-bit RGBA, an opaque *image.RGBA64 as 16-bit RGB and
// an *image.Gray16 as 16-bit gray.
func encodePNG(t *testing.T, m image.Image) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := png.Encode(&buf, m); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func decodeRGB(t *testing.T, name string, data []byte) []byte {
	t.Helper()
	img, err := decodeImageRGB(data, 1<<24, 0)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return img.Pix
}

// round16 is FFmpeg's 16-to-8-bit rounding, written independently of to8.
func round16(v uint16) byte { return byte(min((int(v)+128)>>8, 255)) }

// TestPNG16Bit checks 16-bit PNGs: every sample rounds as FFmpeg rounds it,
// and a see-through pixel keeps its stored colour (alpha is dropped, not
// premultiplied), as it does for 8-bit RGBA.
func TestPNG16Bit(t *testing.T) {
	vals := []uint16{0, 0x007f, 0x0080, 0x00ff, 0x1234, 0x7f80, 0x8000, 0xfe7f, 0xff7f, 0xff80, 0xffff}
	alphas := []uint16{0, 1, 0x8000, 0xfffe}
	rgba := image.NewNRGBA64(image.Rect(0, 0, len(vals), len(alphas)))
	rgb := image.NewRGBA64(image.Rect(0, 0, len(vals), 1))
	gray := image.NewGray16(image.Rect(0, 0, len(vals), 1))
	var wantRGBA, wantRGB, wantGray []byte
	for y, a := range alphas {
		for x, v := range vals {
			c := color.NRGBA64{R: v, G: ^v, B: v / 3, A: a}
			rgba.SetNRGBA64(x, y, c)
			wantRGBA = append(wantRGBA, round16(c.R), round16(c.G), round16(c.B))
		}
	}
	for x, v := range vals {
		rgb.SetRGBA64(x, 0, color.RGBA64{R: ^v, G: v, B: v / 5, A: 0xffff})
		wantRGB = append(wantRGB, round16(^v), round16(v), round16(v/5))
		gray.SetGray16(x, 0, color.Gray16{Y: v})
		wantGray = append(wantGray, round16(v), round16(v), round16(v))
	}
	for _, tc := range []struct {
		name string
		m    image.Image
		want []byte
	}{{"rgba64", rgba, wantRGBA}, {"rgb48", rgb, wantRGB}, {"gray16", gray, wantGray}} {
		if got := decodeRGB(t, tc.name, encodePNG(t, tc.m)); !bytes.Equal(got, tc.want) {
			t.Errorf("%s: got pixels\n%v\nwant\n%v", tc.name, got, tc.want)
		}
	}
}

// TestWebPLossyLimitedRange checks that lossy WebP (VP8, limited-range
// BT.601) is converted with the limited range: a white picture stays 255,
// not JFIF's 235.
func TestWebPLossyLimitedRange(t *testing.T) {
	pix := decodeRGB(t, "white.webp", readImage(t, "white.webp"))
	for i, v := range pix {
		if v != 255 {
			t.Fatalf("white.webp: got byte %d = %d, want 255", i, v)
		}
	}
	// Every legal sample within 3 of the exact limited-range BT.601
	// formula (FFmpeg's fixed point truncates each of up to three terms).
	for yy := 16; yy <= 235; yy++ {
		for cb := 16; cb <= 240; cb += 2 {
			for cr := 16; cr <= 240; cr += 2 {
				y, u, v := 255.0/219*float64(yy-16), float64(cb-128), float64(cr-128)
				want := [3]float64{y + 1.596027*v, y - 0.391762*u - 0.812968*v, y + 2.017232*u}
				r, g, b := ycbcrToRGB(uint8(yy), uint8(cb), uint8(cr))
				for i, got := range [3]uint8{r, g, b} {
					if w := min(max(want[i], 0), 255); float64(got) < w-3 || float64(got) > w+3 {
						t.Fatalf("ycbcrToRGB(%d, %d, %d): got channel %d = %d, want %.1f +-3", yy, cb, cr, i, got, w)
					}
				}
			}
		}
	}
}

// ffmpeg runs the ffmpeg CLI on an image file's bytes, with args after
// the input, and returns its output, or skips the test when the CLI is not
// installed.
func ffmpeg(t *testing.T, data []byte, args ...string) []byte {
	t.Helper()
	ff, err := exec.LookPath("ffmpeg")
	if err != nil {
		t.Skip("ffmpeg CLI not installed")
	}
	cmd := exec.Command(ff, append([]string{"-v", "error", "-i", "-"}, args...)...)
	cmd.Stdin = bytes.NewReader(data)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ffmpeg: %v: %s", err, stderr.Bytes())
	}
	return out
}

// TestImageRGBMatchesFFmpeg compares decoded pixels with `ffmpeg -pix_fmt
// rgb24` (the reference README promises for PNG): byte for byte for 16-bit
// gray and gray+alpha PNGs holding every value and for lossy WebPs (of even
// height, which FFmpeg converts without interpolating chroma); within 1 for
// a 16-bit RGBA PNG with see-through pixels, whose colour FFmpeg passes
// through limited-range YUV.
func TestImageRGBMatchesFFmpeg(t *testing.T) {
	gray := image.NewGray16(image.Rect(0, 0, 256, 256))
	rgba := image.NewNRGBA64(image.Rect(0, 0, 256, 64))
	for i := range 256 * 256 {
		gray.SetGray16(i%256, i/256, color.Gray16{Y: uint16(i)})
	}
	for i := range 256 * 64 {
		v := uint16(i * 4)
		rgba.SetNRGBA64(i%256, i/256, color.NRGBA64{R: v, G: ^v, B: v * 7, A: uint16(i%7) * 0x2000})
	}
	gray16 := encodePNG(t, gray)
	ya16 := ffmpeg(t, gray16, "-pix_fmt", "ya16be", "-f", "image2pipe", "-c:v", "png", "-")
	files := []struct {
		name string
		data []byte
		tol  int
	}{
		{"gray16.png", gray16, 0}, {"ya16.png", ya16, 0}, {"rgba64.png", encodePNG(t, rgba), 1},
		{"lossy.webp", readImage(t, "lossy.webp"), 0}, {"alpha.webp", readImage(t, "alpha.webp"), 0},
		{"white.webp", readImage(t, "white.webp"), 0},
	}
	for _, f := range files {
		want := ffmpeg(t, f.data, "-pix_fmt", "rgb24", "-f", "rawvideo", "-")
		got := decodeRGB(t, f.name, f.data)
		if len(got) != len(want) {
			t.Errorf("%s: got %d bytes, FFmpeg %d", f.name, len(got), len(want))
			continue
		}
		for i := range got {
			if d := int(got[i]) - int(want[i]); d < -f.tol || d > f.tol {
				t.Errorf("%s: byte %d (pixel %d): got %d, FFmpeg %d, want within %d", f.name, i, i/3, got[i], want[i], f.tol)
				break
			}
		}
	}
}
