// Package av is a thin cgo binding to the system FFmpeg 5.1 libraries
// (libavformat, libavcodec, libswscale, libavutil) that decodes video held
// in memory, for package decode.
//
// Every function is one cgo call that opens the bytes through a custom
// AVIOContext whose read and seek callbacks live in C, decodes what it was
// asked for and frees everything before returning, so calls from many
// goroutines share no state and a clip never outlives its call. The input
// slice and output buffer are Go memory passed as call arguments: cgo keeps
// them in place for the duration of the call and C never retains them.
//
// Safe by default: only the containers and codecs of Config's allow lists
// are opened, no protocol may be opened from inside a file, the probe and
// analysis are bounded, the picture size is checked from the header and by
// the decoder (max_pixels), frames and packets per call are capped, and the
// call is interrupted at its deadline or when its context is cancelled. A
// hostile or corrupt input returns an error wrapping ErrCorrupt, ErrLimit,
// ErrUnsupported or ErrTimeout.
//
// The package owns two pieces of FFmpeg's process-wide state: its log
// callback (nothing is printed; a call keeps its first error for its
// message, and its decoder's messages count as damage) and the opaque
// field of every decoder context it opens, which the callback follows
// back to the call. A program that also uses FFmpeg directly must leave
// its own decoder contexts' opaque NULL.
package av

/*
#cgo pkg-config: libavformat libavcodec libswscale libavutil
#cgo LDFLAGS: -lm
#include <stdlib.h>
#include "av.h"
*/
import "C"

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"
)

func init() { C.dh_init() }

// Rational is a time base: a timestamp t means t*Num/Den seconds.
type Rational struct{ Num, Den int }

// Config bounds one call. The zero value is not usable; start from
// DefaultConfig.
type Config struct {
	// Width and Height are the RGB output size of DecodeTargets, that of
	// the upright picture (see StreamInfo.Rotation).
	Width, Height int
	// MaxPixels caps width*height, checked from the container header before
	// decoding and enforced by the decoder on every frame.
	MaxPixels int64
	// MaxFrames caps the frames the decoder may output in one call.
	MaxFrames int
	// MaxPackets caps the packets the demuxer may return in one call.
	MaxPackets int
	// ProbeSize bounds the bytes read to identify the container and its streams.
	ProbeSize int64
	// AnalyzeDuration bounds how much of the stream avformat may analyse
	// when the header lacks the picture size.
	AnalyzeDuration time.Duration
	// Timeout bounds the wall time of one call (0 = no bound).
	Timeout time.Duration
	// Threads is the decoder's thread count; 1 decodes a sample on the
	// calling thread only.
	Threads int
	// Formats is the comma-separated list of allowed demuxers.
	Formats string
	// Codecs is the comma-separated list of allowed codecs (FFmpeg codec
	// names, such as h264 or av1).
	Codecs string
	// SkipNonRef lets the decoder skip non-reference frames that precede the
	// next target. Use it only with exact target timestamps: a skipped
	// frame is never a candidate for the frame-shown-at-time fallback.
	SkipNonRef bool
	// FindStreamInfo always runs avformat_find_stream_info, which decodes a
	// few frames; otherwise it runs only when the header lacks the size.
	FindStreamInfo bool
	// CheckHashes has the HEVC decoder check each picture against the MD5
	// of its decoded-picture-hash SEI, when the encoder wrote one (x265
	// --hash 1), and count a mismatch as damage (Stats.DamagedPackets). It
	// costs an MD5 of every such picture: on a 720p x265 ultrafast clip,
	// twice the decode CPU time.
	CheckHashes bool
	// Crop, when its W and H are positive, is the part of the upright
	// picture DecodeTargets scales to Width x Height, instead of the whole
	// (see Crop).
	Crop Crop
	// HFlip mirrors DecodeTargets' output left to right.
	HFlip bool
	// Stride and Plane lay DecodeTargets' output out in a larger buffer:
	// RGB rows Stride bytes apart, slots Plane bytes apart (0: packed,
	// Width*3 and Width*Height*3). What lies beyond each picture's rows
	// in its slot (padding to a bucket size) is not written.
	Stride, Plane int
}

