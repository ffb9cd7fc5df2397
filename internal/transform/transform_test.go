package transform

import (
	"errors"
	"fmt"
	"math"
	"testing"
)

func TestParseRefusesOutOfRange(t *testing.T) {
	for _, tc := range []struct {
		f    Flags
		flag string
	}{
		{Flags{Resize: "fill"}, "resize"},
		{Flags{Resize: "random-crop", CropScale: "0,1"}, "crop-scale"},
		{Flags{Resize: "random-crop", CropScale: "0.5,0.2"}, "crop-scale"},
		{Flags{Resize: "random-crop", CropScale: "0.5,1.5"}, "crop-scale"},
		{Flags{Resize: "random-crop", CropScale: "0.5"}, "crop-scale"},
		{Flags{Resize: "random-crop", CropScale: "NaN,1"}, "crop-scale"},
		{Flags{Resize: "random-crop", CropRatio: "0,1"}, "crop-ratio"},
		{Flags{Resize: "random-crop", CropRatio: "2,1"}, "crop-ratio"},
		{Flags{Resize: "random-crop", CropRatio: "1,1000"}, "crop-ratio"},
		{Flags{CropScale: "0.5,1"}, "crop-scale"},
		{Flags{Resize: "short-side", CropRatio: "1,2"}, "crop-ratio"},
		{Flags{HFlip: "1.5"}, "hflip"},
		{Flags{HFlip: "-0.1"}, "hflip"},
		{Flags{HFlip: "Inf"}, "hflip"},
		{Flags{HFlip: "half"}, "hflip"},
		{Flags{Frames: "random"}, "frame-sampling"},
		{Flags{Stride: "2"}, "frame-stride"},
		{Flags{Frames: "segment", Stride: "0"}, "frame-stride"},
		{Flags{Frames: "segment", Stride: "2000"}, "frame-stride"},
		{Flags{Frames: "segment", Stride: "x"}, "frame-stride"},
		{Flags{Frames: "fps"}, "frame-sampling"},
		{Flags{Frames: "fps", FPS: "0"}, "fps"},
		{Flags{Frames: "fps", FPS: "5000"}, "fps"},
		{Flags{Frames: "segment", FPS: "2"}, "fps"},
		{Flags{FPS: "2"}, "fps"},
		{Flags{PadTo: "16"}, "pad-to"},
		{Flags{Resize: "native", PadTo: "0"}, "pad-to"},
		{Flags{Resize: "native", PadTo: "5000"}, "pad-to"},
	} {
		_, err := Parse(tc.f)
		var fe *FlagError
		if !errors.Is(err, ErrRange) || !errors.As(err, &fe) || fe.Flag != tc.flag {
			t.Errorf("Parse(%+v): got %v, want a *FlagError naming --%s", tc.f, err, tc.flag)
		}
	}
}

func TestParseAccepts(t *testing.T) {
	for _, tc := range []struct {
		f    Flags
		want Spec
	}{
		{Flags{}, Spec{Scale: DefaultScale, Ratio: DefaultRatio, Stride: 1, Bucket: 1}},
		{Flags{Resize: "short-side", HFlip: "0.5"}, Spec{Resize: ShortSide, HFlip: 0.5, Scale: DefaultScale, Ratio: DefaultRatio, Stride: 1, Bucket: 1}},
		{Flags{Resize: "random-crop", CropScale: "0.25,1", CropRatio: "1,1"}, Spec{Resize: RandomCrop, Scale: [2]float64{0.25, 1}, Ratio: [2]float64{1, 1}, Stride: 1, Bucket: 1}},
		{Flags{Frames: "segment", Stride: "4"}, Spec{Temporal: Segment, Stride: 4, Scale: DefaultScale, Ratio: DefaultRatio, Bucket: 1}},
		{Flags{Frames: "fps", FPS: "2.5"}, Spec{Temporal: Rate, FPS: 2.5, Stride: 1, Scale: DefaultScale, Ratio: DefaultRatio, Bucket: 1}},
		{Flags{Resize: "native", PadTo: "16"}, Spec{Resize: Native, Bucket: 16, Stride: 1, Scale: DefaultScale, Ratio: DefaultRatio}},
	} {
		got, err := Parse(tc.f)
		if err != nil || got != tc.want {
			t.Errorf("Parse(%+v): got %+v, %v, want %+v", tc.f, got, err, tc.want)
		}
		// String gives flags that parse back to the same spec.
		if again, err := Parse(flagsOf(t, got.String())); err != nil || again != got {
			t.Errorf("Parse(String() = %q): got %+v, %v, want %+v", got.String(), again, err, got)
		}
	}
}

