package decoding

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"

	"github.com/datahelix/datahelix/internal/tjpeg"
	"golang.org/x/image/webp"
)

// decodeImage decodes a JPEG (TurboJPEG with DCT scaling), PNG or WebP
// and resizes it to S x S RGB with the shared triangle filter.
func (d *Decoder) decodeImage(data []byte) (Tensor, error) {
	s := d.opts.Size
	img, err := decodeImageRGB(data, d.opts.Limits.MaxImagePixels, s)
	if err != nil {
		return Tensor{}, err
	}
	t := Tensor{Shape: []int{s, s, 3}, Data: make([]byte, s*s*3)}
	resizeRGB(t.Data, s, s, img.Pix, img.Width, img.Height)
	return t, nil
}

// decodeImageRGB decodes a JPEG, PNG or WebP to packed RGB. A JPEG is
// DCT-scaled down to no less than minSide x minSide (0: full size).
func decodeImageRGB(data []byte, maxPix int64, minSide int) (tjpeg.Image, error) {
	switch {
	case bytes.HasPrefix(data, []byte{0xFF, 0xD8}):
		return tjpeg.Decode(data, tjpeg.Options{MinWidth: minSide, MinHeight: minSide, MaxPixels: maxPix})
	case bytes.HasPrefix(data, []byte("\x89PNG\r\n\x1a\n")):
		m, err := decodeBounded(data, maxPix, png.DecodeConfig, png.Decode)
		if err != nil {
			return tjpeg.Image{}, err
		}
		return toRGB(m), nil
	case len(data) >= 12 && string(data[:4]) == "RIFF" && string(data[8:12]) == "WEBP":
		m, err := decodeBounded(data, maxPix, webp.DecodeConfig, webp.Decode)
		if err != nil {
			return tjpeg.Image{}, err
		}
		return webpToRGB(m), nil
	}
	return tjpeg.Image{}, fmt.Errorf("%w: not a JPEG, PNG or WebP image", ErrUnsupported)
}

// decodeBounded checks the image size from the header before decoding.
func decodeBounded(data []byte, maxPix int64,
	config func(r io.Reader) (image.Config, error), decode func(r io.Reader) (image.Image, error)) (image.Image, error) {
	cfg, err := config(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	if cfg.Width <= 0 || cfg.Height <= 0 {
		return nil, fmt.Errorf("%w: image size %dx%d", ErrCorrupt, cfg.Width, cfg.Height)
	}
	if int64(cfg.Width)*int64(cfg.Height) > maxPix {
		return nil, fmt.Errorf("%w: image %dx%d is more than %d pixels", ErrLimit, cfg.Width, cfg.Height, maxPix)
	}
	return decode(bytes.NewReader(data))
}

// webpToRGB packs a decoded WebP as RGB24. x/image/webp returns a lossy
// WebP as an *image.YCbCr or *image.NYCbCrA holding VP8's limited-range
// BT.601 samples (not the full-range JFIF ones image/color assumes), which
// are converted as FFmpeg converts them (ycbcrToRGB); a lossless one as
// toRGB packs it.
func webpToRGB(src image.Image) tjpeg.Image {
	var m *image.YCbCr
	switch v := src.(type) {
	case *image.YCbCr:
		m = v
	case *image.NYCbCrA:
		m = &v.YCbCr
	default:
		return toRGB(src)
	}
	b := m.Bounds()
	img := tjpeg.Image{Width: b.Dx(), Height: b.Dy(), Pix: make([]byte, b.Dx()*b.Dy()*3)}
	p := img.Pix
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			yi, ci := m.YOffset(x, y), m.COffset(x, y)
			p[0], p[1], p[2] = ycbcrToRGB(m.Y[yi], m.Cb[ci], m.Cr[ci])
			p = p[3:]
		}
	}
	return img
}

