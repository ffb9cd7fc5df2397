package decoding

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// rotateDir holds the clips with a display matrix (make_rotate.sh there).
const rotateDir = testdata + "/video"

func rotatedClip(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(rotateDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestFrameMD5sAutorotate checks `decode --md5` against the md5 column of
// `ffmpeg -threads 1 -i rot90_420.mp4 -map 0:v -f framemd5 -` (FFmpeg 5.1,
// which turns the frames by the display matrix, here transpose=cclock),
// hard-coded so the test runs without the ffmpeg CLI; with -noautorotate
// every hash differs. internal/av's TestFrameMD5sTurnUpright covers the
// other turns and pixel formats.
func TestFrameMD5sAutorotate(t *testing.T) {
	want := []string{
		"49171f7f99e33d8a99b34c1bb90c4139", "0017b5922400cff25667918842a9ede1", "3d010acfe3ccc810d615c7cb8b4cabe0",
		"512275fb043c1e808e2e1ec3d9d1cd12", "eff20f5c0f5213b65665caeb32e8826d", "ef493f4de06cb61e0f4aec389ad6cd8f",
		"86784a61ecfdaf8e02e7693248b8e122", "76cf8d2278ebd6270e5a7ad0a26521f1", "d5f4c5b81650c8742ae72864ee6df4b2",
		"b4b162e094dc54442cdfbd36ef984c3e",
	}
	got, err := frameMD5s(context.Background(), rotatedClip(t, "rot90_420.mp4"), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("got %d frames, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("frame %d: got %s, want %s (ffmpeg, autorotated)", i, got[i], want[i])
		}
	}
	// ffmpeg converts yuv422p before transposing it: refused, not wrong.
	if _, err := frameMD5s(context.Background(), rotatedClip(t, "rot90_422.mp4"), Limits{}); !errors.Is(err, ErrUnsupported) {
		t.Errorf("rot90_422.mp4: got %v, want ErrUnsupported", err)
	}
}

// TestDecodeRotatedClipUpright decodes, through Decode, clips stored
// turned (as a phone stores a portrait video) whose display matrix turns
// them back: a picture with a red top-left, green top-right, blue
// bottom-left and white bottom-right quadrant. Every frame of the tensor
// must be upright.
func TestDecodeRotatedClipUpright(t *testing.T) {
	const size, frames = 32, 3
	type rgb [3]byte
	quads := []struct {
		x, y int
		want rgb
	}{
		{size / 4, size / 4, rgb{255, 0, 0}}, {3 * size / 4, size / 4, rgb{0, 255, 0}},
		{size / 4, 3 * size / 4, rgb{0, 0, 255}}, {3 * size / 4, 3 * size / 4, rgb{255, 255, 255}},
	}
	d := NewDecoder(Options{Frames: frames, Size: size})
	for _, clip := range []string{"upright90.mp4", "upright180.mp4", "upright270.mp4"} {
		s := decSample("clip", map[string][]byte{"mp4": rotatedClip(t, clip)})
		rec, err := ParseRecord(s, Limits{})
		if err != nil {
			t.Fatalf("%s: %v", clip, err)
		}
		out, err := d.Decode(context.Background(), s, rec)
		if err != nil {
			t.Fatalf("%s: %v", clip, err)
		}
		px := out.Tensors[0].Data
		for f := range frames {
			for _, q := range quads {
				i := ((f*size+q.y)*size + q.x) * 3
				for c := range 3 {
					if d := int(px[i+c]) - int(q.want[c]); d < -40 || d > 40 {
						t.Errorf("%s frame %d: pixel (%d,%d) is %v, want about %v", clip, f, q.x, q.y, px[i:i+3], q.want)
						break
					}
				}
			}
		}
	}
}