// flagsOf reads String's "--name value" pairs back into Flags.
func flagsOf(t *testing.T, s string) Flags {
	var f Flags
	var name, value string
	for rest := s; rest != ""; {
		if _, err := fmt.Sscanf(rest, "--%s %s", &name, &value); err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		switch name {
		case "resize":
			f.Resize = value
		case "crop-scale":
			f.CropScale = value
		case "crop-ratio":
			f.CropRatio = value
		case "hflip":
			f.HFlip = value
		case "frame-sampling":
			f.Frames = value
		case "frame-stride":
			f.Stride = value
		case "fps":
			f.FPS = value
		case "pad-to":
			f.PadTo = value
		}
		n := len("--"+name+" "+value) + 1
		if n >= len(rest) {
			break
		}
		rest = rest[n:]
	}
	return f
}

// TestViewIsAFunctionOfSeedEpochKey: the same (seed, epoch, key) gives
// the same view however often and in whatever order it is asked for;
// another epoch, key or seed gives other crops.
func TestViewIsAFunctionOfSeedEpochKey(t *testing.T) {
	s := Spec{Resize: RandomCrop, HFlip: 0.5, Seed: 7}
	keys := []string{"a/000001", "a/000002", "clips/xyz", ""}
	first := map[string]View{}
	for pass := range 3 {
		for i := range keys {
			k := keys[(i+pass)%len(keys)]
			v := s.View(3, k, 0, 640, 480)
			if pass == 0 {
				first[k] = v
			} else if v != first[k] {
				t.Errorf("key %q: view %+v, then %+v", k, first[k], v)
			}
		}
	}
	differ := func(name string, other func(e int) View) {
		n := 0
		for e := range 20 {
			if other(e) != s.View(e, "a/000001", 0, 640, 480) {
				n++
			}
		}
		if n < 18 {
			t.Errorf("%s changed the view in %d of 20 epochs, want nearly all", name, n)
		}
	}
	differ("the epoch", func(e int) View { return s.View(e+1, "a/000001", 0, 640, 480) })
	differ("the key", func(e int) View { return s.View(e, "a/000002", 0, 640, 480) })
	differ("the seed", func(e int) View { t := s; t.Seed = 8; return t.View(e, "a/000001", 0, 640, 480) })
	differ("the image index", func(e int) View { return s.View(e, "a/000001", 1, 640, 480) })
}

// TestRandomCropWithinRanges: every crop lies in the picture; those from
// a try (not the fallback) have their area and ratio within the ranges,
// up to the rounding of their sides; flips come at about their rate.
func TestRandomCropWithinRanges(t *testing.T) {
	s := Spec{Resize: RandomCrop, Scale: [2]float64{0.2, 0.6}, Ratio: [2]float64{0.5, 2}, HFlip: 0.3, Seed: 1}
	flips := 0
	const n = 4000
	for i := range n {
		w, h := 64+i%900, 48+(i*7)%700
		v := s.View(i%5, fmt.Sprint(i), 0, w, h)
		c := v.Crop
		if c.X < 0 || c.Y < 0 || c.W < 1 || c.H < 1 || c.X+c.W > w || c.Y+c.H > h {
			t.Fatalf("%dx%d: crop %+v outside the picture", w, h, c)
		}
		if v.Flip {
			flips++
		}
		frac := float64(c.W*c.H) / float64(w*h)
		ratio := float64(c.W) / float64(c.H)
		slack := 4 / float64(min(c.W, c.H)) // a side rounds by half a pixel
		if frac < 0.2*(1-slack) || frac > 0.6*(1+slack) || ratio < 0.5*(1-slack) || ratio > 2*(1+slack) {
			// Only the fallback may break them: it keeps a whole side.
			if c.W != w && c.H != h {
				t.Errorf("%dx%d: crop %+v has area %.3f and ratio %.3f outside the ranges", w, h, c, frac, ratio)
			}
		}
	}
	if rate := float64(flips) / n; math.Abs(rate-0.3) > 0.03 {
		t.Errorf("flip rate %.3f, want about 0.3", rate)
	}
}