// toRGB packs a decoded image as RGB24. Alpha is dropped, not composited,
// as FFmpeg's `-pix_fmt rgb24` and PIL's convert("RGB") do: a see-through
// pixel keeps its stored colour. 16-bit samples are rounded to 8 bits as
// FFmpeg rounds them (to8). YCbCr is full-range JFIF, as image/color
// defines it (lossy WebP goes through webpToRGB instead).
func toRGB(src image.Image) tjpeg.Image {
	b := src.Bounds()
	w, h := b.Dx(), b.Dy()
	img := tjpeg.Image{Width: w, Height: h, Pix: make([]byte, w*h*3)}
	p := img.Pix
	switch m := src.(type) {
	case *image.NRGBA:
		pack8(p, m.Pix, m.Stride, w, h)
	case *image.RGBA:
		// PNG's opaque 8-bit RGB: with alpha 0xff the premultiplied
		// colour is the stored one.
		pack8(p, m.Pix, m.Stride, w, h)
	case *image.NRGBA64:
		// PNG's 16-bit RGBA and gray+alpha, and 16-bit RGB or gray with a
		// tRNS chunk: big-endian samples, colour not premultiplied.
		pack16(p, m.Pix, m.Stride, w, h)
	case *image.RGBA64:
		// PNG's opaque 16-bit RGB: with alpha 0xffff the premultiplied
		// colour is the stored one.
		pack16(p, m.Pix, m.Stride, w, h)
	case *image.Gray16:
		for y := range h {
			row := m.Pix[y*m.Stride : y*m.Stride+2*w]
			for x := range w {
				v := to8(row[2*x], row[2*x+1])
				p[0], p[1], p[2] = v, v, v
				p = p[3:]
			}
		}
	case *image.YCbCr:
		for y := b.Min.Y; y < b.Max.Y; y++ {
			for x := b.Min.X; x < b.Max.X; x++ {
				yi, ci := m.YOffset(x, y), m.COffset(x, y)
				p[0], p[1], p[2] = color.YCbCrToRGB(m.Y[yi], m.Cb[ci], m.Cr[ci])
				p = p[3:]
			}
		}
	case *image.Gray:
		for y := range h {
			for _, v := range m.Pix[y*m.Stride : y*m.Stride+w] {
				p[0], p[1], p[2] = v, v, v
				p = p[3:]
			}
		}
	default:
		// Paletted PNGs (whose palette holds color.NRGBA or color.RGBA, so
		// the conversion keeps the stored colour) and anything else.
		for y := b.Min.Y; y < b.Max.Y; y++ {
			for x := b.Min.X; x < b.Max.X; x++ {
				c := color.NRGBAModel.Convert(src.At(x, y)).(color.NRGBA)
				p[0], p[1], p[2] = c.R, c.G, c.B
				p = p[3:]
			}
		}
	}
	return img
}

// pack8 packs the w x h pixels of 4 bytes (R, G, B, A; rows of stride
// bytes) in pix as RGB24 into p, alpha dropped.
func pack8(p, pix []byte, stride, w, h int) {
	for y := range h {
		row := pix[y*stride : y*stride+4*w]
		for x := range w {
			p[0], p[1], p[2] = row[4*x], row[4*x+1], row[4*x+2]
			p = p[3:]
		}
	}
}

// pack16 packs the w x h pixels of 8 bytes (16-bit big-endian R, G, B,
// A; rows of stride bytes) in pix as RGB24 into p, alpha dropped.
func pack16(p, pix []byte, stride, w, h int) {
	for y := range h {
		row := pix[y*stride : y*stride+8*w]
		for x := range w {
			s := row[8*x : 8*x+6 : 8*x+6]
			p[0], p[1], p[2] = to8(s[0], s[1]), to8(s[2], s[3]), to8(s[4], s[5])
			p = p[3:]
		}
	}
}

// to8 rounds the big-endian 16-bit sample hi<<8|lo to 8 bits as FFmpeg
// 5.1's swscale does for gray16 and ya16 (found by converting every 16-bit
// value): (v+128)>>8, saturated at 255. For rgb48 and rgba64 FFmpeg goes
// through limited-range YUV, so each output depends on the other channels
// (and on the neighbouring pixel's chroma); no per-sample rule reproduces
// that, and this one is within 1 of it (2-4% of samples differ).
func to8(hi, lo byte) byte {
	if hi == 0xff && lo >= 0x80 {
		return 0xff
	}
	return hi + lo>>7
}

// Limited-range BT.601 coefficients in FFmpeg's swscale fixed point: its
// ITU-R 601 table (104597, 132201, 25675, 53279 for Cr->R, Cb->B, Cb->G,
// Cr->G, and 76309 = 65536*255/219 for luma) times 2^13 rounded to 16
// bits, the values its x86 yuv2rgb multiplies by.
const (
	ycLuma = 9539
	ycCrR  = 13075
	ycCbB  = 16525
	ycCbG  = -3209
	ycCrG  = -6660
)

// mulhi is the x86 PMULHW of (v<<3) and c: the high 16 bits of the
// product, rounded towards minus infinity.
func mulhi(v, c int32) int32 { return (v * 8 * c) >> 16 }

// ycbcrToRGB converts one limited-range (16..235, chroma 16..240) BT.601
// sample, as VP8 (lossy WebP) stores it, to RGB with FFmpeg 5.1's x86
// arithmetic: each term is truncated separately, then the sum is clamped.
// With the co-sited chroma sample (nearest-neighbour upsampling) this
// equals `ffmpeg -pix_fmt rgb24` on lossy WebPs of even height; for an odd
// height FFmpeg takes its general scaler, which interpolates chroma.
func ycbcrToRGB(yy, cb, cr uint8) (r, g, b uint8) {
	y := mulhi(int32(yy)-16, ycLuma)
	u, v := int32(cb)-128, int32(cr)-128
	return clamp8(y + mulhi(v, ycCrR)), clamp8(y + mulhi(u, ycCbG) + mulhi(v, ycCrG)), clamp8(y + mulhi(u, ycCbB))
}

func clamp8(v int32) uint8 {
	return uint8(min(max(v, 0), 255))
}
