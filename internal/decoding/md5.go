package decoding

import (
	"context"
	"crypto/md5"
	"encoding/hex"
)

// imagePixelsMD5 decodes a JPEG, PNG or WebP image at full size to packed RGB24
// (Width*Height pixels of 3 bytes, rows without padding), the picture
// Decode resizes to S x S, and returns the hex MD5 of those bytes with the
// picture's size. JPEGs are decoded by libjpeg-turbo (accurate integer
// IDCT, smooth chroma upsampling), so the MD5 equals that of the pixels of
// `djpeg -ppm FILE`; FFmpeg's JPEG decoder and colour conversion round
// differently, so `ffmpeg -pix_fmt rgb24 -f framemd5` does not match for
// JPEG. PNG and WebP are decoded by Go's image/png and x/image/webp; the
// MD5 equals `ffmpeg -i FILE -pix_fmt rgb24 -f framemd5 -` for 8-bit and
// grey 16-bit PNGs, lossless WebPs and lossy WebPs of even height (16-bit
// RGB and RGBA PNGs within 1 of it, which FFmpeg converts through YUV).
// Its error is the decoder's own, which a *SampleError classifies.
func imagePixelsMD5(data []byte, maxPix int64) (sum string, width, height int, err error) {
	img, err := decodeImageRGB(data, maxPix, 0)
	if err != nil {
		return "", 0, 0, err
	}
	h := md5.Sum(img.Pix)
	return hex.EncodeToString(h[:]), img.Width, img.Height, nil
}

// MemberMD5s are the MD5s of one decoded member of a sample.
type MemberMD5s struct {
	Member string   // the member's name in the shard
	Video  bool     // MD5s are per video frame (frameMD5s), else one RGB24 image (imagePixelsMD5)
	Audio  bool     // MD5s is the one of the audio output (Audio.MD5; SampleMD5sFor)
	MD5s   []string // hex, in output order
}

// SampleMD5s hashes, at full size, the pictures Decode would decode from
// s: the clip of a video sample frame by frame, as frameMD5s does, or the
// images of an image sample or a document, each as imagePixelsMD5 does, in
// record order; a text sample gives none. It refuses what Decode refuses
// before decoding (a sample without a payload, more images than
// lim.MaxImages), and a member that cannot be decoded returns a
// *SampleError naming it.
func SampleMD5s(ctx context.Context, s *Sample, lim Limits) ([]MemberMD5s, error) {
	lim = lim.withDefaults()
	p, err := resolvePayload(s, nil, lim, false)
	if err != nil {
		return nil, err
	}
	return payloadMD5s(ctx, s, p, lim)
}

// payloadMD5s hashes the pictures of p, s's payload, as SampleMD5s does.
func payloadMD5s(ctx context.Context, s *Sample, p payload, lim Limits) ([]MemberMD5s, error) {
	fail := func(m *Member, err error) error {
		return newSampleError(s, m.Name, err)
	}
	var out []MemberMD5s
	if m := p.video; m != nil {
		sums, err := frameMD5s(ctx, m.Data, lim)
		if err != nil {
			return nil, fail(m, err)
		}
		out = append(out, MemberMD5s{Member: m.Name, Video: true, MD5s: sums})
	}
	for i := range p.images {
		m := &p.images[i]
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		sum, _, _, err := imagePixelsMD5(m.Data, lim.MaxImagePixels)
		if err != nil {
			return nil, fail(m, err)
		}
		out = append(out, MemberMD5s{Member: m.Name, MD5s: []string{sum}})
	}
	return out, nil
}