// TestViewTinyPicture: a picture smaller than any crop, even 1 x 1, gets
// a crop inside it (the decoder scales it up), never a panic.
func TestViewTinyPicture(t *testing.T) {
	for _, r := range []Resize{Squash, ShortSide, RandomCrop} {
		for _, wh := range [][2]int{{1, 1}, {1, 9}, {9, 1}, {0, 0}, {2, 3}} {
			s := Spec{Resize: r, Scale: [2]float64{0.9, 1}, Ratio: [2]float64{0.01, 0.02}}
			v := s.View(0, "k", 0, wh[0], wh[1])
			w, h := max(wh[0], 1), max(wh[1], 1)
			if c := v.Crop; c.W < 1 || c.H < 1 || c.X < 0 || c.Y < 0 || c.X+c.W > w || c.Y+c.H > h {
				t.Errorf("%v on %dx%d: crop %+v", r, wh[0], wh[1], c)
			}
		}
	}
}

func TestShortSideCentre(t *testing.T) {
	for _, tc := range []struct {
		w, h int
		want Rect
	}{
		{640, 480, Rect{80, 0, 480, 480}},
		{480, 640, Rect{0, 80, 480, 480}},
		{301, 300, Rect{0, 0, 300, 300}},
		{100, 100, Rect{0, 0, 100, 100}},
	} {
		if got := (Spec{Resize: ShortSide}).View(0, "k", 0, tc.w, tc.h).Crop; got != tc.want {
			t.Errorf("%dx%d: got %+v, want %+v", tc.w, tc.h, got, tc.want)
		}
	}
}

func TestSquashIsWhole(t *testing.T) {
	if v := (Spec{}).View(5, "k", 0, 320, 200); !v.Whole(320, 200) {
		t.Errorf("squash: got %+v, want the whole picture unflipped", v)
	}
}

// TestLogUniformAgainstExp checks the square-root power against
// math.Exp's log-uniform value (the reference torchvision computes).
func TestLogUniformAgainstExp(t *testing.T) {
	for i := range 1000 {
		r := Rand{state: uint64(i)}
		u := float64((&Rand{state: uint64(i)}).Uint64()>>40) / (1 << 24)
		got := r.logUniform(0.75, 4.0/3)
		want := math.Exp(math.Log(0.75) + u*(math.Log(4.0/3)-math.Log(0.75)))
		if math.Abs(got-want) > 1e-9 {
			t.Fatalf("u=%v: got %v, want %v", u, got, want)
		}
	}
}

func TestScaledCovers(t *testing.T) {
	for _, tc := range []struct {
		r      Rect
		w, h   int
		sw, sh int
		want   Rect
	}{
		{Rect{10, 20, 100, 50}, 800, 600, 800, 600, Rect{10, 20, 100, 50}},
		{Rect{10, 20, 100, 50}, 800, 600, 400, 300, Rect{5, 10, 50, 25}},
		{Rect{11, 21, 101, 51}, 800, 600, 400, 300, Rect{5, 10, 51, 26}},
		{Rect{799, 599, 1, 1}, 800, 600, 100, 75, Rect{99, 74, 1, 1}},
	} {
		if got := tc.r.Scaled(tc.w, tc.h, tc.sw, tc.sh); got != tc.want {
			t.Errorf("%+v from %dx%d to %dx%d: got %+v, want %+v", tc.r, tc.w, tc.h, tc.sw, tc.sh, got, tc.want)
		}
	}
}

