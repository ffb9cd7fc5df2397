package decoding

import (
	"context"
	"errors"
	"fmt"
	"image/png"
	"strings"

	"github.com/datahelix/datahelix/internal/av"
	"github.com/datahelix/datahelix/internal/tjpeg"
)

// Kinds of decoding failure. A failed Decode returns a *SampleError that
// unwraps to one of these, so callers can count and skip bad samples by
// kind while a cancelled context stays distinguishable (it unwraps to
// context.Canceled instead).
var (
	// ErrCorrupt reports a member whose bytes cannot be decoded: truncated,
	// damaged or forged.
	ErrCorrupt = errors.New("decode: corrupt data")
	// ErrLimit reports a sample that exceeds a safety limit (pixels, frames
	// decoded, images per document).
	ErrLimit = errors.New("decode: over a safety limit")
	// ErrUnsupported reports a container, codec or image format outside the
	// allowed lists.
	ErrUnsupported = errors.New("decode: unsupported format")
	// ErrTimeout reports a sample whose decoding ran past its deadline.
	ErrTimeout = errors.New("decode: sample deadline exceeded")
)

// SampleError is the failure of one sample: which one, which member, what
// kind (one of the Err* sentinels, or a context error) and the cause.
//
// Its message names each once: "decode: shard S: sample "K": member M:
// cause", or "decode: file F: cause" for a plain media file decoded as a
// one-member sample (see FileSample).
type SampleError struct {
	Shard  string
	Key    string
	Member string // member name, empty when the sample as a whole failed
	Kind   error
	Err    error // the underlying cause, for the message

	file bool // the sample is a plain file, not a tar shard's sample
}

// newSampleError is the failure of sample s, of its member named member
// (empty for the whole sample), caused by err and classified by it.
func newSampleError(s *Sample, member string, err error) *SampleError {
	return &SampleError{Shard: s.Shard, Key: s.Key, Member: member, Kind: classify(err), Err: err, file: isFileSample(s)}
}

// Error names the shard (or file), the sample and the member, once each.
func (e *SampleError) Error() string {
	var where string
	if e.file {
		where = "decode: file " + e.Shard
	} else {
		where = fmt.Sprintf("decode: shard %s: sample %q", e.Shard, e.Key)
		if e.Member != "" {
			where += ": member " + e.Member
		}
	}
	cause := e.Kind
	if e.Err != nil {
		cause = e.Err
	}
	// The causes of this package start with its name, which where says.
	return where + ": " + strings.TrimPrefix(cause.Error(), "decode: ")
}

// Unwrap returns the kind and the cause, for errors.Is and errors.As.
func (e *SampleError) Unwrap() []error {
	if e.Err == nil {
		return []error{e.Kind}
	}
	return []error{e.Kind, e.Err}
}

// classify maps an error of the av, tjpeg or image packages to its kind.
func classify(err error) error {
	var pngUnsupported png.UnsupportedError
	switch {
	case errors.Is(err, context.Canceled):
		return context.Canceled
	case errors.Is(err, av.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrTimeout):
		return ErrTimeout
	case errors.Is(err, av.ErrLimit) || errors.Is(err, tjpeg.ErrLimit) || errors.Is(err, ErrLimit):
		return ErrLimit
	case errors.Is(err, av.ErrUnsupported) || errors.Is(err, tjpeg.ErrUnsupported) ||
		errors.As(err, &pngUnsupported) || errors.Is(err, ErrUnsupported):
		return ErrUnsupported
	case errors.Is(err, ErrNoPayload):
		return ErrNoPayload
	}
	// av.ErrCorrupt, tjpeg.ErrCorrupt, png.FormatError, and the plain
	// errors of image/png and x/image/webp for damaged bytes.
	return ErrCorrupt
}
