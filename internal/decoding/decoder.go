package decoding

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/datahelix/datahelix/internal/av"
	"github.com/datahelix/datahelix/internal/transform"
)

// The preprocessing defaults, as VLM loaders use them: F = 8 frames per
// clip, S = 224.
const (
	DefaultFrames = 8
	DefaultSize   = 224
)

// Options configure a Decoder. Zero fields take their defaults.
type Options struct {
	// Frames is F, the frames sampled uniformly over a clip (default 8).
	Frames int
	// Size is S: every frame and image becomes S x S RGB (default 224).
	Size int
	// Limits bound each sample (zero fields: DefaultLimits).
	Limits Limits
	// Threads is the FFmpeg decoder threads per sample (default 1: the
	// throughput comes from decoding many samples at once).
	Threads int
	// CheckHashes checks HEVC pictures against the MD5 hashes an encoder
	// may write in the stream (x265 --hash 1) and counts a mismatch in
	// Output.Damaged: an integrity check, at the cost of an MD5 of every
	// such picture (av.Config.CheckHashes).
	CheckHashes bool
	// Transform is how frames and images become S x S and which frames of
	// a clip are sampled, seeded per sample by its Seed, the sample's
	// Epoch and its key (the zero value: squash, uniform frames).
	Transform transform.Spec
	// AudioRate turns on the audio output (Output.Audio) at this sample
	// rate in Hz, 1..MaxAudioRate; 0, the default, decodes no audio and
	// refuses audio samples as it always has.
	AudioRate int
	// AudioChannels is the audio output's channel count, 1..
	// MaxAudioChannels (0: DefaultAudioChannels, mono).
	AudioChannels int
}

// Tensor is a contiguous uint8 buffer with its shape: [F,S,S,3] for a clip
// and [S,S,3] for an image, RGB, row-major.
type Tensor struct {
	Shape []int
	Data  []byte
}

// Output is a decoded sample, ready for training.
type Output struct {
	Key      string
	Modality Modality
	// Tensors holds the clip (one [F,S,S,3] tensor) or the images (one
	// [S,S,3] tensor each, in document order).
	Tensors []Tensor
	// Text is the sample's text: its caption, or a document's text members
	// in document order, joined by newlines.
	Text string
	// Tokens is the estimated token count of Text.
	Tokens int
	// DecodedFrames counts the video frames FFmpeg decoded, kept or not.
	DecodedFrames int
	// MissedFrames counts sampled frames whose exact timestamp FFmpeg did not
	// produce (the frame shown at that time was used): zero when the
	// record's per-frame timing and the stream agree.
	MissedFrames int
	// Damaged counts the clip's packets in which FFmpeg found damage
	// (av.Stats.DamagedPackets: rejected, decoded into a frame flagged as
	// concealed, or for HEVC reported in the log): the clip decoded, but
	// its compressed bytes are damaged (a few dozen rejected packets fail
	// it as corrupt). Damage FFmpeg does not detect is not counted. It
	// also counts the sampled frames FFmpeg decoded without output at the
	// start of a clip that does not begin with a keyframe (their slots
	// hold the first frame it outputs).
	Damaged int
	// Audio is the sound of a clip or an audio sample when
	// Options.AudioRate is set (see Audio for the span and the layout);
	// nil otherwise, and for images, documents and text.
	Audio *Audio
}

// Decoder turns samples into tensors. Its methods are safe for concurrent
// use: each call decodes on the calling goroutine with its own FFmpeg
// contexts, so throughput comes from calling it from many goroutines.
type Decoder struct {
	opts Options
	cfg  av.Config
}

// NewDecoder returns a decoder with opts, defaults filled in.
func NewDecoder(opts Options) *Decoder {
	if opts.Frames <= 0 {
		opts.Frames = DefaultFrames
	}
	if opts.Size <= 0 {
		opts.Size = DefaultSize
	}
	if opts.Threads <= 0 {
		opts.Threads = 1
	}
	if opts.AudioRate > 0 && opts.AudioChannels <= 0 {
		opts.AudioChannels = DefaultAudioChannels
	}
	opts.Limits = opts.Limits.withDefaults()
	opts.Transform = opts.Transform.WithDefaults()
	cfg := opts.Limits.avConfig(opts.Size, opts.Threads)
	cfg.CheckHashes = opts.CheckHashes
	return &Decoder{opts: opts, cfg: cfg}
}

