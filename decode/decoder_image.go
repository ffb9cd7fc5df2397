package decode

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"

	"github.com/datahelix/datahelix/decode/tjpeg"
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
		return toRGB(m), nil
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

// toRGB packs a decoded image as RGB. Alpha is dropped, not composited, as
// PIL's convert("RGB") does.
func toRGB(src image.Image) tjpeg.Image {
	b := src.Bounds()
	w, h := b.Dx(), b.Dy()
	img := tjpeg.Image{Width: w, Height: h, Pix: make([]byte, w*h*3)}
	p := img.Pix
	switch m := src.(type) {
	case *image.NRGBA:
		for y := range h {
			row := m.Pix[y*m.Stride : y*m.Stride+4*w]
			for x := range w {
				p[0], p[1], p[2] = row[4*x], row[4*x+1], row[4*x+2]
				p = p[3:]
			}
		}
	case *image.RGBA:
		for y := range h {
			row := m.Pix[y*m.Stride : y*m.Stride+4*w]
			for x := range w {
				p[0], p[1], p[2] = row[4*x], row[4*x+1], row[4*x+2]
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
	case *image.NYCbCrA:
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
