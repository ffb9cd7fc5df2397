package cli

import (
	"errors"
	"flag"

	"github.com/datahelix/datahelix/internal/transform"
)

// TransformFlags are the transform flags of run, train, serve, decode and
// costmodel, kept as written until Spec parses them.
type TransformFlags struct{ f transform.Flags }

// Register defines the flags on fs.
func (t *TransformFlags) Register(fs *flag.FlagSet) {
	fs.StringVar(&t.f.Resize, "resize", "squash", "`MODE` of making frames and images S x S: squash (stretch the whole picture), short-side (scale the short side to S, keep the centre), "+
		"random-crop (a random part of the picture, torchvision's RandomResizedCrop: see --crop-scale and --crop-ratio), "+
		"or native (keep the aspect: the long side scaled down to at most S, padded with zeros to a multiple of --pad-to; shapes vary by sample); "+
		"random choices are seeded by --seed, the sample's epoch and its key alone, so any rank decodes a sample alike")
	fs.StringVar(&t.f.PadTo, "pad-to", "", "native: pad each picture's sides to a multiple of `B` pixels, a divisor of --size (default 1: no padding)")
	fs.StringVar(&t.f.CropScale, "crop-scale", "", "random-crop: `MIN,MAX` fractions of the picture's area the crop covers, 0 < MIN <= MAX <= 1 (default 0.08,1)")
	fs.StringVar(&t.f.CropRatio, "crop-ratio", "", "random-crop: `MIN,MAX` aspect ratios (width over height) of the crop, log-uniform, 0.01..100 (default 0.75,1.3333)")
	fs.StringVar(&t.f.HFlip, "hflip", "", "probability `P` in 0..1 of mirroring a sample's frames or each of its images left to right (default 0)")
	fs.StringVar(&t.f.Frames, "frame-sampling", "uniform", "`MODE` of choosing a clip's F frames: uniform (spread over the clip), segment (F frames --frame-stride apart from a random start) "+
		"or fps (the frames at --fps from the clip's start, at most --frames: F varies by clip, each clip's tensor holding only the frames it has)")
	fs.StringVar(&t.f.FPS, "fps", "", "fps: `R` frames per second to sample, 0.001..1000")
	fs.StringVar(&t.f.Stride, "frame-stride", "", "segment: `N` shown frames between sampled frames, 1..1024 (default 1)")
}

// Spec parses the flags for frames and images of size S; an error is a usage error naming the flag
// (exit status 2), on every rank alike, before anything is decoded.
func (t *TransformFlags) Spec(size int) (transform.Spec, error) {
	s, err := transform.Parse(t.f)
	if err == nil {
		err = s.CheckSize(size)
	}
	var fe *transform.FlagError
	if errors.As(err, &fe) {
		return transform.Spec{}, FlagErrorf("", fe.Flag, fe.Value, "%s", fe.Reason)
	}
	if err != nil {
		return transform.Spec{}, Usagef("%w", err)
	}
	return s, nil
}