// Options returns the decoder's options with defaults filled in.
func (d *Decoder) Options() Options { return d.opts }

// newVideoTensor allocates the [F,S,S,3] tensor of one clip.
func (d *Decoder) newVideoTensor() Tensor {
	f, s := d.opts.Frames, d.opts.Size
	return Tensor{Shape: []int{f, s, s, 3}, Data: make([]byte, f*s*s*3)}
}

// Decode decodes a whole sample: a clip becomes F frames sampled uniformly
// over its presentation timeline, each S x S RGB (SampleFrames, then one
// task from video.PlanTasks, then DecodeVideoTask; a clip of fewer than F
// frames repeats frames evenly to fill the tensor); an image becomes one
// S x S RGB tensor; a document becomes its text and one tensor per image;
// text passes through with its token count. rec is the sample's record
// from ParseRecord; when nil, Decode parses it.
//
// A sample that cannot be decoded returns a *SampleError naming the
// shard, sample and member, unwrapping to ErrCorrupt, ErrLimit,
// ErrUnsupported, ErrTimeout or ErrNoPayload (or the context's error when
// ctx ends).
func (d *Decoder) Decode(ctx context.Context, s *Sample, rec *Record) (*Output, error) {
	p, err := resolvePayload(s, rec, d.opts.Limits, d.opts.AudioRate > 0)
	if err != nil {
		return nil, err
	}
	ctx, cancel := d.deadline(ctx)
	defer cancel()
	out := &Output{Key: s.Key, Modality: p.rec.Modality}
	out.Text, out.Tokens = sampleText(s)
	fail := func(member string, err error) (*Output, error) {
		return nil, newSampleError(s, member, err)
	}
	if p.video != nil {
		// A short clip can decode before FFmpeg's interrupt callback
		// looks at a context cancelled before the call.
		if err := ctx.Err(); err != nil {
			return fail(p.video.Name, err)
		}
		targets := d.ClipTargets(s, p.rec.Video)
		t := NewTensor(d.ClipShape(p.rec.Video, len(targets)))
		st, err := d.decodeVideo(ctx, s, targets, p.video.Data, p.rec.Video, t.Data)
		if err != nil {
			return fail(p.video.Name, err)
		}
		out.Tensors = []Tensor{t}
		out.DecodedFrames, out.MissedFrames, out.Damaged = st.frames, st.missed, st.damaged
	}
	for i, m := range p.images {
		if err := ctx.Err(); err != nil {
			return fail(m.Name, err)
		}
		t, err := d.decodeImageView(s, i, m.Data)
		if err != nil {
			return fail(m.Name, err)
		}
		out.Tensors = append(out.Tensors, t)
	}
	if out.Audio, err = d.decodeAudio(ctx, s, p.rec); err != nil {
		return nil, err
	}
	return out, nil
}

// payload is what Decode turns into tensors, found from a sample's
// record: the clip of a video sample, the images of an image sample or a
// document in record order, nothing for text.
type payload struct {
	rec    *Record
	video  *Member // the clip; nil unless rec's modality is video
	images []Member
}

