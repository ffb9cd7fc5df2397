package decoding

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
)

// ErrBadImage reports image bytes whose header cannot be read or whose
// format is not JPEG, PNG or WebP (parseImageHeader reports a format it
// recognises but does not read, such as GIF, as ErrUnsupported).
var ErrBadImage = errors.New("decode: invalid image header")

// maxImageSide bounds the width and height an image header may declare.
// Formats allow up to 65535 (JPEG), 16383 (WebP) or 2^31-1 (PNG); we
// accept the JPEG limit and leave pixel budgets to the decoder.
const maxImageSide = 1 << 16

// parseImageHeader reads the format, dimensions and, for JPEG, the
// progressive flag and chroma subsampling of an image from its header,
// without decoding. The format is recognised from the bytes, not from the
// member's extension. For PNG, Progressive means Adam7 interlacing. An
// image of a format it recognises but datahelix does not read (GIF, TIFF,
// BMP, AVIF, HEIF, JPEG XL, JPEG 2000, animated WebP) is an ErrUnsupported
// naming it;
// other bytes that do not read are ErrBadImage.
func parseImageHeader(data []byte) (ImageInfo, error) {
	var info ImageInfo
	var err error
	switch {
	case len(data) >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF:
		info, err = parseJPEGHeader(data)
	case len(data) >= 8 && string(data[:8]) == "\x89PNG\r\n\x1a\n":
		info, err = parsePNGHeader(data)
	case len(data) >= 12 && string(data[:4]) == "RIFF" && string(data[8:12]) == "WEBP":
		info, err = parseWebPHeader(data)
	default:
		if f := otherImageFormat(data); f != "" {
			return ImageInfo{}, fmt.Errorf("%w: a %s image, whatever its extension says; datahelix reads JPEG, PNG and WebP: convert it", ErrUnsupported, f)
		}
		return ImageInfo{}, fmt.Errorf("%w: not a JPEG, PNG or WebP file", ErrBadImage)
	}
	if err != nil {
		return ImageInfo{}, err
	}
	if info.Width <= 0 || info.Height <= 0 || info.Width > maxImageSide || info.Height > maxImageSide {
		return ImageInfo{}, fmt.Errorf("%w: %s dimensions %dx%d out of range", ErrBadImage, info.Format, info.Width, info.Height)
	}
	info.Bytes = len(data)
	return info, nil
}

// parseJPEGHeader walks the marker segments up to the first start-of-frame
// marker.
func parseJPEGHeader(b []byte) (ImageInfo, error) {
	i := 2
	for {
		// Markers are 0xFF, optional 0xFF fill bytes, then the code.
		for i < len(b) && b[i] != 0xFF {
			i++ // tolerate junk between segments, as libjpeg does
		}
		for i < len(b) && b[i] == 0xFF {
			i++
		}
		if i >= len(b) {
			return ImageInfo{}, fmt.Errorf("%w: JPEG ends before its frame header", ErrBadImage)
		}
		m := b[i]
		i++
		switch {
		case m == 0x01 || m == 0xD8 || (m >= 0xD0 && m <= 0xD7):
			continue // no length
		case m == 0xD9 || m == 0xDA:
			return ImageInfo{}, fmt.Errorf("%w: JPEG without a frame header before its scan", ErrBadImage)
		}
		if i+2 > len(b) {
			return ImageInfo{}, fmt.Errorf("%w: truncated JPEG segment", ErrBadImage)
		}
		n := int(binary.BigEndian.Uint16(b[i:]))
		if n < 2 || i+n > len(b) {
			return ImageInfo{}, fmt.Errorf("%w: JPEG segment 0xFF%02X of %d bytes at offset %d does not fit", ErrBadImage, m, n, i-2)
		}
		seg := b[i+2 : i+n]
		i += n
		if m < 0xC0 || m > 0xCF || m == 0xC4 || m == 0xC8 || m == 0xCC {
			continue // not a start-of-frame marker (DHT, JPG, DAC excluded)
		}
		return jpegFrame(seg, m)
	}
}

// jpegFrame reads an SOFn segment body.
func jpegFrame(seg []byte, marker byte) (ImageInfo, error) {
	if len(seg) < 6 {
		return ImageInfo{}, fmt.Errorf("%w: truncated JPEG frame header", ErrBadImage)
	}
	info := ImageInfo{
		Format:      "jpeg",
		Height:      int(binary.BigEndian.Uint16(seg[1:])),
		Width:       int(binary.BigEndian.Uint16(seg[3:])),
		Progressive: marker == 0xC2 || marker == 0xC6 || marker == 0xCA || marker == 0xCE,
	}
	nc := int(seg[5])
	if nc == 0 || len(seg) < 6+3*nc {
		return ImageInfo{}, fmt.Errorf("%w: JPEG frame header with %d components in %d bytes", ErrBadImage, nc, len(seg))
	}
	info.Subsampling = jpegSubsampling(seg[6:6+3*nc], nc)
	return info, nil
}

