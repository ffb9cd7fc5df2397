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

// tj_decode decompresses to packed RGB at the scaled size w x ht.
static int tj_decode(tjhandle h, const unsigned char *buf, unsigned long len,
                     unsigned char *dst, int w, int ht) {
	return tjDecompress2(h, buf, len, dst, w, w * 3, ht, TJPF_RGB,
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
	h, hdr, _, err := header(data)
	if h != nil {
		C.tjDestroy(h)
	}
	return hdr, err
}

// Decode decodes a JPEG to RGB, DCT-scaled as opt asks.
func Decode(data []byte, opt Options) (Image, error) {
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
	if cs == C.TJCS_CMYK || cs == C.TJCS_YCCK {
		return Image{}, fmt.Errorf("%w: CMYK JPEG", ErrUnsupported)
	}
	w, ht := hdr.Width, hdr.Height
	if i := chooseScale(w, ht, opt.MinWidth, opt.MinHeight, scalingFactors()); i >= 0 {
		f := scalingFactors()[i]
		w, ht = scaledSize(w, f[0], f[1]), scaledSize(ht, f[0], f[1])
	}
	img := Image{Width: w, Height: ht, Pix: make([]byte, w*ht*3)}
	rc := C.tj_decode(h, (*C.uchar)(unsafe.Pointer(&data[0])), C.ulong(len(data)),
		(*C.uchar)(unsafe.Pointer(&img.Pix[0])), C.int(w), C.int(ht))
	if rc != 0 {
		return Image{}, tjErr(h, ErrCorrupt, "decode")
	}
	return img, nil
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