// Crop is a rectangle of the upright picture, X, Y, W x H in the pixels of
// a RefW x RefH picture (the size the caller chose it for; zero: the
// frame's own). A frame of another size gets the rectangle scaled to it,
// rounded outwards. Its corner moves left and up onto the chroma grid (to
// even pixels for 4:2:0) so that the frame's planes are read in place,
// without a copy.
type Crop struct{ X, Y, W, H, RefW, RefH int }

// Default allow lists. VP8 is allowed with the codecs of the issue: its
// decoder is FFmpeg's own, fuzzed as continuously as VP9's, and older WebM
// datasets use it.
const (
	DefaultFormats = "mov,mp4,matroska,webm"
	DefaultCodecs  = "h264,hevc,vp9,vp8,av1"
)

// DefaultConfig returns limits suited to training data: up to 4K UHD
// pictures, 65536 frames and 10 s per call, one thread.
func DefaultConfig() Config {
	return Config{
		Width:           224,
		Height:          224,
		MaxPixels:       3840 * 2160,
		MaxFrames:       1 << 16,
		MaxPackets:      1 << 18,
		ProbeSize:       1 << 20,
		AnalyzeDuration: 5 * time.Second,
		Timeout:         10 * time.Second,
		Threads:         1,
		Formats:         DefaultFormats,
		Codecs:          DefaultCodecs,
	}
}

// StreamInfo describes the decoded video stream as FFmpeg sees it.
type StreamInfo struct {
	Format    string // demuxer name, e.g. "mov,mp4,m4a,3gp,3g2,mj2"
	Codec     string // decoder name, e.g. "h264" or "libdav1d"
	Width     int    // coded picture size from the header
	Height    int
	TimeBase  Rational
	Duration  int64  // in TimeBase units, or math.MinInt64 when unknown
	Frames    int64  // frame count from the container, 0 when unknown
	StartTime int64  // in TimeBase units, or math.MinInt64 when unknown
	PixFmt    string // pixel format of the last decoded frame
	// Rotation is the clockwise turn, 0, 90, 180 or 270 degrees, that shows
	// the picture upright: the stream's display matrix (the MP4/MOV tkhd
	// matrix) read as the ffmpeg 5.1 CLI reads it for its -autorotate, to
	// the nearest multiple of 90 degrees. DecodeTargets and FrameMD5s turn
	// the frames upright as that CLI does, which also undoes a mirrored
	// matrix (negative determinant): with transpose's cclock_flip or
	// clock_flip instead of clock (90) or cclock (270), with hflip or
	// vflip alone at 180, with vflip at 0.
	Rotation int
}

// Stats reports what a call did.
type Stats struct {
	StreamInfo
	FramesDecoded int // frames the decoder output
	Packets       int // packets sent to the decoder
	Seeks         int
	DecodeErrors  int // packets the decoder rejected and skipped
	// DamagedPackets counts the packets in which the decoder found damage:
	// packets it rejected (those of DecodeErrors), packets it decoded into
	// a frame flagged as concealed (decode_error_flags; H.264 sets them),
	// and, for HEVC, packets during whose decoding it logged an error (HEVC
	// conceals damage it detects in slice data without flagging the frame;
	// with CheckHashes and a decoded-picture-hash SEI it also reports a
	// picture whose MD5 differs, which includes the intact pictures that
	// refer to a damaged one). A packet counts once however many signs it
	// gave and however often seeks made it decode: packets are told apart
	// by their byte position in the file, among the last 128 damaged ones.
	// With frame threads (Threads > 1) FFmpeg reports a rejection after
	// later packets were sent, so an HEVC packet it rejects counts twice
	// (its error message, and the rejection under a key of its own), and
	// H.264 may hand out a frame before the thread decoding it flags it,
	// so its damage may go uncounted. The count is a sign of damage and
	// its extent, not an exact number of damaged packets.
	//
	// Damage the decoder does not detect is not counted: in FFmpeg 5.1 most
	// damage inside VP9 tile data, and inside HEVC slice data without
	// picture hashes, decodes to wrong pixels with no sign at all.
	DamagedPackets int
	// Missed counts targets filled with a frame whose timestamp differs from
	// the target's (the frame shown at that time, or the last one at the end
	// of the stream).
	Missed int
	// ReadError is true when the demuxer stopped on an error (such as a
	// truncated file) rather than at a clean end.
	ReadError bool
}