// resolvePayload finds in s the members its record says Decode decodes,
// parsing the record when rec is nil, and checks what can be checked
// before decoding: a sample without a recognised member, a video record
// without its clip, or a record of no known modality is ErrNoPayload;
// more images than lim.MaxImages or text members larger than
// lim.MaxTextBytes is ErrLimit; an image index outside the
// sample is ErrCorrupt. Decode and SampleMD5s both take their members
// from here, so they decode and hash the same members and refuse the same
// samples. With audio (audio output on) the record reads the sample's
// audio and an audio sample has no other payload; without, an audio
// sample's record (made with audio on) is ErrUnsupported. lim must have
// its defaults filled in. Errors are *SampleError values naming s.
func resolvePayload(s *Sample, rec *Record, lim Limits, audio bool) (payload, error) {
	if rec == nil {
		var err error
		if rec, err = parseRecord(s, lim, audio); err != nil {
			return payload{}, err // a *SampleError
		}
	} else if err := checkTextSize(s, lim.MaxTextBytes); err != nil {
		return payload{}, err // the record may come from other limits
	}
	fail := func(err error) (payload, error) {
		return payload{}, newSampleError(s, "", err)
	}
	p := payload{rec: rec}
	switch rec.Modality {
	case ModalityVideo:
		v := rec.Video
		if v == nil || v.Member < 0 || v.Member >= len(s.Members) {
			return fail(fmt.Errorf("%w: record has no video member", ErrNoPayload))
		}
		p.video = &s.Members[v.Member]
	case ModalityImage, ModalityDocument:
		if err := imageCount(len(rec.Images), lim); err != nil {
			return fail(err) // a record built under other limits
		}
		p.images = make([]Member, len(rec.Images))
		for i, im := range rec.Images {
			if im.Member < 0 || im.Member >= len(s.Members) {
				return fail(fmt.Errorf("%w: record names image member %d of %d", ErrCorrupt, im.Member, len(s.Members)))
			}
			p.images[i] = s.Members[im.Member]
		}
	case ModalityText:
	case ModalityAudio:
		if !audio {
			return fail(fmt.Errorf("%w: an audio sample, and audio output is off (Options.AudioRate, --audio-rate)", ErrUnsupported))
		}
	default:
		return fail(fmt.Errorf("%w: modality %v", ErrNoPayload, rec.Modality))
	}
	return p, nil
}

// sampleText joins the sample's text, in document position order, with
// newlines, and estimates its tokens (from the parts: a newline only
// separates words, so the sum is the joined text's count), as
// ParseRecord counts them into Record.Text: its captions and text parts
// (not "metadata.txt") and a JSON document's text strings; for a sample
// with neither these nor a picture, its JSON string values and class
// labels.
func sampleText(s *Sample) (text string, tokens int) {
	type part struct {
		pos  int
		data []byte
	}
	var parts, metadata []part
	// captioned is set by a caption or a JSON document, even one of no
	// strings: then, as in ParseRecord, metadata is not the text.
	pictures, captioned := false, false
	for _, m := range s.Members {
		switch kind := memberKind(m.Ext); {
		case kind == kindVideo || kind == kindImage:
			pictures = true
		case kind != kindText:
		case isJSONExt(m.Ext):
			j, ok := scanJSON(m.Data)
			switch {
			case !ok:
				metadata = append(metadata, part{0, m.Data})
			case j.doc:
				captioned = true
				for _, d := range j.docParts {
					parts = append(parts, part{d.pos, []byte(d.text)})
				}
			default:
				for _, v := range j.values {
					metadata = append(metadata, part{0, []byte(v)})
				}
			}
		case isMetadataExt(m.Ext):
			metadata = append(metadata, part{0, m.Data})
		default:
			captioned = true
			pos, _ := docPosition(m.Ext)
			parts = append(parts, part{pos, m.Data})
		}
	}
	if !captioned && !pictures {
		parts = metadata
	}
	if len(parts) == 0 {
		return "", 0
	}
	sort.SliceStable(parts, func(a, b int) bool { return parts[a].pos < parts[b].pos })
	n := len(parts) - 1
	for _, p := range parts {
		n += len(p.data)
	}
	var b strings.Builder
	b.Grow(n)
	for i, p := range parts {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.Write(p.data)
		tokens += estimateTokens(p.data)
	}
	return b.String(), tokens
}

// SampleText returns the text Decode gives a sample (Output.Text: its
// captions and document text in document order, joined by newlines) and
// its estimated tokens (Output.Tokens), for a caller that decodes the
// sample's clip in tasks. Text members larger than lim.MaxTextBytes
// together (zero: the DefaultLimits value) fail with a *SampleError
// matching ErrLimit.
func SampleText(s *Sample, lim Limits) (text string, tokens int, err error) {
	if err := checkTextSize(s, lim.withDefaults().MaxTextBytes); err != nil {
		return "", 0, err
	}
	text, tokens = sampleText(s)
	return text, tokens, nil
}

// deadline returns the context for one task: ctx bounded by the sample
// deadline.
func (d *Decoder) deadline(ctx context.Context) (context.Context, context.CancelFunc) {
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= d.opts.Limits.SampleDeadline {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, d.opts.Limits.SampleDeadline)
}
