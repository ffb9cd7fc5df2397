package av

/*
#include "av.h"
*/
import "C"

import (
	"context"
	"fmt"
	"unsafe"
)

// SeekMode tells DecodeTargets what to do before decoding towards a target.
type SeekMode int32

// Seek modes.
const (
	// NoSeek keeps decoding forward from the current position (the start of
	// the stream for the first target).
	NoSeek SeekMode = C.DH_SEEK_NONE
	// SeekTo seeks backward to Target.SeekPTS, the timestamp of a keyframe,
	// and flushes the decoder first.
	SeekTo SeekMode = C.DH_SEEK_TO
	// SeekAuto seeks only when the demuxer's index has a keyframe after the
	// current position and at or before the target: for streams whose
	// keyframes the caller does not know.
	SeekAuto SeekMode = C.DH_SEEK_AUTO
)

// Target is one frame DecodeTargets produces.
type Target struct {
	PTS     int64    // wanted presentation timestamp, in Config-independent TimeBase units
	Slot    int      // output slot: the frame is written at dst[Slot*W*H*3:]
	Seek    SeekMode // what to do before decoding towards this target
	SeekPTS int64    // keyframe timestamp for SeekTo
	// Got is set on return to the timestamp (stream time base) of the frame
	// written: PTS itself when the stream has a frame there, else that of
	// the frame shown at PTS (the last one before it).
	Got int64
}

// DecodeTargets decodes the frames at the targets' timestamps from the
// video in data and writes each as Width x Height RGB24 (bilinear
// sws_scale, the frame's colour matrix and range honoured) into its slot
// of dst (laid out by Stride and Plane). Targets must be sorted by PTS; tb is the time base of their PTS
// and SeekPTS (the zero Rational means the stream's own).
//
// Decoding follows decord and torchcodec: seek only where the targets say
// so, decode and discard the frames in between, colour-convert only the
// frames kept. When no frame has a target's exact timestamp, the frame
// shown at that time is used (the last one before it, or the first frame
// for a target before every frame) and Stats.Missed counts it; after the
// end of the stream the last frame repeats.
func DecodeTargets(ctx context.Context, data []byte, cfg Config, tb Rational, targets []Target, dst []byte) (Stats, error) {
	if len(targets) == 0 {
		return Stats{}, nil
	}
	if cfg.Width <= 0 || cfg.Height <= 0 {
		return Stats{}, fmt.Errorf("%w: output size %dx%d", ErrConfig, cfg.Width, cfg.Height)
	}
	if tb.Num < 0 || tb.Den < 0 || (tb.Den == 0) != (tb.Num == 0) {
		return Stats{}, fmt.Errorf("%w: time base %d/%d", ErrConfig, tb.Num, tb.Den)
	}
	plane := cfg.plane()
	for i, t := range targets {
		if t.Slot < 0 || (t.Slot+1)*plane > len(dst) {
			return Stats{}, fmt.Errorf("%w: target %d slot %d outside a %d-byte output", ErrConfig, i, t.Slot, len(dst))
		}
		if i > 0 && t.PTS < targets[i-1].PTS {
			return Stats{}, fmt.Errorf("%w: targets not sorted by PTS at %d", ErrConfig, i)
		}
	}
	if len(data) == 0 {
		return Stats{}, &Error{Kind: ErrCorrupt, Detail: "empty input"}
	}
	c, err := newCall(ctx, cfg)
	if err != nil {
		return Stats{}, err
	}
	defer c.close()
	c.cfg.tb_num = C.int32_t(tb.Num)
	c.cfg.tb_den = C.int32_t(tb.Den)
	ct := make([]C.dh_target, len(targets))
	for i, t := range targets {
		ct[i] = C.dh_target{pts: C.int64_t(t.PTS), seek_pts: C.int64_t(t.SeekPTS), seek: C.int32_t(t.Seek), slot: C.int32_t(t.Slot)}
	}
	p, n := dataPtr(data)
	rc := C.dh_decode_targets(p, n, &c.cfg, &ct[0], C.int32_t(len(ct)),
		(*C.uint8_t)(unsafe.Pointer(&dst[0])), C.int64_t(len(dst)), &c.st)
	for i := range targets {
		targets[i].Got = int64(ct[i].got_pts)
	}
	return c.stats(), c.err(ctx, rc)
}
