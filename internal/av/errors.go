package av

import "errors"

// Sentinel errors; every failure of a decode call wraps one of them (or
// the context's error when the call was cancelled).
var (
	// ErrCorrupt reports bytes that are not a decodable stream: truncated,
	// damaged or forged.
	ErrCorrupt = errors.New("av: corrupt or truncated stream")
	// ErrLimit reports a stream that exceeds a safety limit of Config.
	ErrLimit = errors.New("av: safety limit exceeded")
	// ErrUnsupported reports a container or codec outside the allow lists,
	// or a feature the decoder does not implement.
	ErrUnsupported = errors.New("av: unsupported container or codec")
	// ErrTimeout reports a call that ran past its deadline.
	ErrTimeout = errors.New("av: decode deadline exceeded")
	// ErrConfig reports an invalid Config or argument.
	ErrConfig = errors.New("av: invalid configuration")
)

// Error is a failed decode call: the kind (one of the sentinels) and what
// FFmpeg reported.
type Error struct {
	Kind   error
	Detail string
}

// Error returns the kind and the detail on one line.
func (e *Error) Error() string {
	if e.Detail == "" {
		return e.Kind.Error()
	}
	return e.Kind.Error() + ": " + e.Detail
}

// Unwrap returns the kind, so errors.Is(err, av.ErrCorrupt) works.
func (e *Error) Unwrap() error { return e.Kind }
