// Package transform holds the training transforms the decoder applies:
// how a frame or an image becomes S x S (squash, short-side resize with a
// centre crop, random resized crop, horizontal flip) and which frames of a
// clip are sampled (uniform over the clip, or a random-start segment at a
// stride). A Spec is parsed from the command's flag strings and checked
// before any decoding (errors name the flag); View and Start turn it into
// one sample's parameters.
//
// Randomness is a pure function of the job's seed, the sample's epoch and
// its key (Seed): no clock, no map order, no global generator, so the
// same sample gets the same crop, flip and segment on whichever rank and
// loader decodes it. The geometry uses only integer arithmetic and
// float64 operations Go rounds the same on every platform (+, -, *, /,
// sqrt and Round, each rounded explicitly so none is fused), so a crop
// does not depend on the machine either.
package transform

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Resize is how a picture becomes S x S.
type Resize int

// The resize modes.
const (
	// Squash stretches the whole picture to S x S (the default, and what
	// the decoder did before transforms existed).
	Squash Resize = iota
	// ShortSide scales the short side to S and crops the centre S x S:
	// torchvision's Resize(S) then CenterCrop(S). The decoder crops the
	// centre square of the source first, then scales it.
	ShortSide
	// RandomCrop takes a random rectangle of the source (its area a
	// fraction in Spec.Scale of the picture's, its aspect ratio in
	// Spec.Ratio, log-uniform) and scales it to S x S: torchvision's
	// RandomResizedCrop, with its 10 tries and centre fallback.
	RandomCrop
	// Native keeps the picture's aspect: scaled down so that its long
	// side is at most S (never up), then padded with zeros on the right
	// and bottom to a multiple of Spec.Bucket on each side. Output shapes
	// vary by sample, at most S x S (S is a multiple of Bucket).
	Native
)

var resizeNames = []string{"squash", "short-side", "random-crop", "native"}

func (r Resize) String() string {
	if r >= 0 && int(r) < len(resizeNames) {
		return resizeNames[r]
	}
	return fmt.Sprintf("Resize(%d)", int(r))
}

// Temporal is how the frames of a clip are chosen.
type Temporal int

// The frame sampling modes.
const (
	// Uniform takes F frames spread uniformly over the clip (the default).
	Uniform Temporal = iota
	// Segment takes F consecutive frames Spec.Stride apart, in
	// presentation order, from a random start: a clip of fewer than
	// (F-1) x stride + 1 frames starts at its first frame and gives fewer
	// distinct frames, repeated to fill F as uniform sampling repeats
	// those of a short clip.
	Segment
	// Rate takes the frames shown at Spec.FPS frames per second from the
	// clip's first frame, at most F of them (--frames is the cap): F
	// varies with the clip's duration, and the clip's tensor is
	// [F', S, S, 3] with F' <= F, without repeated frames.
	Rate
)

var temporalNames = []string{"uniform", "segment", "fps"}

func (t Temporal) String() string {
	if t >= 0 && int(t) < len(temporalNames) {
		return temporalNames[t]
	}
	return fmt.Sprintf("Temporal(%d)", int(t))
}

// Spec is the transforms of a job. Its zero value is today's decoding:
// squash, no flip, uniform frames.
type Spec struct {
	Resize Resize
	// Scale and Ratio bound RandomCrop's area fraction and aspect ratio
	// (width over height); zero values take DefaultScale and DefaultRatio.
	Scale, Ratio [2]float64
	// HFlip is the probability of a horizontal flip, 0..1.
	HFlip float64
	// Bucket is Native's padding unit in pixels (default 1: no padding
	// beyond the picture).
	Bucket int
	// Temporal and Stride choose a clip's frames; Stride (default 1) is
	// Segment's distance between frames.
	Temporal Temporal
	Stride   int
	// FPS is Rate's frames per second, MinFPS..MaxFPS, used to a
	// thousandth (MilliFPS).
	FPS float64
	// Seed is the job's seed, which with the epoch and key seeds each
	// sample (the loader sets it from its own seed).
	Seed uint64
}

// Defaults of RandomCrop, torchvision's.
var (
	DefaultScale = [2]float64{0.08, 1}
	DefaultRatio = [2]float64{3.0 / 4, 4.0 / 3}
)

// Bounds of the parameters.
const (
	MinRatio  = 0.01 // Ratio within MinRatio..MaxRatio
	MaxRatio  = 100
	MaxStride = 1024 // Stride within 1..MaxStride
	MinFPS    = 0.001
	MaxFPS    = 1000
	MaxBucket = 4096 // Bucket within 1..MaxBucket, and a divisor of S
)

// MilliFPS is FPS in thousandths of a frame per second, the integer the
// sampling uses.
func (s Spec) MilliFPS() int64 { return int64(math.Round(s.FPS * 1000)) }

