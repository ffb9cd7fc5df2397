//go:build noturbojpeg

package tjpeg

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
)

// Backend names the JPEG decoder this build uses.
const Backend = "image/jpeg"

// DecodeHeader reads the size of a JPEG without decoding it. The standard
// library does not report the subsampling from the header, so Subsampling
// is empty.
func DecodeHeader(data []byte) (Header, error) {
	cfg, err := jpeg.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return Header{}, fmt.Errorf("%w: header: %v", ErrCorrupt, err)
	}
	h := Header{Width: cfg.Width, Height: cfg.Height}
	if cfg.ColorModel == color.GrayModel {
		h.Subsampling = "gray"
	}
	return h, nil
}

// Decode decodes a JPEG to RGB at full size (image/jpeg has no DCT
// scaling; the caller resizes).
func Decode(data []byte, opt Options) (Image, error) {
	hdr, err := DecodeHeader(data)
	if err != nil {
		return Image{}, err
	}
	if err := checkHeader(hdr, opt); err != nil {
		return Image{}, err
	}
	src, err := jpeg.Decode(bytes.NewReader(data))
	if err != nil {
		if _, ok := err.(jpeg.UnsupportedError); ok {
			return Image{}, fmt.Errorf("%w: %v", ErrUnsupported, err)
		}
		return Image{}, fmt.Errorf("%w: decode: %v", ErrCorrupt, err)
	}
	return toRGB(src), nil
}

// toRGB packs any decoded image as RGB, with a fast path for YCbCr.
func toRGB(src image.Image) Image {
	b := src.Bounds()
	img := Image{Width: b.Dx(), Height: b.Dy(), Pix: make([]byte, b.Dx()*b.Dy()*3)}
	i := 0
	switch m := src.(type) {
	case *image.YCbCr:
		for y := b.Min.Y; y < b.Max.Y; y++ {
			for x := b.Min.X; x < b.Max.X; x++ {
				yi, ci := m.YOffset(x, y), m.COffset(x, y)
				img.Pix[i], img.Pix[i+1], img.Pix[i+2] = color.YCbCrToRGB(m.Y[yi], m.Cb[ci], m.Cr[ci])
				i += 3
			}
		}
	case *image.Gray:
		for y := b.Min.Y; y < b.Max.Y; y++ {
			for _, v := range m.Pix[(y-b.Min.Y)*m.Stride : (y-b.Min.Y)*m.Stride+b.Dx()] {
				img.Pix[i], img.Pix[i+1], img.Pix[i+2] = v, v, v
				i += 3
			}
		}
	default:
		for y := b.Min.Y; y < b.Max.Y; y++ {
			for x := b.Min.X; x < b.Max.X; x++ {
				c := color.RGBAModel.Convert(src.At(x, y)).(color.RGBA)
				img.Pix[i], img.Pix[i+1], img.Pix[i+2] = c.R, c.G, c.B
				i += 3
			}
		}
	}
	return img
}

// Progressive is not available without TurboJPEG.
func Progressive(data []byte) ([]byte, error) {
	return nil, fmt.Errorf("%w: progressive transform needs TurboJPEG (built with noturbojpeg)", ErrUnsupported)
}
