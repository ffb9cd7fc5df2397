package decoding

import (
	"bytes"
	"context"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/datahelix/datahelix/internal/transform"
	"github.com/datahelix/datahelix/internal/video"
)

// transformMedia are samples of every kind decodeImageView and the clip
// path take: a 4:2:0 and a 4:4:4 JPEG, a PNG, a WebP, and a clip.
func transformSamples(t *testing.T) []*Sample {
	return []*Sample{
		decSample("img420", map[string][]byte{"jpg": media(t, "image420.jpg")}),
		decSample("img444", map[string][]byte{"jpg": media(t, "image444.jpg")}),
		decSample("png", map[string][]byte{"png": media(t, "image.png")}),
		decSample("webp", map[string][]byte{"webp": media(t, "image.webp")}),
		decSample("clip", map[string][]byte{"mp4": media(t, "h264_bframes.mp4")}),
		decSample("vp9", map[string][]byte{"webm": media(t, "vp9.webm")}),
	}
}

func decodeAll(t *testing.T, d *Decoder, s *Sample) [][]byte {
	t.Helper()
	out, err := d.Decode(context.Background(), s, nil)
	if err != nil {
		t.Fatalf("%s: %v", s.Key, err)
	}
	var ts [][]byte
	for _, x := range out.Tensors {
		ts = append(ts, x.Data)
	}
	return ts
}

// TestTransformDeterministic: a random crop with flips and segment
// sampling gives the same tensors from two decoders for the same (seed,
// epoch, key); another epoch gives other tensors for most samples.
func TestTransformDeterministic(t *testing.T) {
	spec := transform.Spec{Resize: transform.RandomCrop, HFlip: 0.5, Temporal: transform.Segment, Stride: 2, Seed: 11}
	opts := Options{Frames: 4, Size: 40, Transform: spec}
	a, b := NewDecoder(opts), NewDecoder(opts)
	changed := 0
	for _, s := range transformSamples(t) {
		s.Epoch = 3
		x, y := decodeAll(t, a, s), decodeAll(t, b, s)
		if !slices.EqualFunc(x, y, bytes.Equal) {
			t.Errorf("%s: two decoders differ for the same seed, epoch and key", s.Key)
		}
		s.Epoch = 4
		if z := decodeAll(t, a, s); !slices.EqualFunc(x, z, bytes.Equal) {
			changed++
		}
		sq := decodeAll(t, NewDecoder(Options{Frames: 4, Size: 40}), s)
		if slices.EqualFunc(x, sq, bytes.Equal) {
			t.Errorf("%s: the random crop gives squash's tensors", s.Key)
		}
	}
	if changed < 5 {
		t.Errorf("another epoch changed %d of 6 samples, want at least 5", changed)
	}
}

// TestSquashFlipMirrors: squash with a certain flip is the exact mirror
// of squash, for images and clips.
func TestSquashFlipMirrors(t *testing.T) {
	const size = 24
	plain := NewDecoder(Options{Frames: 3, Size: size})
	flip := NewDecoder(Options{Frames: 3, Size: size, Transform: transform.Spec{HFlip: 1}})
	for _, s := range transformSamples(t) {
		x, y := decodeAll(t, plain, s), decodeAll(t, flip, s)
		for i := range x {
			for p := 0; p < len(x[i])/(size*3); p++ { // rows of every frame
				row, mir := x[i][p*size*3:(p+1)*size*3], y[i][p*size*3:(p+1)*size*3]
				for c := range size {
					if !bytes.Equal(row[c*3:c*3+3], mir[(size-1-c)*3:(size-c)*3]) {
						t.Fatalf("%s: tensor %d row %d is not mirrored", s.Key, i, p)
					}
				}
			}
		}
	}
}

