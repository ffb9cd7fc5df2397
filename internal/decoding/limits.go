package decoding

import (
	"time"

	"github.com/datahelix/datahelix/internal/av"
)

// defaultMaxTextBytes is the default Limits.MaxTextBytes: 16 MiB of text
// per sample, a few million tokens, far above a caption or a long
// document (a 500-page book is about 1 MiB of plain text) and far below
// what would stall a worker.
const defaultMaxTextBytes = 16 << 20

// Limits bound the work and memory one sample may cost, so that a hostile
// or corrupt sample fails alone with a typed error instead of crashing,
// hanging or exhausting the process. Zero fields take the DefaultLimits
// value.
type Limits struct {
	// MaxPixels caps a video frame's width*height, checked from the
	// container header before decoding and enforced by FFmpeg on every frame
	// (its max_pixels option).
	MaxPixels int64
	// MaxImagePixels caps an image's width*height, checked from its header
	// before decoding.
	MaxImagePixels int64
	// MaxFramesDecoded caps the frames the decoder may produce for one
	// sample (or one task of a split sample).
	MaxFramesDecoded int
	// SampleDeadline bounds the wall time of decoding one sample (or one
	// task), enforced inside FFmpeg through its interrupt callback.
	SampleDeadline time.Duration
	// MaxProbeSize bounds the bytes FFmpeg may read to identify a container
	// and its streams.
	MaxProbeSize int64
	// MaxAnalyzeDuration bounds the stream time FFmpeg may analyse when a
	// header lacks the picture size.
	MaxAnalyzeDuration time.Duration
	// MaxImages caps the images of one document.
	MaxImages int
	// MaxTextBytes caps the bytes of a sample's text members (txt, text,
	// caption, json, cls) together, checked from their sizes before the
	// text is parsed, counted or copied (the shard reader has read the
	// bytes by then): a larger sample fails with ErrLimit naming the
	// member that crosses it.
	MaxTextBytes int64
	// MaxAudioDuration caps the audio output of one sample (Options.
	// AudioRate): the span of a clip's sampled frames, or an audio
	// sample's duration, over it fails the sample with ErrLimit.
	MaxAudioDuration time.Duration
	// Formats and Codecs are the allowed containers (FFmpeg demuxer names)
	// and video codecs (FFmpeg codec names), comma-separated.
	Formats string
	Codecs  string
}

// DefaultLimits returns limits safe for training data: video up to 4096 x
// 2304 (4K UHD and DCI 4K at 16:9), images up to 8192 x 8192, 65536 frames
// and 60 s per sample, 1 MiB of probing, 64 images per document, 16 MiB
// of text per sample, 2 minutes of audio output per sample, the containers mov, mp4,
// matroska and webm and the codecs h264, hevc, vp9, vp8 and av1.
func DefaultLimits() Limits {
	return Limits{
		MaxPixels:          4096 * 2304,
		MaxImagePixels:     8192 * 8192,
		MaxFramesDecoded:   1 << 16,
		SampleDeadline:     60 * time.Second,
		MaxProbeSize:       1 << 20,
		MaxAnalyzeDuration: 5 * time.Second,
		MaxImages:          64,
		MaxTextBytes:       defaultMaxTextBytes,
		MaxAudioDuration:   defaultMaxAudioDuration,
		Formats:            av.DefaultFormats,
		Codecs:             av.DefaultCodecs,
	}
}

// withDefaults fills the zero fields of l from DefaultLimits.
func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.MaxPixels <= 0 {
		l.MaxPixels = d.MaxPixels
	}
	if l.MaxImagePixels <= 0 {
		l.MaxImagePixels = d.MaxImagePixels
	}
	if l.MaxFramesDecoded <= 0 {
		l.MaxFramesDecoded = d.MaxFramesDecoded
	}
	if l.SampleDeadline <= 0 {
		l.SampleDeadline = d.SampleDeadline
	}
	if l.MaxProbeSize <= 0 {
		l.MaxProbeSize = d.MaxProbeSize
	}
	if l.MaxAnalyzeDuration <= 0 {
		l.MaxAnalyzeDuration = d.MaxAnalyzeDuration
	}
	if l.MaxImages <= 0 {
		l.MaxImages = d.MaxImages
	}
	if l.MaxTextBytes <= 0 {
		l.MaxTextBytes = d.MaxTextBytes
	}
	if l.MaxAudioDuration <= 0 {
		l.MaxAudioDuration = d.MaxAudioDuration
	}
	if l.Formats == "" {
		l.Formats = d.Formats
	}
	if l.Codecs == "" {
		l.Codecs = d.Codecs
	}
	return l
}

// avConfig is the FFmpeg configuration for these limits and an output of
// size x size pixels.
func (l Limits) avConfig(size, threads int) av.Config {
	c := av.DefaultConfig()
	c.Width, c.Height = size, size
	c.MaxPixels = l.MaxPixels
	c.MaxFrames = l.MaxFramesDecoded
	c.MaxPackets = 4 * l.MaxFramesDecoded
	c.ProbeSize = l.MaxProbeSize
	c.AnalyzeDuration = l.MaxAnalyzeDuration
	c.Timeout = l.SampleDeadline
	c.Threads = max(threads, 1)
	c.Formats = l.Formats
	c.Codecs = l.Codecs
	return c
}
