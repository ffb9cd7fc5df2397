package av

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// cropFirstFrame decodes the first frame of data to n x n with crop and
// flip.
func cropFirstFrame(t *testing.T, data []byte, n int, crop Crop, flip bool) []byte {
	t.Helper()
	s := loadStream(t, data)
	cfg := cfgSize(n)
	cfg.Crop, cfg.HFlip = crop, flip
	dst := make([]byte, n*n*3)
	if _, err := DecodeTargets(context.Background(), data, cfg, Rational{}, []Target{{PTS: s.pk[s.order[0]].PTS}}, dst); err != nil {
		t.Fatal(err)
	}
	return dst
}

// TestCropMatchesFFmpegCrop: a crop of the upright picture, scaled and
// flipped, is what the ffmpeg CLI makes of the first frame with
// crop,scale=bilinear,hflip after its autorotation, for plain clips and
// for clips turned by every display matrix (the rectangle is mapped
// through the turn onto the coded frame), in 4:2:0 (the corner moves to
// even pixels, as FFmpeg's crop filter moves it) and 4:4:4.
func TestCropMatchesFFmpegCrop(t *testing.T) {
	ff := needFFmpeg(t)
	const n = 32
	// A clip turned by 90 or 270 degrees is scaled before its turn, as
	// without a crop (to_rgb), which the CLI's autorotation does not do:
	// its reference is the crop mapped onto the coded frame by hand,
	// scaled, then turned (-noautorotate, crop, scale, transpose).
	for _, tc := range []struct {
		path       string
		x, y, w, h int
		coded      string // the reference's filters before the scale, for a transposed clip
		turn       string // and after it
	}{
		{filepath.Join(mediaDir, "h264_bframes.mp4"), 10, 6, 30, 20, "", ""},
		{filepath.Join(mediaDir, "h264_intra444.mp4"), 3, 5, 17, 23, "", ""},
		{filepath.Join(mediaDir, "vp9.webm"), 0, 0, 40, 40, "", ""},
		{filepath.Join(videoDir, "rot90_420.mp4"), 4, 10, 30, 40, "crop=40:30:14:4", "transpose=cclock"},
		{filepath.Join(videoDir, "rot270_420p10.mp4"), 8, 2, 24, 50, "crop=50:24:2:16", "transpose=clock"},
		{filepath.Join(videoDir, "rot180_444.mp4"), 5, 7, 40, 30, "", ""},
	} {
		for _, flip := range []bool{false, true} {
			name := fmt.Sprintf("%s crop %dx%d+%d+%d flip %v", filepath.Base(tc.path), tc.w, tc.h, tc.x, tc.y, flip)
			vf := fmt.Sprintf("crop=%d:%d:%d:%d,scale=%d:%d:flags=bilinear", tc.w, tc.h, tc.x, tc.y, n, n)
			args := []string{"-nostdin", "-v", "error"}
			if tc.coded != "" {
				vf = fmt.Sprintf("%s,scale=%d:%d:flags=bilinear,%s", tc.coded, n, n, tc.turn)
				args = append(args, "-noautorotate")
			}
			if flip {
				vf += ",hflip"
			}
			args = append(args, "-i", tc.path, "-map", "0:v:0", "-frames:v", "1", "-vf", vf, "-pix_fmt", "rgb24", "-f", "rawvideo", "-")
			want, err := exec.Command(ff, args...).Output()
			if err != nil {
				t.Fatalf("%s: ffmpeg: %v", name, err)
			}
			data, err := os.ReadFile(tc.path)
			if err != nil {
				t.Fatal(err)
			}
			got := cropFirstFrame(t, data, n, Crop{X: tc.x, Y: tc.y, W: tc.w, H: tc.h}, flip)
			if len(want) != len(got) {
				t.Fatalf("%s: ffmpeg gave %d bytes, want %d", name, len(want), len(got))
			}
			var sum, worst int
			for i := range got {
				d := int(got[i]) - int(want[i])
				d = max(d, -d)
				sum += d
				worst = max(worst, d)
			}
			if mean := float64(sum) / float64(len(got)); mean > 1 || worst > 24 {
				t.Errorf("%s: mean abs diff %.3f, max %d against ffmpeg; want <= 1, <= 24", name, mean, worst)
			}
		}
	}
}

// TestCropWholeIsSquash: a crop of the whole picture is the plain scale,
// byte for byte, and a flip mirrors it exactly.
func TestCropWholeIsSquash(t *testing.T) {
	data := readMedia(t, "h264_odd.mp4")
	const n = 24
	plain := cropFirstFrame(t, data, n, Crop{}, false)
	st := cropFirstFrameInfo(t, data)
	whole := cropFirstFrame(t, data, n, Crop{W: st.Width, H: st.Height}, false)
	if !bytes.Equal(plain, whole) {
		t.Error("a crop of the whole picture differs from no crop")
	}
	flipped := cropFirstFrame(t, data, n, Crop{}, true)
	for y := range n {
		for x := range n {
			a := plain[(y*n+x)*3 : (y*n+x)*3+3]
			b := flipped[(y*n+n-1-x)*3 : (y*n+n-1-x)*3+3]
			if !bytes.Equal(a, b) {
				t.Fatalf("pixel %d,%d is not the mirror of %d,%d", x, y, n-1-x, y)
			}
		}
	}
	// A crop given for a picture twice as large is scaled to the frame.
	half := cropFirstFrame(t, data, n, Crop{X: 0, Y: 0, W: st.Width, H: st.Height, RefW: 2 * st.Width, RefH: 2 * st.Height}, false)
	quarter := cropFirstFrame(t, data, n, Crop{X: 0, Y: 0, W: st.Width / 2, H: st.Height / 2}, false)
	if !bytes.Equal(half, quarter) {
		t.Error("a crop of a reference twice the size is not the same crop of the frame")
	}
}

