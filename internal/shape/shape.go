// Package shape bounds the output shape of decoding, F frames per clip of
// S x S pixels, which every command flag and workload file that sets F and
// S is checked against (Check) before a decoder is built.
package shape

import (
	"errors"
	"fmt"
)

// The bounds of F and S.
const (
	// MaxFrames is the largest F, the frames sampled per clip.
	MaxFrames = 1024
	// MinSize and MaxSize bound S, the side of every output frame and
	// image.
	MinSize = 8
	MaxSize = 4096
	// MaxClipBytes caps F x S x S x 3, the bytes of one decoded clip's
	// tensor, which a worker allocates at once: 1 GiB (MaxFrames and
	// MaxSize together would make 48 GiB). It bounds decoded output, not
	// what is read: a shard's MaxSampleBytes bounds a sample's compressed
	// bytes on disk.
	MaxClipBytes = 1 << 30
)

// ErrBounds reports an output shape (F, S) outside the bounds above.
var ErrBounds = errors.New("shape: output shape out of bounds")

// Check returns an error matching ErrBounds when F = frames or S = size
// is out of its bounds (1..MaxFrames, MinSize..MaxSize) or the decoded
// clip they make, F x S x S x 3 bytes, exceeds MaxClipBytes; the first
// bound broken in that order is reported. The message names F and S as
// the caller does (a command's "--frames" and "--size", a file's field
// names), so that it points at what the user wrote: "--size 5000: want
// 8..4096".
func Check(frames, size int, framesName, sizeName string) error {
	switch {
	case frames < 1 || frames > MaxFrames:
		return boundsError(fmt.Sprintf("%s %d: want 1..%d", framesName, frames, MaxFrames))
	case size < MinSize || size > MaxSize:
		return boundsError(fmt.Sprintf("%s %d: want %d..%d", sizeName, size, MinSize, MaxSize))
	case clipBytes(frames, size) > MaxClipBytes:
		return boundsError(fmt.Sprintf("%s %d %s %d: one decoded clip would be %d bytes (F x S x S x 3), want at most %d (%d GiB)",
			framesName, frames, sizeName, size, clipBytes(frames, size), MaxClipBytes, MaxClipBytes>>30))
	}
	return nil
}

// clipBytes is F x S x S x 3, without overflow for shapes within the
// frame and size bounds.
func clipBytes(frames, size int) int64 {
	return int64(frames) * int64(size) * int64(size) * 3
}

// boundsError is Check's message; it matches ErrBounds.
type boundsError string

func (e boundsError) Error() string { return string(e) }

func (e boundsError) Unwrap() error { return ErrBounds }
