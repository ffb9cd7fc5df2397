package tjpeg

import (
	"bytes"
	"errors"
	"image/jpeg"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

func readJPEG(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("../../decode/testdata/media", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// reference decodes with image/jpeg and converts to RGB the slow way.
func reference(t testing.TB, data []byte) Image {
	t.Helper()
	m, err := jpeg.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	b := m.Bounds()
	img := Image{Width: b.Dx(), Height: b.Dy()}
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := m.At(x, y).RGBA()
			img.Pix = append(img.Pix, byte(r>>8), byte(g>>8), byte(bl>>8))
		}
	}
	return img
}

// boxDown shrinks img by an integer-free area average to w x h.
func boxDown(img Image, w, h int) Image {
	out := Image{Width: w, Height: h, Pix: make([]byte, w*h*3)}
	for y := range h {
		y0, y1 := y*img.Height/h, max((y+1)*img.Height/h, y*img.Height/h+1)
		for x := range w {
			x0, x1 := x*img.Width/w, max((x+1)*img.Width/w, x*img.Width/w+1)
			for c := range 3 {
				sum, n := 0, 0
				for yy := y0; yy < y1; yy++ {
					for xx := x0; xx < x1; xx++ {
						sum += int(img.Pix[(yy*img.Width+xx)*3+c])
						n++
					}
				}
				out.Pix[(y*w+x)*3+c] = byte((sum + n/2) / n)
			}
		}
	}
	return out
}

func meanAbsDiff(a, b []byte) float64 {
	s := 0
	for i := range a {
		d := int(a[i]) - int(b[i])
		s += max(d, -d)
	}
	return float64(s) / float64(len(a))
}

func TestDecodeMatchesImageJPEG(t *testing.T) {
	for _, name := range []string{"image420.jpg", "image444.jpg"} {
		data := readJPEG(t, name)
		ref := reference(t, data)
		got, err := Decode(data, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Width != ref.Width || got.Height != ref.Height || len(got.Pix) != len(ref.Pix) {
			t.Fatalf("%s: got %dx%d, want %dx%d", name, got.Width, got.Height, ref.Width, ref.Height)
		}
		// libjpeg-turbo upsamples chroma with a triangle filter and
		// image/jpeg by replication, so 4:2:0 differs slightly.
		if d := meanAbsDiff(got.Pix, ref.Pix); d > 2.5 {
			t.Errorf("%s: got mean abs diff %.2f from image/jpeg, want <= 2.5", name, d)
		}
	}
}

func TestDCTScaling(t *testing.T) {
	if Backend != "turbojpeg" {
		t.Skip("DCT scaling needs TurboJPEG")
	}
	data := readJPEG(t, "image420.jpg") // 640x480
	ref := reference(t, data)
	tests := []struct{ minW, minH, w, h int }{
		{224, 224, 320, 240}, // 1/2: 240 >= 224; 3/8 gives 180 < 224
		{64, 64, 160, 120},   // 1/4; 1/8 gives 80x60, 60 < 64
		{80, 60, 80, 60},     // 1/8 exactly
		{600, 10, 640, 480},  // 15/16 does not exist below 1: 7/8 gives 560 < 600
		{1000, 1000, 640, 480},
		{0, 0, 640, 480},
	}
	for _, tc := range tests {
		got, err := Decode(data, Options{MinWidth: tc.minW, MinHeight: tc.minH})
		if err != nil {
			t.Fatal(err)
		}
		if got.Width != tc.w || got.Height != tc.h {
			t.Errorf("min %dx%d: got %dx%d, want %dx%d", tc.minW, tc.minH, got.Width, got.Height, tc.w, tc.h)
			continue
		}
		if d := meanAbsDiff(got.Pix, boxDown(ref, tc.w, tc.h).Pix); d > 6 {
			t.Errorf("min %dx%d: got mean abs diff %.2f from a box-filtered full decode, want <= 6", tc.minW, tc.minH, d)
		}
	}
}

func TestChooseScale(t *testing.T) {
	f := [][2]int{{2, 1}, {1, 1}, {7, 8}, {3, 4}, {5, 8}, {1, 2}, {3, 8}, {1, 4}, {1, 8}}
	tests := []struct{ w, h, minW, minH, want int }{
		{500, 375, 224, 224, 4},   // 5/8: 313x235
		{4000, 3000, 224, 224, 8}, // 1/8: 500x375
		{224, 224, 224, 224, -1},
		{100, 100, 224, 224, -1},
		{1000, 250, 224, 224, -1}, // 7/8 gives 875x219: no reduction keeps 224 rows
		{1000, 260, 224, 224, 2},  // 7/8 gives 875x228
	}
	for _, tc := range tests {
		if got := chooseScale(tc.w, tc.h, tc.minW, tc.minH, f); got != tc.want {
			t.Errorf("chooseScale(%d, %d, %d, %d): got %d, want %d", tc.w, tc.h, tc.minW, tc.minH, got, tc.want)
		}
	}
}

func TestHeader(t *testing.T) {
	tests := []struct {
		name string
		w, h int
		ss   string
	}{{"image420.jpg", 640, 480, "420"}, {"image444.jpg", 333, 251, "444"}}
	for _, tc := range tests {
		h, err := DecodeHeader(readJPEG(t, tc.name))
		if err != nil {
			t.Fatal(err)
		}
		want := Header{tc.w, tc.h, tc.ss}
		if Backend != "turbojpeg" {
			want.Subsampling = ""
		}
		if h != want {
			t.Errorf("%s: got %+v, want %+v", tc.name, h, want)
		}
	}
}

func typed(err error) bool {
	return err == nil || errors.Is(err, ErrCorrupt) || errors.Is(err, ErrLimit) || errors.Is(err, ErrUnsupported)
}

func TestHostile(t *testing.T) {
	data := readJPEG(t, "image420.jpg")
	if _, err := Decode(data, Options{MaxPixels: 640*480 - 1}); !errors.Is(err, ErrLimit) {
		t.Errorf("pixel limit: got %v, want ErrLimit", err)
	}
	if _, err := Decode([]byte("definitely not a jpeg"), Options{}); !errors.Is(err, ErrCorrupt) {
		t.Errorf("garbage: got %v, want ErrCorrupt", err)
	}
	if _, err := Decode(nil, Options{}); !errors.Is(err, ErrCorrupt) {
		t.Errorf("empty: got %v, want ErrCorrupt", err)
	}
	if _, err := Decode(data[:len(data)/2], Options{}); !errors.Is(err, ErrCorrupt) {
		t.Errorf("truncated: got %v, want ErrCorrupt", err)
	}
	// A forged SOF0 claiming 65500x65500.
	forged := bytes.Clone(data)
	if i := bytes.Index(forged, []byte{0xFF, 0xC0}); i > 0 {
		forged[i+5], forged[i+6], forged[i+7], forged[i+8] = 0xFF, 0xDC, 0xFF, 0xDC
	}
	if _, err := Decode(forged, Options{MaxPixels: 1 << 26}); !errors.Is(err, ErrLimit) {
		t.Errorf("forged size: got %v, want ErrLimit", err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 300 {
		b := bytes.Clone(data)
		if i%3 == 0 {
			b = b[:rng.IntN(len(b))]
		} else {
			for range 1 + rng.IntN(6) {
				b[rng.IntN(len(b))] ^= 1 << rng.IntN(8)
			}
		}
		if _, err := Decode(b, Options{MinWidth: 100, MinHeight: 100, MaxPixels: 1 << 24}); !typed(err) {
			t.Errorf("variant %d: got untyped error %v", i, err)
		}
	}
}

func TestProgressive(t *testing.T) {
	if Backend != "turbojpeg" {
		t.Skip("needs TurboJPEG")
	}
	data := readJPEG(t, "image444.jpg")
	p, err := Progressive(data)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(p, []byte{0xFF, 0xC2}) || bytes.Contains(data, []byte{0xFF, 0xC2}) {
		t.Errorf("got no SOF2 marker in the progressive output (or one in the baseline input)")
	}
	a, _ := Decode(data, Options{})
	b, err := Decode(p, Options{})
	if err != nil || !bytes.Equal(a.Pix, b.Pix) {
		t.Errorf("progressive rewrite is not lossless: err %v", err)
	}
	if _, err := jpeg.DecodeConfig(bytes.NewReader(p)); err != nil {
		t.Errorf("image/jpeg cannot read the progressive output: %v", err)
	}
}

func FuzzDecode(f *testing.F) {
	for _, n := range []string{"image420.jpg", "image444.jpg"} {
		f.Add(readJPEG(f, n))
	}
	for _, n := range []string{"cmyk.jpg", "ycck.jpg", "cmyk_noadobe.jpg"} {
		data, err := os.ReadFile(filepath.Join("testdata", n))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		img, err := Decode(data, Options{MinWidth: 32, MinHeight: 32, MaxPixels: 1 << 22})
		if !typed(err) {
			t.Fatalf("untyped error %v", err)
		}
		if err == nil && len(img.Pix) != img.Width*img.Height*3 {
			t.Fatalf("got %d bytes for %dx%d", len(img.Pix), img.Width, img.Height)
		}
	})
}

func BenchmarkDecode(b *testing.B) {
	data := readJPEG(b, "image420.jpg")
	b.Run("backend=full", func(b *testing.B) {
		for b.Loop() {
			if _, err := Decode(data, Options{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("backend=scaled224", func(b *testing.B) {
		for b.Loop() {
			if _, err := Decode(data, Options{MinWidth: 224, MinHeight: 224}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("image/jpeg", func(b *testing.B) {
		for b.Loop() {
			if _, err := jpeg.Decode(bytes.NewReader(data)); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// threadCPU returns the CPU time the calling OS thread has used.
func threadCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkTurboVsImageJPEG decodes the same 640x480 4:2:0 JPEG at full
// size with this package and with image/jpeg, alternating, and reports how
// many times faster this package is in CPU time (x_faster_full), and with
// DCT scaling to at least 224x224 (x_faster_scaled224). image/jpeg stops
// at YCbCr planes; this package also converts to RGB.
func BenchmarkTurboVsImageJPEG(b *testing.B) {
	data := readJPEG(b, "image420.jpg")
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var full, scaled, std time.Duration
	for b.Loop() {
		c := threadCPU()
		if _, err := Decode(data, Options{}); err != nil {
			b.Fatal(err)
		}
		full += threadCPU() - c
		c = threadCPU()
		if _, err := Decode(data, Options{MinWidth: 224, MinHeight: 224}); err != nil {
			b.Fatal(err)
		}
		scaled += threadCPU() - c
		c = threadCPU()
		if _, err := jpeg.Decode(bytes.NewReader(data)); err != nil {
			b.Fatal(err)
		}
		std += threadCPU() - c
	}
	b.ReportMetric(float64(std)/float64(full), "x_faster_full")
	b.ReportMetric(float64(std)/float64(scaled), "x_faster_scaled224")
}

// TestCMYK decodes Adobe CMYK and YCCK JPEGs, which TurboJPEG refused
// ("unsupported JPEG: CMYK JPEG") while image/jpeg decodes them: both
// backends must give image/jpeg's RGB, undoing Adobe's inverted ink
// values. testdata/cmyk.jpg (Adobe transform 0), ycck.jpg (transform 2,
// 4:2:0 chroma) and cmyk_noadobe.jpg were written with libjpeg's
// jpeg_set_colorspace from one 64x48 ink ramp; Go's own CMYK test image is
// used as well when GOROOT has it.
func TestCMYK(t *testing.T) {
	files := []string{"testdata/cmyk.jpg", "testdata/ycck.jpg"}
	if goroot, err := exec.Command("go", "env", "GOROOT").Output(); err == nil {
		p := filepath.Join(strings.TrimSpace(string(goroot)), "src", "image", "testdata", "video-001.cmyk.jpeg")
		if _, err := os.Stat(p); err == nil {
			files = append(files, p)
		}
	}
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		ref := reference(t, data)
		got, err := Decode(data, Options{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got.Width != ref.Width || got.Height != ref.Height || len(got.Pix) != len(ref.Pix) {
			t.Fatalf("%s: got %dx%d, want %dx%d", name, got.Width, got.Height, ref.Width, ref.Height)
		}
		// Only rounding (and, for YCCK, chroma upsampling) may differ; an
		// uninverted or channel-swapped conversion is off by ~100.
		d, worst := meanAbsDiff(got.Pix, ref.Pix), 0
		for i := range got.Pix {
			worst = max(worst, int(got.Pix[i])-int(ref.Pix[i]), int(ref.Pix[i])-int(got.Pix[i]))
		}
		t.Logf("%s: mean abs diff %.3f, max %d", name, d, worst)
		if d > 2 || (!strings.Contains(name, "ycck") && worst > 8) {
			t.Errorf("%s: mean abs diff %.2f, max %d from image/jpeg; want <= 2 and <= 8", name, d, worst)
		}
		if Backend == "turbojpeg" && ref.Width%2 == 0 && ref.Height%2 == 0 {
			// DCT scaling works for CMYK as well: 1/2 (of 64x48), where
			// the box filter lines up with it.
			small, err := Decode(data, Options{MinWidth: ref.Width / 2, MinHeight: ref.Height / 2})
			if err != nil || small.Width != ref.Width/2 || len(small.Pix) != small.Width*small.Height*3 {
				t.Errorf("%s scaled: %dx%d with %d bytes, %v", name, small.Width, small.Height, len(small.Pix), err)
			} else if d := meanAbsDiff(small.Pix, boxDown(ref, small.Width, small.Height).Pix); d > 6 {
				t.Errorf("%s scaled: mean abs diff %.2f from the shrunk image/jpeg result, want <= 6", name, d)
			}
		}
	}
	// Without the Adobe marker the ink convention is unknown: both
	// backends refuse it the same way.
	data, err := os.ReadFile("testdata/cmyk_noadobe.jpg")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Decode(data, Options{}); !errors.Is(err, ErrUnsupported) {
		t.Errorf("CMYK without an Adobe marker: got %v, want ErrUnsupported", err)
	}
}
