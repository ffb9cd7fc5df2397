package launcher

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/datahelix/datahelix/decode"
	"github.com/datahelix/datahelix/internal/agree"
	"github.com/datahelix/datahelix/internal/transform"
)

// transformFlags are the transform flags of run, train, serve and decode
// (issue 26 §3), kept as written until spec parses them.
type transformFlags struct{ f transform.Flags }

func (t *transformFlags) register(fs *flag.FlagSet) {
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

// spec parses the flags; an error is a usage error naming the flag
// (exit status 2), on every rank alike, before anything is decoded.
func (t *transformFlags) spec(size int) (transform.Spec, error) {
	s, err := transform.Parse(t.f)
	if err == nil {
		err = s.CheckSize(size)
	}
	var fe *transform.FlagError
	if errors.As(err, &fe) {
		return transform.Spec{}, flagErrorf("", fe.Flag, fe.Value, "%s", fe.Reason)
	}
	if err != nil {
		return transform.Spec{}, usagef("%w", err)
	}
	return s, nil
}

// transformSetting is the transform every rank must share.
func transformSetting(s transform.Spec) agree.Setting {
	txt := s.String()
	return agree.Setting{Name: "transforms", Value: agree.HashStrings([]string{txt}), Hashed: true, Text: txt}
}

// printTensorMD5s prints KEY<tab>I<tab>MD5 for each output tensor of
// every sample of path, decoded with dec (--md5 with a transform: the
// tensors after it, which depend on --seed and --epoch alone).
func printTensorMD5s(ctx context.Context, w, stderr io.Writer, path, cache string, dec *decode.Decoder, epoch int) (tally, error) {
	return eachSample(stderr, path, cache, func(s *decode.Sample) error {
		s.Epoch = epoch
		out, err := dec.Decode(ctx, s, nil)
		if err != nil {
			return err
		}
		for i, t := range out.Tensors {
			sum := md5.Sum(t.Data)
			if _, err := fmt.Fprintf(w, "%s\t%d\t%s\n", s.Key, i, hex.EncodeToString(sum[:])); err != nil {
				return fatal(err)
			}
		}
		return nil
	})
}