func TestSegmentStart(t *testing.T) {
	s := Spec{Temporal: Segment, Seed: 3}
	seen := map[int]bool{}
	for e := range 200 {
		st := s.SegmentStart(e, "k", 100, 30)
		if st < 0 || st > 70 {
			t.Fatalf("start %d outside 0..70", st)
		}
		seen[st] = true
		if st != s.SegmentStart(e, "k", 100, 30) {
			t.Fatal("not a function of (seed, epoch, key)")
		}
	}
	if len(seen) < 40 {
		t.Errorf("%d distinct starts in 200 epochs, want most of 71", len(seen))
	}
	if got := s.SegmentStart(0, "k", 10, 30); got != 0 {
		t.Errorf("a clip shorter than the span: start %d, want 0", got)
	}
}

// FuzzParse: whatever the flag strings, Parse returns a spec that
// passes Check or a *FlagError, and views of what it accepts lie inside
// the picture.
func FuzzParse(f *testing.F) {
	f.Add("random-crop", "0.08,1", "0.75,1.3333", "0.5", "segment", "2", "", "", 640, 480)
	f.Add("short-side", "", "", "", "", "", "", "", 1, 1)
	f.Add("squash", "", "", "1", "uniform", "", "", "", 3, 5000)
	f.Add("squash", "", "", "", "fps", "", "2.5", "", 3, 5000)
	f.Add("native", "", "", "", "", "", "", "16", 3000, 20)
	f.Fuzz(func(t *testing.T, resize, scale, ratio, hflip, frames, stride, fps, padTo string, w, h int) {
		s, err := Parse(Flags{resize, scale, ratio, hflip, frames, stride, fps, padTo})
		if err != nil {
			var fe *FlagError
			if !errors.As(err, &fe) || !errors.Is(err, ErrRange) {
				t.Fatalf("error %v is not a *FlagError", err)
			}
			return
		}
		if err := s.Check(); err != nil {
			t.Fatalf("Parse accepted what Check refuses: %v", err)
		}
		w, h = 1+abs(w)%5000, 1+abs(h)%5000
		v := s.View(1, resize, 0, w, h)
		if c := v.Crop; c.W < 1 || c.H < 1 || c.X < 0 || c.Y < 0 || c.X+c.W > w || c.Y+c.H > h {
			t.Fatalf("%dx%d: crop %+v", w, h, c)
		}
		if size := 8 * s.Bucket; s.CheckSize(size) == nil && size <= 4096 {
			cw, ch, pw, ph := s.Shape(w, h, size)
			if cw < 1 || ch < 1 || cw > pw || ch > ph || pw > size || ph > size {
				t.Fatalf("%dx%d at %d: %dx%d in %dx%d", w, h, size, cw, ch, pw, ph)
			}
		}
	})
}

func abs(x int) int {
	if x < 0 {
		if x == math.MinInt {
			return 0
		}
		return -x
	}
	return x
}

func TestNativeShape(t *testing.T) {
	s := Spec{Resize: Native, Bucket: 16}
	for _, tc := range []struct {
		w, h           int
		cw, ch, pw, ph int
	}{
		{640, 480, 224, 168, 224, 176},
		{480, 640, 168, 224, 176, 224},
		{100, 30, 100, 30, 112, 32}, // small: not scaled up
		{5000, 1, 224, 1, 224, 16},
		{224, 224, 224, 224, 224, 224},
		{0, 0, 1, 1, 16, 16},
	} {
		cw, ch, pw, ph := s.Shape(tc.w, tc.h, 224)
		if cw != tc.cw || ch != tc.ch || pw != tc.pw || ph != tc.ph {
			t.Errorf("%dx%d: got %dx%d in %dx%d, want %dx%d in %dx%d", tc.w, tc.h, cw, ch, pw, ph, tc.cw, tc.ch, tc.pw, tc.ph)
		}
	}
	if err := s.CheckSize(200); !errors.Is(err, ErrRange) {
		t.Errorf("--pad-to 16 with --size 200: got %v, want ErrRange", err)
	}
	if err := s.CheckSize(224); err != nil {
		t.Errorf("--pad-to 16 with --size 224: %v", err)
	}
	if cw, ch, pw, ph := (Spec{}).Shape(640, 480, 224); cw != 224 || ch != 224 || pw != 224 || ph != 224 {
		t.Errorf("squash: got %d %d %d %d, want S everywhere", cw, ch, pw, ph)
	}
}