// call holds the C arguments shared by every entry point.
type call struct {
	cfg    C.dh_config
	st     C.dh_stats
	pin    runtime.Pinner
	cancel *int32
	stop   func() bool
	cstrs  []*C.char
}

func newCall(ctx context.Context, cfg Config) (*call, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	c := &call{}
	c.cfg.max_pixels = C.int64_t(cfg.MaxPixels)
	c.cfg.max_frames = C.int64_t(cfg.MaxFrames)
	c.cfg.max_packets = C.int64_t(cfg.MaxPackets)
	c.cfg.probe_size = C.int64_t(cfg.ProbeSize)
	c.cfg.analyze_us = C.int64_t(cfg.AnalyzeDuration.Microseconds())
	c.cfg.timeout_ns = C.int64_t(cfg.Timeout.Nanoseconds())
	if dl, ok := ctx.Deadline(); ok {
		left := time.Until(dl)
		if left <= 0 {
			return nil, &Error{Kind: ErrTimeout, Detail: "deadline passed before decoding"}
		}
		if cfg.Timeout <= 0 || left < cfg.Timeout {
			c.cfg.timeout_ns = C.int64_t(left.Nanoseconds())
		}
	}
	c.cfg.threads = C.int32_t(cfg.Threads)
	c.cfg.out_w = C.int32_t(cfg.Width)
	c.cfg.out_h = C.int32_t(cfg.Height)
	if cfg.SkipNonRef {
		c.cfg.skip_nonref = 1
	}
	if cfg.FindStreamInfo {
		c.cfg.find_info = 1
	}
	if cfg.CheckHashes {
		c.cfg.check_hashes = 1
	}
	if cr := cfg.Crop; cr.W > 0 && cr.H > 0 {
		c.cfg.crop_x, c.cfg.crop_y = C.int32_t(cr.X), C.int32_t(cr.Y)
		c.cfg.crop_w, c.cfg.crop_h = C.int32_t(cr.W), C.int32_t(cr.H)
		c.cfg.ref_w, c.cfg.ref_h = C.int32_t(cr.RefW), C.int32_t(cr.RefH)
	}
	if cfg.HFlip {
		c.cfg.hflip = 1
	}
	c.cfg.out_stride, c.cfg.out_plane = C.int64_t(cfg.Stride), C.int64_t(cfg.Plane)
	c.cfg.formats = c.cstr(cfg.Formats)
	c.cfg.codecs = c.cstr(cfg.Codecs)
	if ctx.Done() != nil {
		// The flag is Go memory that C polls during the call; it is pinned
		// because the C config struct that points at it is Go memory too.
		c.cancel = new(int32)
		c.pin.Pin(c.cancel)
		c.cfg.cancel = (*C.int32_t)(unsafe.Pointer(c.cancel))
		flag := c.cancel
		c.stop = context.AfterFunc(ctx, func() { atomic.StoreInt32(flag, 1) })
	}
	return c, nil
}

func (c *call) cstr(s string) *C.char {
	p := C.CString(s)
	c.cstrs = append(c.cstrs, p)
	return p
}

func (c *call) close() {
	if c.stop != nil {
		c.stop()
	}
	c.pin.Unpin()
	for _, p := range c.cstrs {
		C.free(unsafe.Pointer(p))
	}
}

