package av

/*
#include "av.h"
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// ScaleRGB scales the sw x sh packed RGB24 picture in src, whose rows are
// stride bytes apart (a crop of a larger picture is its first pixel's
// slice, with the larger picture's stride), to dw x dh RGB24 in dst, rows
// dstStride bytes apart (0: dw*3; more leaves padding unwritten), with
// swscale's bilinear filter, as DecodeTargets scales frames, mirrored
// left to right when flip is set. An image's transform crops and scales
// with it, in C, rather than pixel by pixel in Go.
func ScaleRGB(dst []byte, dw, dh, dstStride int, src []byte, stride, sw, sh int, flip bool) error {
	if dstStride == 0 {
		dstStride = dw * 3
	}
	if sw <= 0 || sh <= 0 || dw <= 0 || dh <= 0 || stride < sw*3 || dstStride < dw*3 || dstStride > 1<<20 || len(dst) < (dh-1)*dstStride+dw*3 ||
		len(src) < (sh-1)*stride+sw*3 || dw > 1<<16 || dh > 1<<16 || sw > 1<<16 || sh > 1<<16 {
		return fmt.Errorf("%w: scale %dx%d (stride %d, %d bytes) to %dx%d (%d bytes)", ErrConfig, sw, sh, stride, len(src), dw, dh, len(dst))
	}
	var msg [128]C.char
	f := C.int32_t(0)
	if flip {
		f = 1
	}
	rc := C.dh_scale_rgb((*C.uint8_t)(unsafe.Pointer(&src[0])), C.int32_t(stride), C.int32_t(sw), C.int32_t(sh),
		(*C.uint8_t)(unsafe.Pointer(&dst[0])), C.int32_t(dw), C.int32_t(dh), C.int32_t(dstStride), f, &msg[0], C.int32_t(len(msg)))
	if rc != C.DH_OK {
		return &Error{Kind: ErrLimit, Detail: C.GoString(&msg[0])}
	}
	return nil
}

// FlipRGB mirrors the w x h packed RGB24 picture in p left to right, in
// place (p holds at least w*h*3 bytes).
func FlipRGB(p []byte, w, h int) {
	if w <= 0 || h <= 0 || len(p) < w*h*3 {
		return
	}
	C.dh_flip_rgb((*C.uint8_t)(unsafe.Pointer(&p[0])), C.int32_t(w), C.int32_t(h), C.int64_t(w*3))
}