// jpegSubsampling names the chroma subsampling of a JPEG's components
// (id, HxV sampling nibbles, table), or "" when it is none of the usual
// ones.
func jpegSubsampling(comps []byte, nc int) string {
	if nc == 1 {
		return "gray"
	}
	if nc != 3 {
		return ""
	}
	h0, v0 := int(comps[1]>>4), int(comps[1]&15)
	h1, v1 := int(comps[4]>>4), int(comps[4]&15)
	h2, v2 := int(comps[7]>>4), int(comps[7]&15)
	if h1 != h2 || v1 != v2 || h1 == 0 || v1 == 0 || h0%h1 != 0 || v0%v1 != 0 {
		return ""
	}
	switch [2]int{h0 / h1, v0 / v1} {
	case [2]int{1, 1}:
		return "444"
	case [2]int{2, 1}:
		return "422"
	case [2]int{2, 2}:
		return "420"
	case [2]int{1, 2}:
		return "440"
	case [2]int{4, 1}:
		return "411"
	}
	return ""
}

// parsePNGHeader reads the IHDR chunk that must follow the signature.
func parsePNGHeader(b []byte) (ImageInfo, error) {
	if len(b) < 33 || string(b[12:16]) != "IHDR" || binary.BigEndian.Uint32(b[8:]) != 13 {
		return ImageInfo{}, fmt.Errorf("%w: PNG without a leading IHDR chunk", ErrBadImage)
	}
	w, h := binary.BigEndian.Uint32(b[16:]), binary.BigEndian.Uint32(b[20:])
	if w > maxImageSide || h > maxImageSide {
		return ImageInfo{}, fmt.Errorf("%w: PNG dimensions %dx%d out of range", ErrBadImage, w, h)
	}
	return ImageInfo{Format: "png", Width: int(w), Height: int(h), Progressive: b[28] == 1}, nil
}

// parseWebPHeader reads the first chunk of a RIFF WebP file: lossy VP8,
// lossless VP8L or extended VP8X (whose canvas size is the image size).
// An animated WebP is refused as ErrUnsupported.
func parseWebPHeader(b []byte) (ImageInfo, error) {
	if len(b) < 30 {
		return ImageInfo{}, fmt.Errorf("%w: truncated WebP header", ErrBadImage)
	}
	info := ImageInfo{Format: "webp"}
	d := b[20:]
	switch string(b[12:16]) {
	case "VP8 ":
		if d[0]&1 != 0 || !bytes.Equal(d[3:6], []byte{0x9D, 0x01, 0x2A}) {
			return ImageInfo{}, fmt.Errorf("%w: WebP VP8 chunk without a key frame start code", ErrBadImage)
		}
		info.Width = int(binary.LittleEndian.Uint16(d[6:]) & 0x3FFF)
		info.Height = int(binary.LittleEndian.Uint16(d[8:]) & 0x3FFF)
	case "VP8L":
		if d[0] != 0x2F {
			return ImageInfo{}, fmt.Errorf("%w: WebP VP8L chunk without its signature", ErrBadImage)
		}
		v := binary.LittleEndian.Uint32(d[1:])
		info.Width, info.Height = int(v&0x3FFF)+1, int(v>>14&0x3FFF)+1
	case "VP8X":
		if d[0]&0x02 != 0 { // the animation flag
			// x/image/webp, and FFmpeg 5.1's decoder, read still WebP only.
			return ImageInfo{}, fmt.Errorf("%w: an animated WebP image; datahelix reads still WebP: convert its first frame (webpmux -get frame 1 IN -o OUT)", ErrUnsupported)
		}
		info.Width = int(uint32(d[4])|uint32(d[5])<<8|uint32(d[6])<<16) + 1
		info.Height = int(uint32(d[7])|uint32(d[8])<<8|uint32(d[9])<<16) + 1
	default:
		return ImageInfo{}, fmt.Errorf("%w: WebP first chunk %q", ErrBadImage, b[12:16])
	}
	return info, nil
}

// otherImageFormat names the image format data starts with when it is one
// datahelix does not read but scraped datasets hold under a .jpg or .png
// name (GIF, TIFF, BMP, AVIF, HEIF, JPEG XL, JPEG 2000), and returns ""
// otherwise.
func otherImageFormat(data []byte) string {
	has := func(prefix string) bool { return bytes.HasPrefix(data, []byte(prefix)) }
	switch {
	case has("GIF87a"), has("GIF89a"):
		return "GIF"
	case has("II*\x00"), has("MM\x00*"):
		return "TIFF"
	case has("BM") && len(data) >= 26 && binary.LittleEndian.Uint32(data[2:]) == uint32(len(data)):
		return "BMP"
	case len(data) >= 12 && string(data[4:8]) == "ftyp":
		switch string(data[8:12]) {
		case "avif", "avis":
			return "AVIF"
		case "heic", "heix", "mif1", "msf1", "hevc":
			return "HEIF"
		}
	case has("\xff\x0a"), has("\x00\x00\x00\x0cJXL \r\n\x87\n"):
		return "JPEG XL"
	case has("\x00\x00\x00\x0cjP  \r\n\x87\n"), has("\xff\x4f\xff\x51"):
		return "JPEG 2000"
	}
	return ""
}
