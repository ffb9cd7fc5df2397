package av

/*
#cgo pkg-config: libswresample
#include <stdlib.h>
#include <string.h>
#include "audio.h"
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"math"
	"unsafe"
)

// Default allow lists of the audio calls: the containers of the video
// ones plus those of audio files (m4a is mov's, weba and mka Matroska's,
// opus and oga Ogg's), and the codecs of common audio and of the audio
// tracks of video datasets.
const (
	DefaultAudioFormats = "mov,mp4,matroska,webm,mp3,flac,wav,ogg,aac"
	DefaultAudioCodecs  = "aac,mp3,opus,vorbis,flac,alac,pcm_s16le,pcm_s16be,pcm_s24le,pcm_s32le,pcm_f32le,pcm_u8"
)

// ErrNoAudio reports a file that opened but has no audio stream. It is
// not a failure of the file itself: a clip may have no sound.
var ErrNoAudio = errors.New("av: no audio stream")

// MaxAudioRate bounds the sample rates DecodeAudio reads and writes, and
// MaxAudioChannels the channels of its input and output.
const (
	MaxAudioRate     = 768000
	MaxAudioChannels = 64
)

// AudioInfo describes the best audio stream of a file as FFmpeg sees it.
type AudioInfo struct {
	Format     string // demuxer name
	Codec      string // codec name (ProbeAudio) or decoder name (DecodeAudio), e.g. "aac", "mp3float"
	SampleRate int
	Channels   int
	TimeBase   Rational // of Duration and StartTime
	Duration   int64    // the stream's duration, else the file's; 0 when unknown
	StartTime  int64
	HasVideo   bool // the file has a video stream too
}

// Seconds returns Duration in seconds (0 when unknown).
func (a AudioInfo) Seconds() float64 {
	if a.TimeBase.Den == 0 {
		return 0
	}
	return float64(a.Duration) * float64(a.TimeBase.Num) / float64(a.TimeBase.Den)
}

// AudioStats reports what DecodeAudio did.
type AudioStats struct {
	AudioInfo
	Frames       int   // audio frames the decoder output
	Packets      int   // packets sent to the decoder
	DecodeErrors int   // packets the decoder rejected and skipped
	Written      int64 // output samples per channel taken from the stream; the others are silence
	ReadError    bool  // the demuxer stopped on an error rather than at a clean end
}

func audioInfo(st *C.dh_audio_stats) AudioInfo {
	return AudioInfo{
		Format:     C.GoString(&st.format[0]),
		Codec:      C.GoString(&st.codec[0]),
		SampleRate: int(st.sample_rate),
		Channels:   int(st.channels),
		TimeBase:   Rational{int(st.tb_num), int(st.tb_den)},
		Duration:   int64(st.duration),
		StartTime:  int64(st.start_time),
		HasVideo:   st.has_video != 0,
	}
}

// audioErr maps an audio call's result code to an error.
func (c *call) audioErr(ctx context.Context, rc C.int, st *C.dh_audio_stats) error {
	if rc == C.DH_ERR_NO_AUDIO {
		return ErrNoAudio
	}
	// The codes and message field are av.h's: reuse the video mapping.
	C.memcpy(unsafe.Pointer(&c.st.msg[0]), unsafe.Pointer(&st.msg[0]), C.size_t(len(st.msg)))
	return c.err(ctx, rc)
}

// ProbeAudio opens data under cfg's limits and allow lists (use
// DefaultAudioFormats and DefaultAudioCodecs) and describes its best
// audio stream without decoding it, as a record does. A file without one
// returns ErrNoAudio.
func ProbeAudio(ctx context.Context, data []byte, cfg Config) (AudioInfo, error) {
	if len(data) == 0 {
		return AudioInfo{}, &Error{Kind: ErrCorrupt, Detail: "empty input"}
	}
	c, err := newCall(ctx, cfg)
	if err != nil {
		return AudioInfo{}, err
	}
	defer c.close()
	var st C.dh_audio_stats
	p, n := dataPtr(data)
	rc := C.dh_audio_probe(p, n, &c.cfg, &st)
	return audioInfo(&st), c.audioErr(ctx, rc, &st)
}

// DecodeAudio decodes the best audio stream of data and writes count
// samples per channel, output samples first .. first+count-1 at rate Hz,
// into dst as planar float32 ([channels][count], channel-major): output
// sample k is the signal at time k/rate seconds on the file's timeline
// (first may be negative: a stream may start before 0),
// the one of its video frames' timestamps. libswresample converts the
// stream to rate and to the default layout of channels (FFmpeg's
// downmix or upmix matrix). What the stream does not cover (before its
// start, after its end, a span past a truncation) is silence, and
// AudioStats.Written counts the samples it did cover.
//
// A span starting after the first second seeks to a quarter second before
// it and decodes on. Decoding is bounded like DecodeTargets: cfg's allow
// lists, MaxPackets, MaxFrames (audio frames), the deadline and ctx. A
// file without an audio stream returns ErrNoAudio; other failures wrap
// ErrCorrupt, ErrLimit, ErrUnsupported or ErrTimeout.
func DecodeAudio(ctx context.Context, data []byte, cfg Config, first, count int64, rate, channels int, dst []float32) (AudioStats, error) {
	switch {
	case rate <= 0 || rate > MaxAudioRate:
		return AudioStats{}, fmt.Errorf("%w: audio rate %d Hz, want 1..%d", ErrConfig, rate, MaxAudioRate)
	case channels <= 0 || channels > MaxAudioChannels:
		return AudioStats{}, fmt.Errorf("%w: %d audio channels, want 1..%d", ErrConfig, channels, MaxAudioChannels)
	case count < 0 || first < math.MinInt64/4 || first > math.MaxInt64/4 || count > math.MaxInt64/4:
		return AudioStats{}, fmt.Errorf("%w: audio samples %d+%d", ErrConfig, first, count)
	case int64(len(dst)) != count*int64(channels):
		return AudioStats{}, fmt.Errorf("%w: audio output of %d floats for %d x %d samples", ErrConfig, len(dst), channels, count)
	}
	if len(data) == 0 {
		return AudioStats{}, &Error{Kind: ErrCorrupt, Detail: "empty input"}
	}
	// A context cancelled before the call sets the flag C polls from a
	// goroutine of its own: a short file could decode before it lands.
	if err := ctx.Err(); err != nil {
		return AudioStats{}, fmt.Errorf("av: decode audio: %w", context.Cause(ctx))
	}
	c, err := newCall(ctx, cfg)
	if err != nil {
		return AudioStats{}, err
	}
	defer c.close()
	var st C.dh_audio_stats
	p, n := dataPtr(data)
	var out *C.float
	if len(dst) > 0 {
		out = (*C.float)(unsafe.Pointer(&dst[0]))
	} else {
		out = (*C.float)(C.malloc(4)) // C writes nothing for count 0
		defer C.free(unsafe.Pointer(out))
	}
	rc := C.dh_decode_audio(p, n, &c.cfg, C.int64_t(first), C.int64_t(count), C.int32_t(rate), C.int32_t(channels), out, &st)
	stats := AudioStats{
		AudioInfo:    audioInfo(&st),
		Frames:       int(st.frames),
		Packets:      int(st.packets),
		DecodeErrors: int(st.errors),
		Written:      int64(st.written),
		ReadError:    st.read_error != 0,
	}
	return stats, c.audioErr(ctx, rc, &st)
}
