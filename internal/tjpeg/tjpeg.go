// Package tjpeg decodes JPEG images to packed RGB for package decode.
//
// By default it uses libjpeg-turbo through its TurboJPEG API (cgo,
// pkg-config libturbojpeg), with DCT-domain scaling: when the source is
// much larger than the size the caller needs, the decoder produces the
// smallest of TurboJPEG's scaled sizes (1/8 to 1 in eighths) that is at
// least that size, skipping most of the inverse DCT and upsampling work.
// Decoding is bounded: the picture size is checked from the header first,
// progressive images may have at most 500 scans (TJFLAG_LIMITSCANS) and any
// libjpeg warning is an error (TJFLAG_STOPONWARNING), except junk bytes
// between the segments before the first scan, which libjpeg skips with a
// warning and Decode drops beforehand (skipExtraneous). CMYK and YCCK JPEGs
// (Adobe APP14 marker) are converted to RGB as image/jpeg and image/color
// convert them, so both backends give the same colours.
//
// Built with -tags noturbojpeg it falls back to the standard library's
// image/jpeg, without DCT scaling; Backend tells which one is in use.
package tjpeg

import (
	"errors"
	"fmt"
)

// Errors wrapped by Decode and DecodeHeader.
var (
	// ErrCorrupt reports bytes that are not a decodable JPEG.
	ErrCorrupt = errors.New("tjpeg: corrupt or truncated JPEG")
	// ErrLimit reports a JPEG larger than the caller's pixel limit.
	ErrLimit = errors.New("tjpeg: JPEG exceeds the pixel limit")
	// ErrUnsupported reports a valid JPEG this backend cannot turn into RGB
	// (such as a 4-component JPEG without the Adobe marker that says how
	// its CMYK is stored).
	ErrUnsupported = errors.New("tjpeg: unsupported JPEG")
)

// Header is what a JPEG's header says about the image.
type Header struct {
	Width, Height int
	// Subsampling is the chroma subsampling: "444", "422", "420", "440",
	// "411" or "gray".
	Subsampling string
}

// Image is a decoded picture: Width*Height pixels of packed RGB, rows of
// Width*3 bytes without padding.
type Image struct {
	Width, Height int
	Pix           []byte
}

// Options says how large the result must be and how large the source may be.
type Options struct {
	// MinWidth and MinHeight ask for DCT scaling: the result is the smallest
	// available scaled size no smaller than these in both dimensions (or the
	// full size when none is). Zero in either means the full size.
	MinWidth, MinHeight int
	// MaxPixels bounds the source's width*height, checked from the header
	// before decoding; zero means no bound.
	MaxPixels int64
}

// scaledSize applies scaling factor num/den to a dimension, rounding up as
// TurboJPEG's TJSCALED does.
func scaledSize(dim, num, den int) int { return (dim*num + den - 1) / den }

// chooseScale returns the index into factors (pairs of num/den) of the
// smallest downscaling factor whose result covers minW x minH, or -1 for
// no scaling.
func chooseScale(w, h, minW, minH int, factors [][2]int) int {
	best, bestPix := -1, w*h
	if minW <= 0 || minH <= 0 {
		return best
	}
	for i, f := range factors {
		if f[0] >= f[1] {
			continue // only reduce
		}
		sw, sh := scaledSize(w, f[0], f[1]), scaledSize(h, f[0], f[1])
		if sw >= minW && sh >= minH && sw*sh < bestPix {
			best, bestPix = i, sw*sh
		}
	}
	return best
}

func checkHeader(h Header, opt Options) error {
	if h.Width <= 0 || h.Height <= 0 {
		return fmt.Errorf("%w: size %dx%d", ErrCorrupt, h.Width, h.Height)
	}
	if opt.MaxPixels > 0 && int64(h.Width)*int64(h.Height) > opt.MaxPixels {
		return fmt.Errorf("%w: %dx%d is more than %d pixels", ErrLimit, h.Width, h.Height, opt.MaxPixels)
	}
	return nil
}

// skipExtraneous returns data without the junk bytes libjpeg skips with the
// warning "Corrupt JPEG data: N extraneous bytes before marker 0xXX"
// (JWRN_EXTRANEOUS_DATA) between the segments before the first scan, or data
// itself when there are none. Such bytes are common in scraped images and
// libjpeg, djpeg, FFmpeg and PIL decode the image regardless, while the
// decoder here stops on any libjpeg warning so that it can refuse truncated
// and corrupt data. Dropping exactly the bytes libjpeg would discard (its
// next_marker: any byte but 0xFF, and 0xFF 0x00 pairs, before a run of 0xFF
// fill bytes and a marker code) gives the same pixels as djpeg without the
// warning; junk anywhere else (after a scan's entropy-coded data, which only
// the decoder can tell apart from data) still stops the decode.
func skipExtraneous(data []byte) []byte {
	if len(data) < 2 || data[0] != 0xFF || data[1] != 0xD8 {
		return data
	}
	var out []byte // nil until junk is found
	at := 2        // where the next marker should start
	for {
		i, j := at, at
		for {
			for i < len(data) && data[i] != 0xFF {
				i++
			}
			j = i
			for j < len(data) && data[j] == 0xFF {
				j++
			}
			if j >= len(data) {
				return data // truncated: libjpeg reports it
			}
			if data[j] != 0 {
				break
			}
			i = j + 1 // a stuffed 0xFF 0x00 pair is junk too
		}
		// data[i:j] are 0xFF fill bytes, data[j] is the marker code.
		if i > at && out == nil { // data[at:i] is junk: copy all but it
			out = append(make([]byte, 0, len(data)), data[:at]...)
		}
		m := data[j]
		next := j + 1
		switch {
		case m == 0x01 || m >= 0xD0 && m <= 0xD8: // TEM, RSTn, SOI: no length
		case m == 0xDA || m == 0xD9 || j+2 >= len(data): // SOS, EOI: copy the rest
			next = len(data)
		default:
			n := int(data[j+1])<<8 | int(data[j+2])
			if n < 2 || j+1+n > len(data) {
				next = len(data) // a bad length: libjpeg reports it
			} else {
				next = j + 1 + n
			}
		}
		if out != nil {
			out = append(out, data[i:next]...)
		}
		if next >= len(data) {
			if out == nil {
				return data
			}
			return out
		}
		at = next
	}
}