// WithDefaults returns s with zero Scale, Ratio and Stride filled in.
func (s Spec) WithDefaults() Spec {
	if s.Scale == [2]float64{} {
		s.Scale = DefaultScale
	}
	if s.Ratio == [2]float64{} {
		s.Ratio = DefaultRatio
	}
	if s.Stride == 0 {
		s.Stride = 1
	}
	if s.Bucket == 0 {
		s.Bucket = 1
	}
	return s
}

// Identity reports whether s changes nothing a frame or image shows:
// squash without flip. (Frame sampling may still differ.)
func (s Spec) Identity() bool { return s.Resize == Squash && s.HFlip == 0 }

// ErrRange marks a transform parameter out of its range or not
// understood; a *FlagError carries which flag and why.
var ErrRange = errors.New("transform: parameter out of range")

// FlagError is a transform parameter refused, named by its flag (without
// dashes: "crop-scale"). It matches ErrRange.
type FlagError struct {
	Flag, Value, Reason string
}

func (e *FlagError) Error() string {
	return fmt.Sprintf("--%s %s: %s", e.Flag, e.Value, e.Reason)
}

// Is makes a FlagError match ErrRange.
func (e *FlagError) Is(target error) bool { return target == ErrRange }

func flagErr(flag, value, format string, args ...any) error {
	return &FlagError{Flag: flag, Value: value, Reason: fmt.Sprintf(format, args...)}
}

// Flags are the transform flags as the user wrote them; "" is a flag
// not given.
type Flags struct {
	Resize    string // --resize: squash, short-side or random-crop
	CropScale string // --crop-scale MIN,MAX
	CropRatio string // --crop-ratio MIN,MAX
	HFlip     string // --hflip P
	Frames    string // --frame-sampling: uniform, segment or fps
	Stride    string // --frame-stride N
	FPS       string // --fps R
	PadTo     string // --pad-to B
}

// Parse turns flag strings into a Spec (seed 0) and checks it: every
// value in its range, and no parameter of a mode not chosen (a
// --crop-scale without --resize random-crop is refused rather than
// ignored). Errors are *FlagError values.
func Parse(f Flags) (Spec, error) {
	var s Spec
	switch f.Resize {
	case "", "squash":
	case "short-side":
		s.Resize = ShortSide
	case "random-crop":
		s.Resize = RandomCrop
	case "native":
		s.Resize = Native
	default:
		return Spec{}, flagErr("resize", f.Resize, "want squash, short-side, random-crop or native")
	}
	var err error
	if f.PadTo != "" {
		if s.Resize != Native {
			return Spec{}, flagErr("pad-to", f.PadTo, "only with --resize native")
		}
		n, err := strconv.Atoi(strings.TrimSpace(f.PadTo))
		if err != nil || n < 1 {
			return Spec{}, flagErr("pad-to", f.PadTo, "want a whole number of pixels, 1..%d", MaxBucket)
		}
		s.Bucket = n
	}
	if f.CropScale != "" {
		if s.Resize != RandomCrop {
			return Spec{}, flagErr("crop-scale", f.CropScale, "only with --resize random-crop")
		}
		if s.Scale, err = parsePair("crop-scale", f.CropScale); err != nil {
			return Spec{}, err
		}
	}
	if f.CropRatio != "" {
		if s.Resize != RandomCrop {
			return Spec{}, flagErr("crop-ratio", f.CropRatio, "only with --resize random-crop")
		}
		if s.Ratio, err = parsePair("crop-ratio", f.CropRatio); err != nil {
			return Spec{}, err
		}
	}
	if f.HFlip != "" {
		if s.HFlip, err = parseFloat("hflip", f.HFlip); err != nil {
			return Spec{}, err
		}
	}
	switch f.Frames {
	case "", "uniform":
	case "segment":
		s.Temporal = Segment
	case "fps":
		s.Temporal = Rate
		if f.FPS == "" {
			return Spec{}, flagErr("frame-sampling", f.Frames, "needs --fps")
		}
	default:
		return Spec{}, flagErr("frame-sampling", f.Frames, "want uniform, segment or fps")
	}
	if f.FPS != "" {
		if s.Temporal != Rate {
			return Spec{}, flagErr("fps", f.FPS, "only with --frame-sampling fps")
		}
		if s.FPS, err = parseFloat("fps", f.FPS); err != nil {
			return Spec{}, err
		}
	}
	if f.Stride != "" {
		if s.Temporal != Segment {
			return Spec{}, flagErr("frame-stride", f.Stride, "only with --frame-sampling segment")
		}
		n, err := strconv.Atoi(strings.TrimSpace(f.Stride))
		if err != nil || n < 1 {
			return Spec{}, flagErr("frame-stride", f.Stride, "want a whole number of frames, 1..%d", MaxStride)
		}
		s.Stride = n
	}
	s = s.WithDefaults()
	return s, s.Check()
}