func cropFirstFrameInfo(t *testing.T, data []byte) Stats {
	t.Helper()
	s := loadStream(t, data)
	st, err := DecodeTargets(context.Background(), data, cfgSize(8), Rational{}, []Target{{PTS: s.pk[s.order[0]].PTS}}, make([]byte, 8*8*3))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestScaleRGBCropAndFlip: ScaleRGB of a crop (the first pixel's slice
// with the whole picture's stride) equals ScaleRGB of the crop copied
// out, and a flip mirrors it.
func TestScaleRGBCropAndFlip(t *testing.T) {
	const w, h = 50, 40
	src := make([]byte, w*h*3)
	for i := range src {
		src[i] = byte(i * 7 % 251)
	}
	x, y, cw, ch := 7, 5, 30, 20
	packed := make([]byte, 0, cw*ch*3)
	for r := y; r < y+ch; r++ {
		packed = append(packed, src[(r*w+x)*3:(r*w+x+cw)*3]...)
	}
	a, b, c := make([]byte, 16*16*3), make([]byte, 16*16*3), make([]byte, 16*16*3)
	if err := ScaleRGB(a, 16, 16, 0, src[(y*w+x)*3:], w*3, cw, ch, false); err != nil {
		t.Fatal(err)
	}
	if err := ScaleRGB(b, 16, 16, 0, packed, cw*3, cw, ch, false); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Error("a crop in place differs from the crop copied out")
	}
	if err := ScaleRGB(c, 16, 16, 0, packed, cw*3, cw, ch, true); err != nil {
		t.Fatal(err)
	}
	for r := range 16 {
		for q := range 16 {
			if !bytes.Equal(a[(r*16+q)*3:(r*16+q)*3+3], c[(r*16+15-q)*3:(r*16+15-q)*3+3]) {
				t.Fatalf("pixel %d,%d not mirrored", q, r)
			}
		}
	}
	if err := ScaleRGB(a, 16, 16, 0, src, w*3, w, h+1, false); err == nil {
		t.Error("a source shorter than its rows: no error")
	}
}

// TestPaddedLayout: with Stride and Plane a frame is written row by row
// into a larger slot, the same pixels as the packed layout, flipped or
// not and turned or not, and the padding is left as it was.
func TestPaddedLayout(t *testing.T) {
	for _, name := range []string{filepath.Join(mediaDir, "h264_bframes.mp4"), filepath.Join(videoDir, "rot90_420.mp4")} {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		s := loadStream(t, data)
		const w, h, pw, ph = 20, 12, 32, 16
		for _, flip := range []bool{false, true} {
			targets := func() []Target {
				return []Target{{PTS: s.pk[s.order[0]].PTS, Slot: 0}, {PTS: s.pk[s.order[3]].PTS, Slot: 1}}
			}
			cfg := DefaultConfig()
			cfg.Width, cfg.Height, cfg.HFlip = w, h, flip
			packed := make([]byte, 2*w*h*3)
			if _, err := DecodeTargets(context.Background(), data, cfg, Rational{}, targets(), packed); err != nil {
				t.Fatal(err)
			}
			cfg.Stride, cfg.Plane = pw*3, pw*ph*3
			padded := bytes.Repeat([]byte{0xab}, 2*pw*ph*3)
			if _, err := DecodeTargets(context.Background(), data, cfg, Rational{}, targets(), padded); err != nil {
				t.Fatal(err)
			}
			for slot := range 2 {
				for y := range ph {
					row := padded[slot*pw*ph*3+y*pw*3 : slot*pw*ph*3+(y+1)*pw*3]
					pad := row
					if y < h {
						if want := packed[slot*w*h*3+y*w*3 : slot*w*h*3+(y+1)*w*3]; !bytes.Equal(row[:w*3], want) {
							t.Fatalf("%s flip %v: slot %d row %d differs from the packed layout", filepath.Base(name), flip, slot, y)
						}
						pad = row[w*3:]
					}
					if len(bytes.Trim(pad, "\xab")) != 0 {
						t.Fatalf("%s flip %v: slot %d row %d: padding written", filepath.Base(name), flip, slot, y)
					}
				}
			}
		}
	}
	cfg := DefaultConfig()
	cfg.Width, cfg.Height, cfg.Stride = 20, 12, 59
	if _, err := DecodeTargets(context.Background(), []byte{1}, cfg, Rational{}, []Target{{}}, make([]byte, 1<<12)); err == nil {
		t.Error("a stride shorter than a row: no error")
	}
}
