package av

/*
#include <libavutil/mem.h>
#include "av.h"
*/
import "C"

import (
	"context"
	"unsafe"
)

// FrameHash is the MD5 of one decoded frame, turned upright.
type FrameHash struct {
	PTS           int64 // presentation timestamp in the stream time base
	Width, Height int   // of the upright frame
	MD5           [16]byte
}

// FrameMD5s decodes every frame of the video in data and returns, in the
// order the decoder outputs them (presentation order), the MD5 of each
// frame's planes in its native pixel format without padding: the md5
// column of `ffmpeg -i FILE -f framemd5 -`.
//
// Like that command (ffmpeg 5.1 autorotates by default), it first turns
// each frame upright by its display matrix (StreamInfo.Rotation):
// transposed for 90 and 270 degrees, flipped both ways for 180, mirrors
// undone as the CLI undoes them. It returns an error wrapping
// ErrUnsupported for a turn ffmpeg makes otherwise: a display matrix
// rotated by an angle that is not a multiple of 90 degrees, or a turn by
// 90 or 270 of a pixel format whose chroma is subsampled differently
// across and down, such as yuv422p, which ffmpeg first converts (to
// yuv444p). `ffmpeg -noautorotate` hashes the frames as decoded.
func FrameMD5s(ctx context.Context, data []byte, cfg Config) ([]FrameHash, Stats, error) {
	if len(data) == 0 {
		return nil, Stats{}, &Error{Kind: ErrCorrupt, Detail: "empty input"}
	}
	c, err := newCall(ctx, cfg)
	if err != nil {
		return nil, Stats{}, err
	}
	defer c.close()
	var hashes *C.dh_frame_hash
	var count C.int64_t
	p, n := dataPtr(data)
	rc := C.dh_decode_all(p, n, &c.cfg, &hashes, &count, &c.st)
	var out []FrameHash
	if hashes != nil {
		hs := unsafe.Slice(hashes, int(count))
		out = make([]FrameHash, len(hs))
		for i, h := range hs {
			out[i] = FrameHash{PTS: int64(h.pts), Width: int(h.width), Height: int(h.height)}
			for j := range out[i].MD5 {
				out[i].MD5[j] = byte(h.md5[j])
			}
		}
		C.av_free(unsafe.Pointer(hashes))
	}
	if err := c.err(ctx, rc); err != nil {
		return nil, c.stats(), err
	}
	return out, c.stats(), nil
}

// DecodeAll decodes every frame of the video in data and discards it, the
// work of `ffmpeg -i FILE -f null -`; Stats.FramesDecoded counts them.
func DecodeAll(ctx context.Context, data []byte, cfg Config) (Stats, error) {
	if len(data) == 0 {
		return Stats{}, &Error{Kind: ErrCorrupt, Detail: "empty input"}
	}
	c, err := newCall(ctx, cfg)
	if err != nil {
		return Stats{}, err
	}
	defer c.close()
	var count C.int64_t
	p, n := dataPtr(data)
	rc := C.dh_decode_all(p, n, &c.cfg, nil, &count, &c.st)
	return c.stats(), c.err(ctx, rc)
}

// Packet is one compressed frame of the video stream, in decode order.
type Packet struct {
	PTS, DTS int64 // in the stream time base
	Size     int
	Key      bool
}

// Packets demuxes the video stream in data without decoding it: what
// FFmpeg sees of frame timing, sizes and keyframes, for cross-checking the
// pure-Go record parsers.
func Packets(ctx context.Context, data []byte, cfg Config) ([]Packet, StreamInfo, error) {
	if len(data) == 0 {
		return nil, StreamInfo{}, &Error{Kind: ErrCorrupt, Detail: "empty input"}
	}
	c, err := newCall(ctx, cfg)
	if err != nil {
		return nil, StreamInfo{}, err
	}
	defer c.close()
	cp := min(cfg.MaxPackets, 1<<16)
	buf := make([]C.dh_packet, cp)
	var count C.int64_t
	p, n := dataPtr(data)
	rc := C.dh_packets(p, n, &c.cfg, &buf[0], C.int64_t(cp), &count, &c.st)
	if err := c.err(ctx, rc); err != nil {
		return nil, c.stats().StreamInfo, err
	}
	if int(count) > cp {
		return nil, c.stats().StreamInfo, &Error{Kind: ErrLimit, Detail: "too many packets to list"}
	}
	out := make([]Packet, int(count))
	for i := range out {
		b := buf[i]
		out[i] = Packet{PTS: int64(b.pts), DTS: int64(b.dts), Size: int(b.size), Key: b.key != 0}
	}
	return out, c.stats().StreamInfo, nil
}