// TestShortSideCropsTheCentre: short-side on a wide picture whose left
// and right thirds are red and the middle blue shows only blue.
func TestShortSideCropsTheCentre(t *testing.T) {
	m := image.NewNRGBA(image.Rect(0, 0, 300, 100))
	for y := range 100 {
		for x := range 300 {
			c := color.NRGBA{255, 0, 0, 255}
			if x >= 100 && x < 200 {
				c = color.NRGBA{0, 0, 255, 255}
			}
			m.Set(x, y, c)
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, m); err != nil {
		t.Fatal(err)
	}
	s := decSample("wide", map[string][]byte{"png": buf.Bytes()})
	d := NewDecoder(Options{Size: 16, Transform: transform.Spec{Resize: transform.ShortSide}})
	px := decodeAll(t, d, s)[0]
	for i := 0; i < len(px); i += 3 {
		if px[i] > 8 || px[i+2] < 247 {
			t.Fatalf("pixel %d is %v, want blue", i/3, px[i:i+3])
		}
	}
}

// TestTinyImageUpscaled: an image smaller than the crop and the output,
// down to 1 x 1, decodes to S x S.
func TestTinyImageUpscaled(t *testing.T) {
	for _, wh := range [][2]int{{1, 1}, {3, 2}, {2, 40}} {
		m := image.NewRGBA(image.Rect(0, 0, wh[0], wh[1]))
		var buf bytes.Buffer
		if err := png.Encode(&buf, m); err != nil {
			t.Fatal(err)
		}
		s := decSample("tiny", map[string][]byte{"png": buf.Bytes()})
		for _, r := range []transform.Resize{transform.ShortSide, transform.RandomCrop} {
			d := NewDecoder(Options{Size: 32, Transform: transform.Spec{Resize: r, HFlip: 0.5}})
			if got := decodeAll(t, d, s); len(got) != 1 || len(got[0]) != 32*32*3 {
				t.Errorf("%dx%d with %v: got %d tensors", wh[0], wh[1], r, len(got))
			}
		}
	}
}

// TestClipTasksMatchWholeWithTransform: the clip split into one task per
// target over ClipTargets, each with DecodeClipTask, gives Decode's
// tensor under a random crop, flip and segment.
func TestClipTasksMatchWholeWithTransform(t *testing.T) {
	spec := transform.Spec{Resize: transform.RandomCrop, HFlip: 0.5, Temporal: transform.Segment, Stride: 3, Seed: 5}
	d := NewDecoder(Options{Frames: 5, Size: 32, Transform: spec})
	for e := range 4 {
		s := decSample("clip", map[string][]byte{"mp4": media(t, "h264_bframes.mp4")})
		s.Epoch = e
		rec, err := ParseRecord(s, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		whole := decodeAll(t, d, s)[0]
		v := rec.Video
		targets := d.ClipTargets(s, v)
		for i := 1; i < len(targets); i++ {
			if v.FramePTS[targets[i]] <= v.FramePTS[targets[i-1]] {
				t.Fatalf("targets %v not in presentation order", targets)
			}
		}
		dst := d.newVideoTensor()
		for slot, f := range targets {
			task := video.Task{Keyframe: v.DecodeStart(f), Targets: []int{f}, Slots: []int{slot}}
			if _, err := d.DecodeClipTask(context.Background(), s, v, task, dst.Data); err != nil {
				t.Fatal(err)
			}
		}
		video.Spread(dst.Data, 5, 32*32*3, len(targets))
		if !bytes.Equal(dst.Data, whole) {
			t.Errorf("epoch %d: tasks differ from the whole clip's decode", e)
		}
	}
}

// TestSegmentTargets: segment sampling takes frames stride apart in
// presentation order from a start that moves with the epoch.
func TestSegmentTargets(t *testing.T) {
	s := decSample("clip", map[string][]byte{"mp4": video30s(t)})
	rec, err := ParseRecord(s, Limits{})
	if err != nil {
		t.Skip(err)
	}
	v := rec.Video
	d := NewDecoder(Options{Frames: 4, Transform: transform.Spec{Temporal: transform.Segment, Stride: 5, Seed: 2}})
	order := video.SampleFrames(v, v.Frames) // every shown frame, in presentation order
	starts := map[int]bool{}
	for e := range 10 {
		s.Epoch = e
		got := d.ClipTargets(s, v)
		if len(got) != 4 {
			t.Fatalf("epoch %d: %d targets, want 4", e, len(got))
		}
		i := slices.Index(order, got[0])
		for k, f := range got {
			if order[i+5*k] != f {
				t.Fatalf("epoch %d: targets %v are not 5 shown frames apart", e, got)
			}
		}
		starts[i] = true
	}
	if len(starts) < 5 {
		t.Errorf("%d distinct starts over 10 epochs", len(starts))
	}
}

func video30s(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testdata, "video", "h264_30s.mp4"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRateSampling: fps sampling takes the frames shown at the rate from
// the clip's start, up to F; the tensor has as many frames as it took
// (a variable F), and every one is the frame Decode shows at that time.
func TestRateSampling(t *testing.T) {
	s := decSample("clip", map[string][]byte{"mp4": video30s(t)})
	rec, err := ParseRecord(s, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	v := rec.Video
	secs := float64(v.Duration) / float64(v.Timescale)
	for _, tc := range []struct {
		fps  float64
		cap  int
		want int
	}{
		{1, 100, int(secs + 0.999)}, // one a second over the clip
		{1, 5, 5},                   // capped
		{0.5, 100, int(secs/2 + 0.999)},
		{1000, 7, 7}, // above the clip's rate: consecutive frames
	} {
		d := NewDecoder(Options{Frames: tc.cap, Size: 16, Transform: transform.Spec{Temporal: transform.Rate, FPS: tc.fps}})
		targets := d.ClipTargets(s, v)
		if len(targets) != tc.want {
			t.Errorf("%g fps, cap %d: %d targets, want %d (clip of %.2f s)", tc.fps, tc.cap, len(targets), tc.want, secs)
			continue
		}
		for k, f := range targets {
			at := float64(v.FramePTS[f]) / float64(v.Timescale)
			if tc.fps < 100 && (at > float64(k)/tc.fps+0.001 || at < float64(k)/tc.fps-0.1) {
				t.Errorf("%g fps: frame %d at %.3f s, want the one shown at %.3f s", tc.fps, k, at, float64(k)/tc.fps)
			}
		}
		out, err := d.Decode(context.Background(), s, rec)
		if err != nil {
			t.Fatal(err)
		}
		if got := out.Tensors[0].Shape; got[0] != tc.want || len(out.Tensors[0].Data) != tc.want*16*16*3 {
			t.Errorf("%g fps, cap %d: tensor %v, want %d frames", tc.fps, tc.cap, got, tc.want)
		}
	}
}

// TestNativeAspect: native resizing keeps each picture's aspect, scaled
// down to at most S on its long side, in the top left of a tensor padded
// with zeros to the bucket size; its flip mirrors the picture, not the
// padding; a clip's frames all get the clip's shape, which ClipShape
// announces before decoding.
func TestNativeAspect(t *testing.T) {
	const size, bucket = 64, 16
	spec := transform.Spec{Resize: transform.Native, Bucket: bucket}
	d := NewDecoder(Options{Frames: 3, Size: size, Transform: spec})
	flip := NewDecoder(Options{Frames: 3, Size: size, Transform: transform.Spec{Resize: transform.Native, Bucket: bucket, HFlip: 1}})
	for _, s := range transformSamples(t) {
		rec, err := ParseRecord(s, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		out, err := d.Decode(context.Background(), s, rec)
		if err != nil {
			t.Fatal(err)
		}
		mirrored, err := flip.Decode(context.Background(), s, rec)
		if err != nil {
			t.Fatal(err)
		}
		tn := out.Tensors[0]
		var w, h int
		if v := rec.Video; v != nil {
			w, h = uprightSize(v)
			if want := d.ClipShape(v, len(d.ClipTargets(s, v))); !slices.Equal(tn.Shape, want) {
				t.Errorf("%s: shape %v, ClipShape said %v", s.Key, tn.Shape, want)
			}
		} else {
			w, h = rec.Images[0].Width, rec.Images[0].Height
		}
		cw, ch, pw, ph := spec.Shape(w, h, size)
		shape := tn.Shape[len(tn.Shape)-3:]
		if shape[0] != ph || shape[1] != pw || ph%bucket != 0 || pw%bucket != 0 || max(cw, ch) != min(max(w, h), size) {
			t.Errorf("%s (%dx%d): shape %v, picture %dx%d, want %dx%d padded to %dx%d", s.Key, w, h, tn.Shape, cw, ch, cw, ch, pw, ph)
			continue
		}
		frames := len(tn.Data) / (pw * ph * 3)
		for f := range frames {
			plane := tn.Data[f*pw*ph*3 : (f+1)*pw*ph*3]
			mplane := mirrored.Tensors[0].Data[f*pw*ph*3 : (f+1)*pw*ph*3]
			var content int
			for y := range ph {
				row := plane[y*pw*3 : (y+1)*pw*3]
				if y >= ch {
					if len(bytes.Trim(row, "\x00")) != 0 {
						t.Fatalf("%s: frame %d row %d of the padding is not zero", s.Key, f, y)
					}
					continue
				}
				if len(bytes.Trim(row[cw*3:], "\x00")) != 0 {
					t.Fatalf("%s: frame %d row %d: padding right of the picture is not zero", s.Key, f, y)
				}
				content += len(bytes.Trim(row[:cw*3], "\x00"))
				mrow := mplane[y*pw*3 : (y+1)*pw*3]
				for x := range cw {
					if !bytes.Equal(row[x*3:x*3+3], mrow[(cw-1-x)*3:(cw-x)*3]) {
						t.Fatalf("%s: frame %d row %d: the flip is not the picture's mirror", s.Key, f, y)
					}
				}
			}
			if content == 0 {
				t.Errorf("%s: frame %d is all zero", s.Key, f)
			}
		}
	}
}
