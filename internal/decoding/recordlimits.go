package decoding

import (
	"fmt"
	"slices"
	"strings"
)

// checkRecordLimits refuses, when its record is built, a sample that
// decoding would refuse for what the record already shows, so that it is
// not costed, planned and moved and then dropped at every draw, and so
// that inspect reports it: a clip whose codec is known and outside
// lim.Codecs (ErrUnsupported; an "unknown" codec is left to FFmpeg, which
// may know it under a tag the record parsers do not), a clip whose
// picture, as its container states it, exceeds lim.MaxPixels, a document
// of more than lim.MaxImages images, or an image that exceeds
// lim.MaxImagePixels (ErrLimit). The checks and their bounds are those of
// decoding: av's codec list and header check, resolvePayload's image
// count, the image decoders' header check. lim must have its defaults
// filled in, and r built from s. Errors are *SampleError values naming
// the member.
func checkRecordLimits(s *Sample, r *Record, lim Limits) error {
	member := func(i int) string { return s.Members[i].Name } // r was built from s
	if v := r.Video; v != nil {
		if v.Codec != "unknown" && !listed(v.Codec, lim.Codecs) {
			return newSampleError(s, member(v.Member), fmt.Errorf("%w: video codec %s; datahelix decodes %s: convert it, e.g. ffmpeg -i IN -c:v libx264 OUT.mp4",
				ErrUnsupported, v.Codec, strings.ReplaceAll(lim.Codecs, ",", ", ")))
		}
		if px := int64(v.Width) * int64(v.Height); px > lim.MaxPixels {
			return newSampleError(s, member(v.Member), fmt.Errorf("%w: picture %dx%d exceeds %d pixels: scale the clip down",
				ErrLimit, v.Width, v.Height, lim.MaxPixels))
		}
		return nil // images beside a clip are not decoded
	}
	if err := imageCount(len(r.Images), lim); err != nil {
		return newSampleError(s, "", err)
	}
	for _, im := range r.Images {
		if px := int64(im.Width) * int64(im.Height); px > lim.MaxImagePixels {
			return newSampleError(s, member(im.Member), fmt.Errorf("%w: %s image %dx%d exceeds %d pixels: scale it down",
				ErrLimit, im.Format, im.Width, im.Height, lim.MaxImagePixels))
		}
	}
	return nil
}

// imageCount is the error of a document of n images, ErrLimit over
// lim.MaxImages, nil within it: the record's check and decoding's.
func imageCount(n int, lim Limits) error {
	if n > lim.MaxImages {
		return fmt.Errorf("%w: %d images, limit %d", ErrLimit, n, lim.MaxImages)
	}
	return nil
}

// listed reports whether name is one of the comma-separated names of
// list, as FFmpeg's av_match_list matches a codec name (exactly).
func listed(name, list string) bool {
	return slices.Contains(strings.Split(list, ","), name)
}
