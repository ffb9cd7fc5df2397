package decode

import (
	"context"

	"github.com/datahelix/datahelix/internal/decoding"
	"github.com/datahelix/datahelix/internal/transform"
)

// The preprocessing defaults, as VLM loaders use them: F = 8 frames per
// clip, S = 224.
const (
	DefaultFrames = decoding.DefaultFrames
	DefaultSize   = decoding.DefaultSize
)

// Options configure a Decoder; zero fields take their defaults. Frames is
// F, the frames sampled uniformly over a clip (default 8); Size is S,
// every frame and image becomes S x S RGB (default 224); Limits bound
// each sample (zero fields: DefaultLimits); Threads is the FFmpeg decoder
// threads per sample (default 1: the throughput comes from decoding many
// samples at once); CheckHashes checks HEVC pictures against the MD5
// hashes an encoder may write in the stream (x265 --hash 1) and counts a
// mismatch in Output.Damaged, at the cost of an MD5 of every such
// picture. Transform (set with SetTransform) is how frames and images
// become S x S and which frames of a clip are sampled; the default
// stretches the whole picture and spreads F frames over the clip.
// AudioRate (Hz; 0, the default: no audio) and AudioChannels (default 1)
// turn on Output.Audio, the sound of a clip's sampled span or of an audio
// sample, which are then accepted.
type Options = decoding.Options

// TransformFlags spell a transform as the commands' flags do (docs/cli.md):
// Resize is --resize (squash, short-side, random-crop or native),
// CropScale --crop-scale "MIN,MAX", CropRatio --crop-ratio "MIN,MAX",
// HFlip --hflip "P", Frames --frame-sampling (uniform, segment or fps),
// Stride --frame-stride, FPS --fps and PadTo --pad-to; empty fields take
// the defaults.
type TransformFlags = transform.Flags

// SetTransform parses f, checks it against opts.Size (or its default)
// and sets opts.Transform. Random choices are seeded by seed, the
// sample's epoch and its key alone, so that any rank decodes a sample
// alike (a Loader uses its Config.Seed instead). An out-of-range value is an
// error naming its flag, and opts is left as it was.
func SetTransform(opts *Options, f TransformFlags, seed uint64) error {
	spec, err := transform.Parse(f)
	if err != nil {
		return err
	}
	size := opts.Size
	if size <= 0 {
		size = DefaultSize
	}
	if err := spec.CheckSize(size); err != nil {
		return err
	}
	spec.Seed = seed
	opts.Transform = spec
	return nil
}

// Tensor is a contiguous uint8 buffer with its shape: [F,S,S,3] for a clip
// and [S,S,3] for an image, RGB, row-major.
type Tensor = decoding.Tensor

// Output is a decoded sample, ready for training: its Key and Modality,
// its Tensors (the clip's one [F,S,S,3] tensor, or one [S,S,3] tensor
// per image in document order), its Text (its caption, or a document's
// text members in document order, joined by newlines) with its
// estimated Tokens, and what decoding a clip cost and found:
// DecodedFrames, MissedFrames (sampled frames whose exact timestamp
// FFmpeg did not produce) and Damaged (packets in which FFmpeg found
// damage; see the field's comment); and its Audio when Options.AudioRate
// is set: float32 PCM at Audio.Rate Hz, [Audio.Channels, Audio.Len()]
// channel-major in Audio.PCM, covering a clip's sampled frames from the
// first one's time to the end of the last one's display, or an audio
// sample's whole stream; silence with Audio.Missing set for a clip
// without sound (docs/formats.md, Audio).
type Output = decoding.Output

// Decoder turns samples into tensors. Its methods are safe for concurrent
// use: each call decodes on the calling goroutine with its own FFmpeg
// contexts, so throughput comes from calling it from many goroutines.
type Decoder struct {
	d *decoding.Decoder
}

// NewDecoder returns a decoder with opts, defaults filled in.
func NewDecoder(opts Options) *Decoder {
	return &Decoder{d: decoding.NewDecoder(opts)}
}

// Options returns the decoder's options with defaults filled in.
func (d *Decoder) Options() Options { return d.d.Options() }

// Decode decodes a whole sample: a clip becomes F frames sampled uniformly
// over its presentation timeline, each S x S RGB (a clip of fewer than F
// frames repeats frames evenly to fill the tensor); an image becomes one
// S x S RGB tensor; a document becomes its text and one tensor per image;
// text passes through with its token count. It first reads what the
// sample holds from its members' bytes, without decoding (the clip's
// container, the images' headers, the text), and refuses a sample it
// would not decode whole.
//
// A sample that cannot be decoded returns a *SampleError naming the
// shard, sample and member, unwrapping to ErrCorrupt, ErrLimit,
// ErrUnsupported, ErrTimeout or ErrNoPayload (or the context's error when
// ctx ends).
func (d *Decoder) Decode(ctx context.Context, s *Sample) (*Output, error) {
	return d.d.Decode(ctx, s, nil)
}
