package decode

import "github.com/datahelix/datahelix/internal/decoding"

// Kinds of decoding failure. A failed Decode returns a
// *SampleError that unwraps to one of these, so callers can count and
// skip bad samples by kind while a cancelled context stays
// distinguishable (it unwraps to context.Canceled instead).
var (
	// ErrCorrupt reports a member whose bytes cannot be decoded: truncated,
	// damaged or forged.
	ErrCorrupt = decoding.ErrCorrupt
	// ErrLimit reports a sample that exceeds a safety limit (pixels, frames
	// decoded, images per document, text bytes).
	ErrLimit = decoding.ErrLimit
	// ErrUnsupported reports a container, codec or image format outside the
	// allowed lists.
	ErrUnsupported = decoding.ErrUnsupported
	// ErrTimeout reports a sample whose decoding ran past its deadline.
	ErrTimeout = decoding.ErrTimeout
	// ErrNoPayload reports a sample none of whose members is a recognised
	// video, image or text payload.
	ErrNoPayload = decoding.ErrNoPayload
)

// SampleError is the failure of one sample: which one (Shard, Key), which
// member (Member, empty when the sample as a whole failed), what Kind
// (one of the Err* sentinels, or a context error) and the cause (Err).
// It unwraps to the kind and the cause, for errors.Is and errors.As.
//
// Its message names each once: "decode: shard S: sample "K": member M:
// cause", or "decode: file F: cause" for a plain media file decoded as a
// one-member sample.
type SampleError = decoding.SampleError
