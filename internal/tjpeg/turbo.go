//go:build !noturbojpeg

package tjpeg

/*
#cgo pkg-config: libturbojpeg
#include <stdio.h>
#include <stdlib.h>
#include <turbojpeg.h>

// tj_header opens a decompressor and reads the header; the caller destroys
// the handle (returned in *h even on failure) with tjDestroy.
static int tj_header(const unsigned char *buf, unsigned long len, tjhandle *h,
                     int *w, int *ht, int *subsamp, int *cs) {
	*h = tjInitDecompress();
	if (!*h)
		return -1;
	return tjDecompressHeader3(*h, buf, len, w, ht, subsamp, cs);
}

// tj_decode decompresses to packed pixels of format pf (TJPF_RGB or
// TJPF_CMYK) at the scaled size w x ht.
static int tj_decode(tjhandle h, const unsigned char *buf, unsigned long len,
                     unsigned char *dst, int w, int ht, int pf) {
	return tjDecompress2(h, buf, len, dst, w, w * tjPixelSize[pf], ht, pf,
	                     TJFLAG_LIMITSCANS | TJFLAG_STOPONWARNING);
}

// tj_progressive losslessly rewrites a JPEG with progressive scans.
static int tj_progressive(const unsigned char *buf, unsigned long len,
                          unsigned char **out, unsigned long *outlen,
                          char *msg, int msglen) {
	tjhandle h = tjInitTransform();
	if (!h)
		return -1;
	tjtransform xf = {0};
	xf.op = TJXOP_NONE;
	xf.options = TJXOPT_PROGRESSIVE;
	*out = NULL;
	*outlen = 0;
	int ret = tjTransform(h, buf, len, 1, out, outlen, &xf, TJFLAG_STOPONWARNING);
	if (ret)
		snprintf(msg, msglen, "%s", tjGetErrorStr2(h));
	tjDestroy(h);
	return ret;
}
*/
import "C"

import (
	"fmt"
	"image/color"
	"sync"
	"unsafe"
)

// Backend names the JPEG decoder this build uses.
const Backend = "turbojpeg"

var (
	factorsOnce sync.Once
	factors     [][2]int
)

// scalingFactors returns TurboJPEG's supported scaling factors.
func scalingFactors() [][2]int {
	factorsOnce.Do(func() {
		var n C.int
		p := C.tjGetScalingFactors(&n)
		for _, f := range unsafe.Slice(p, int(n)) {
			factors = append(factors, [2]int{int(f.num), int(f.denom)})
		}
	})
	return factors
}

var subsampNames = map[C.int]string{
	C.TJSAMP_444: "444", C.TJSAMP_422: "422", C.TJSAMP_420: "420",
	C.TJSAMP_GRAY: "gray", C.TJSAMP_440: "440", C.TJSAMP_411: "411",
}

func tjErr(h C.tjhandle, kind error, what string) error {
	return fmt.Errorf("%w: %s: %s", kind, what, C.GoString(C.tjGetErrorStr2(h)))
}

func header(data []byte) (C.tjhandle, Header, C.int, error) {
	var h C.tjhandle
	var w, ht, ss, cs C.int
	if len(data) == 0 {
		return nil, Header{}, 0, fmt.Errorf("%w: empty input", ErrCorrupt)
	}
	rc := C.tj_header((*C.uchar)(unsafe.Pointer(&data[0])), C.ulong(len(data)), &h, &w, &ht, &ss, &cs)
	if h == nil {
		return nil, Header{}, 0, fmt.Errorf("%w: cannot create a TurboJPEG decompressor", ErrLimit)
	}
	if rc != 0 {
		return h, Header{}, 0, tjErr(h, ErrCorrupt, "header")
	}
	return h, Header{Width: int(w), Height: int(ht), Subsampling: subsampNames[ss]}, cs, nil
}

// DecodeHeader reads the size and subsampling of a JPEG without decoding it.
func DecodeHeader(data []byte) (Header, error) {
	h, hdr, _, err := header(skipExtraneous(data))
	if h != nil {
		C.tjDestroy(h)
	}
	return hdr, err
}