// Check reports the first parameter of s out of range as a *FlagError
// naming its flag. Zero Scale, Ratio and Stride are their defaults.
func (s Spec) Check() error {
	s = s.WithDefaults()
	pair := func(p [2]float64) string {
		return strconv.FormatFloat(p[0], 'g', -1, 64) + "," + strconv.FormatFloat(p[1], 'g', -1, 64)
	}
	switch {
	case s.Resize < Squash || s.Resize > Native:
		return flagErr("resize", s.Resize.String(), "want squash, short-side, random-crop or native")
	case s.Bucket < 1 || s.Bucket > MaxBucket:
		return flagErr("pad-to", strconv.Itoa(s.Bucket), "want 1..%d pixels", MaxBucket)
	// NaN fails every comparison: test for the good range.
	case !(s.Scale[0] > 0 && s.Scale[0] <= s.Scale[1] && s.Scale[1] <= 1):
		return flagErr("crop-scale", pair(s.Scale), "want MIN,MAX with 0 < MIN <= MAX <= 1 (fractions of the picture's area)")
	case !(s.Ratio[0] >= MinRatio && s.Ratio[0] <= s.Ratio[1] && s.Ratio[1] <= MaxRatio):
		return flagErr("crop-ratio", pair(s.Ratio), "want MIN,MAX with %g <= MIN <= MAX <= %g (width over height)", MinRatio, float64(MaxRatio))
	case !(s.HFlip >= 0 && s.HFlip <= 1):
		return flagErr("hflip", strconv.FormatFloat(s.HFlip, 'g', -1, 64), "want a probability in 0..1")
	case s.Temporal < Uniform || s.Temporal > Rate:
		return flagErr("frame-sampling", s.Temporal.String(), "want uniform, segment or fps")
	case s.Stride < 1 || s.Stride > MaxStride:
		return flagErr("frame-stride", strconv.Itoa(s.Stride), "want 1..%d frames", MaxStride)
	case s.Temporal == Rate && !(s.FPS >= MinFPS && s.FPS <= MaxFPS):
		return flagErr("fps", strconv.FormatFloat(s.FPS, 'g', -1, 64), "want %g..%g frames per second", MinFPS, float64(MaxFPS))
	}
	return nil
}

// CheckSize refuses an output side S that Native's Bucket does not
// divide, so that a padded picture never exceeds S x S; the error names
// --pad-to.
func (s Spec) CheckSize(size int) error {
	s = s.WithDefaults()
	if s.Resize == Native && size%s.Bucket != 0 {
		return flagErr("pad-to", strconv.Itoa(s.Bucket), "want a divisor of --size %d, so that a padded picture is at most S x S", size)
	}
	return nil
}

// Shape returns the output of a w x h picture of maximum side size: the
// picture's size once scaled (cw x ch) and its slot's (pw x ph, the
// tensor's height and width). Every mode but Native gives size x size
// for both. Native scales the long side down to size (never up; the
// short side rounded, at least 1) and pads each side up to a multiple
// of Bucket.
func (s Spec) Shape(w, h, size int) (cw, ch, pw, ph int) {
	if s.Resize != Native {
		return size, size, size, size
	}
	s = s.WithDefaults()
	cw, ch = max(w, 1), max(h, 1)
	if cw > size || ch > size {
		if cw >= ch {
			cw, ch = size, max((ch*size+cw/2)/cw, 1)
		} else {
			cw, ch = max((cw*size+ch/2)/ch, 1), size
		}
	}
	b := s.Bucket
	return cw, ch, (cw + b - 1) / b * b, (ch + b - 1) / b * b
}

// String writes s as the flags that give it (what the job reports and
// the ranks compare), defaults included.
func (s Spec) String() string {
	s = s.WithDefaults()
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	b := []string{"--resize " + s.Resize.String()}
	switch s.Resize {
	case RandomCrop:
		b = append(b, "--crop-scale "+f(s.Scale[0])+","+f(s.Scale[1]), "--crop-ratio "+f(s.Ratio[0])+","+f(s.Ratio[1]))
	case Native:
		b = append(b, "--pad-to "+strconv.Itoa(s.Bucket))
	}
	b = append(b, "--hflip "+f(s.HFlip), "--frame-sampling "+s.Temporal.String())
	switch s.Temporal {
	case Segment:
		b = append(b, "--frame-stride "+strconv.Itoa(s.Stride))
	case Rate:
		b = append(b, "--fps "+f(s.FPS))
	}
	return strings.Join(b, " ")
}

func parseFloat(flag, v string) (float64, error) {
	x, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
		return 0, flagErr(flag, v, "want a number")
	}
	return x, nil
}

// parsePair parses "MIN,MAX".
func parsePair(flag, v string) ([2]float64, error) {
	a, b, ok := strings.Cut(v, ",")
	if !ok {
		return [2]float64{}, flagErr(flag, v, "want MIN,MAX")
	}
	x, err := parseFloat(flag, a)
	if err != nil {
		return [2]float64{}, flagErr(flag, v, "want MIN,MAX, two numbers")
	}
	y, err := parseFloat(flag, b)
	if err != nil {
		return [2]float64{}, flagErr(flag, v, "want MIN,MAX, two numbers")
	}
	return [2]float64{x, y}, nil
}