func (c *call) stats() Stats {
	st := &c.st
	return Stats{
		StreamInfo: StreamInfo{
			Format:    C.GoString(&st.format[0]),
			Codec:     C.GoString(&st.codec[0]),
			Width:     int(st.width),
			Height:    int(st.height),
			TimeBase:  Rational{int(st.tb_num), int(st.tb_den)},
			Duration:  int64(st.duration),
			Frames:    int64(st.nb_frames),
			StartTime: int64(st.start_time),
			PixFmt:    C.GoString(&st.pix_fmt[0]),
			Rotation:  int(st.rotation),
		},
		FramesDecoded:  int(st.frames),
		Packets:        int(st.packets),
		Seeks:          int(st.seeks),
		DecodeErrors:   int(st.errors),
		DamagedPackets: int(st.damaged),
		Missed:         int(st.missed),
		ReadError:      st.read_error != 0,
	}
}

func (c *call) err(ctx context.Context, rc C.int) error {
	msg := C.GoString(&c.st.msg[0])
	switch rc {
	case C.DH_OK:
		return nil
	case C.DH_ERR_CORRUPT:
		return &Error{Kind: ErrCorrupt, Detail: msg}
	case C.DH_ERR_LIMIT:
		return &Error{Kind: ErrLimit, Detail: msg}
	case C.DH_ERR_UNSUPPORTED:
		return &Error{Kind: ErrUnsupported, Detail: msg}
	case C.DH_ERR_TIMEOUT:
		return &Error{Kind: ErrTimeout, Detail: msg}
	case C.DH_ERR_CANCELED:
		return fmt.Errorf("av: %s: %w", msg, context.Cause(ctx))
	}
	return fmt.Errorf("av: %s (code %d)", msg, int(rc))
}

func (cfg Config) validate() error {
	switch {
	case cfg.MaxPixels <= 0 || cfg.MaxFrames <= 0 || cfg.MaxPackets <= 0:
		return fmt.Errorf("%w: MaxPixels, MaxFrames and MaxPackets must be positive", ErrConfig)
	case cfg.ProbeSize < 32:
		return fmt.Errorf("%w: ProbeSize %d is below FFmpeg's minimum of 32", ErrConfig, cfg.ProbeSize)
	case cfg.Threads < 0:
		return fmt.Errorf("%w: Threads %d is negative", ErrConfig, cfg.Threads)
	case cfg.Formats == "" || cfg.Codecs == "":
		return fmt.Errorf("%w: empty allow list", ErrConfig)
	case cfg.Crop.X < 0 || cfg.Crop.Y < 0 || cfg.Crop.W < 0 || cfg.Crop.H < 0 || cfg.Crop.RefW < 0 || cfg.Crop.RefH < 0 ||
		cfg.Crop.X > math.MaxInt32/2 || cfg.Crop.Y > math.MaxInt32/2 || cfg.Crop.W > math.MaxInt32/2 || cfg.Crop.H > math.MaxInt32/2 ||
		cfg.Crop.RefW > math.MaxInt32 || cfg.Crop.RefH > math.MaxInt32:
		return fmt.Errorf("%w: crop %+v", ErrConfig, cfg.Crop)
	case cfg.Stride < 0 || cfg.Plane < 0 || cfg.Stride > math.MaxInt32 ||
		cfg.Stride > 0 && cfg.Stride < cfg.Width*3 ||
		cfg.Plane > 0 && int64(cfg.Plane) < int64(cfg.Height-1)*int64(cfg.stride())+int64(cfg.Width)*3:
		return fmt.Errorf("%w: stride %d and plane %d do not hold %dx%d RGB", ErrConfig, cfg.Stride, cfg.Plane, cfg.Width, cfg.Height)
	}
	return nil
}

// dataPtr returns the C view of data, which must not be empty.
func dataPtr(data []byte) (*C.uint8_t, C.int64_t) {
	return (*C.uint8_t)(unsafe.Pointer(unsafe.SliceData(data))), C.int64_t(len(data))
}

// stride is the bytes between DecodeTargets' output rows.
func (cfg Config) stride() int {
	if cfg.Stride > 0 {
		return cfg.Stride
	}
	return cfg.Width * 3
}

// plane is the bytes between DecodeTargets' output slots.
func (cfg Config) plane() int {
	if cfg.Plane > 0 {
		return cfg.Plane
	}
	return cfg.Width * cfg.Height * 3
}