// Decode decodes a JPEG to RGB, DCT-scaled as opt asks.
func Decode(data []byte, opt Options) (Image, error) {
	data = skipExtraneous(data)
	h, hdr, cs, err := header(data)
	if h != nil {
		defer C.tjDestroy(h)
	}
	if err != nil {
		return Image{}, err
	}
	if err := checkHeader(hdr, opt); err != nil {
		return Image{}, err
	}
	cmyk := cs == C.TJCS_CMYK || cs == C.TJCS_YCCK
	if cmyk && !hasAdobeMarker(data) {
		// Without the marker, whether the ink values are inverted is
		// unknown; image/jpeg refuses such files too.
		return Image{}, fmt.Errorf("%w: 4-component (CMYK) JPEG without an Adobe APP14 marker", ErrUnsupported)
	}
	w, ht := hdr.Width, hdr.Height
	if i := chooseScale(w, ht, opt.MinWidth, opt.MinHeight, scalingFactors()); i >= 0 {
		f := scalingFactors()[i]
		w, ht = scaledSize(w, f[0], f[1]), scaledSize(ht, f[0], f[1])
	}
	pf, size := C.int(C.TJPF_RGB), 3
	if cmyk {
		pf, size = C.TJPF_CMYK, 4
	}
	pix := make([]byte, w*ht*size)
	rc := C.tj_decode(h, (*C.uchar)(unsafe.Pointer(&data[0])), C.ulong(len(data)),
		(*C.uchar)(unsafe.Pointer(&pix[0])), C.int(w), C.int(ht), pf)
	if rc != 0 {
		return Image{}, tjErr(h, ErrCorrupt, "decode")
	}
	if cmyk {
		pix = adobeCMYKToRGB(pix)
	}
	return Image{Width: w, Height: ht, Pix: pix}, nil
}

// hasAdobeMarker reports whether the markers before the first SOS include
// an Adobe APP14 segment (the one that says a 4-component JPEG is CMYK or
// YCCK), read as image/jpeg reads it.
func hasAdobeMarker(data []byte) bool {
	i := 2 // after SOI
	for i+4 <= len(data) {
		if data[i] != 0xFF {
			return false
		}
		m := data[i+1]
		switch {
		case m == 0xFF: // fill byte
			i++
			continue
		case m == 0x01 || m >= 0xD0 && m <= 0xD8: // TEM, RSTn, SOI: no length
			i += 2
			continue
		case m == 0xDA || m == 0xD9: // SOS, EOI
			return false
		}
		n := int(data[i+2])<<8 | int(data[i+3])
		if n < 2 || i+2+n > len(data) {
			return false
		}
		if m == 0xEE && n-2 >= 12 && string(data[i+4:i+9]) == "Adobe" {
			return true
		}
		i += 2 + n
	}
	return false
}

// adobeCMYKToRGB converts TurboJPEG's TJPF_CMYK output of an Adobe CMYK or
// YCCK JPEG to packed RGB in place and returns the RGB part of the buffer.
// TurboJPEG returns the stored values, which Adobe's convention inverts
// (255 is no ink, as for YCCK after its YCC-to-CMY step); image/jpeg
// undoes the inversion and image/color's CMYKToRGB gives the RGB, which
// this matches exactly.
func adobeCMYKToRGB(pix []byte) []byte {
	n := len(pix) / 4
	for i := range n {
		s := pix[4*i : 4*i+4 : 4*i+4]
		r, g, b := color.CMYKToRGB(255-s[0], 255-s[1], 255-s[2], 255-s[3])
		pix[3*i], pix[3*i+1], pix[3*i+2] = r, g, b // 3*i+2 < 4*i+4: only read bytes are overwritten
	}
	return pix[: 3*n : 3*n]
}

// Progressive losslessly rewrites a baseline JPEG with progressive scans
// (TurboJPEG's tjTransform with TJXOPT_PROGRESSIVE).
func Progressive(data []byte) ([]byte, error) {
	if len(data) == 0 {
		return nil, fmt.Errorf("%w: empty input", ErrCorrupt)
	}
	var out *C.uchar
	var n C.ulong
	var msg [200]C.char
	rc := C.tj_progressive((*C.uchar)(unsafe.Pointer(&data[0])), C.ulong(len(data)), &out, &n, &msg[0], C.int(len(msg)))
	if out != nil {
		defer C.tjFree(out)
	}
	if rc != 0 {
		return nil, fmt.Errorf("%w: progressive transform: %s", ErrCorrupt, C.GoString(&msg[0]))
	}
	return C.GoBytes(unsafe.Pointer(out), C.int(n)), nil
}
