// av.h declares the C half of package av: one entry point per Go call,
// each doing open -> (seek) -> decode -> (scale) on an in-memory buffer
// under the limits in dh_config. Nothing here keeps state between calls
// except the process-wide log callback installed by dh_init.
#ifndef DATAHELIX_AV_H
#define DATAHELIX_AV_H

#include <stdint.h>

// Result codes of the dh_* functions (0 is success).
enum {
	DH_OK = 0,
	DH_ERR_CORRUPT = -1,     // the bytes are not a decodable stream
	DH_ERR_LIMIT = -2,       // a safety limit was hit (pixels, frames, memory)
	DH_ERR_UNSUPPORTED = -3, // container or codec outside the allow lists
	DH_ERR_TIMEOUT = -4,     // the per-call deadline passed
	DH_ERR_CANCELED = -5,    // *cancel became non-zero
	DH_ERR_ARG = -6,         // the caller passed inconsistent arguments
};

// Seek modes of a dh_target.
enum {
	DH_SEEK_NONE = 0, // keep decoding forward from the current position
	DH_SEEK_TO = 1,   // seek backward to seek_pts (a keyframe) and flush first
	DH_SEEK_AUTO = 2, // seek only if the demuxer index has a keyframe after the current position and at or before the target
};

// dh_config bounds one call. Strings are comma-separated allow lists.
typedef struct dh_config {
	int64_t max_pixels;       // width*height limit, checked from the header and by the decoder
	int64_t max_frames;       // frames the decoder may output in one call
	int64_t max_packets;      // packets the demuxer may return in one call
	int64_t probe_size;       // bytes avformat may read to identify the input
	int64_t analyze_us;       // microseconds of stream avformat may analyse
	int64_t timeout_ns;       // wall time the call may take; 0 = unbounded
	const volatile int32_t *cancel; // the call stops when *cancel != 0 (may be NULL)
	const char *formats;      // demuxer allow list (format_whitelist)
	const char *codecs;       // decoder allow list (codec_whitelist), decoder names
	int32_t threads;          // decoder threads; 1 = one thread per sample
	int32_t out_w, out_h;     // RGB24 output size of dh_decode_targets
	int32_t skip_nonref;      // skip non-reference frames that precede the next target
	int32_t find_info;        // 1 = always run avformat_find_stream_info
	int32_t check_hashes;     // 1 = check HEVC pictures against their MD5 hash SEI (AV_EF_CRCCHECK)
	int32_t tb_num, tb_den;   // time base of target pts (0/0 = the stream's)
	// The view of dh_decode_targets: when crop_w and crop_h are positive,
	// only the rectangle crop_x, crop_y, crop_w x crop_h of the upright
	// picture, in the pixels of a ref_w x ref_h upright picture (scaled to
	// the frame's size when that differs), is scaled to out_w x out_h; its
	// corner moves to the chroma grid. hflip mirrors the output.
	int32_t crop_x, crop_y, crop_w, crop_h, ref_w, ref_h;
	int32_t hflip;
	// The output layout of dh_decode_targets: rows out_stride bytes apart
	// and slots out_plane bytes apart (0: packed, out_w*3 and
	// out_w*out_h*3), so that a picture smaller than its slot leaves the
	// rest (padding) as it was.
	int64_t out_stride, out_plane;
} dh_config;

// dh_target is one frame to produce. Targets are sorted by pts.
typedef struct dh_target {
	int64_t pts;      // wanted presentation time, in the config time base
	int64_t seek_pts; // keyframe pts to seek to when seek == DH_SEEK_TO
	int64_t got_pts;  // out: pts (stream time base) of the frame written
	int32_t seek;     // DH_SEEK_*
	int32_t slot;     // output slot: written at dst + slot*out_w*out_h*3
} dh_target;

// dh_stats reports what a call did and found.
typedef struct dh_stats {
	int64_t frames;        // frames output by the decoder
	int64_t packets;       // packets sent to the decoder
	int64_t seeks;         // seeks performed
	int64_t errors;        // packets the decoder rejected (skipped, as ffmpeg does)
	int64_t damaged;       // packets with damage the decoder found, each once: rejected (also in errors),
	                       // decoded into a frame flagged as concealed (decode_error_flags), or, for
	                       // HEVC, decoded with an error message (such as a picture-hash mismatch)
	int64_t missed;        // targets filled with a frame whose pts differs from the target's (the one shown at that time)
	int64_t duration;      // stream duration in its time base (or AV_NOPTS_VALUE)
	int64_t nb_frames;     // frame count from the container (0 = unknown)
	int64_t start_time;    // stream start time in its time base
	int32_t width, height; // coded picture size from the header
	int32_t tb_num, tb_den;
	int32_t read_error;    // the demuxer stopped on an error, not at a clean end
	int32_t rotation;      // clockwise turn (0, 90, 180 or 270) that shows the picture upright,
	                       // from the stream's display matrix, to the nearest multiple of 90
	                       // (a mirror in the matrix is undone too; see read_rotation in av.c)
	int32_t angle;         // the same turn in whole degrees (0..359), as the ffmpeg CLI reads it
	char codec[32];        // decoder name
	char format[32];       // demuxer short name
	char pix_fmt[32];      // pixel format of the last decoded frame
	char msg[256];         // detail of the failure
} dh_stats;

// dh_packet is one demuxed packet of the video stream, in decode order.
typedef struct dh_packet {
	int64_t pts, dts;
	int32_t size;
	int32_t key;
} dh_packet;

// dh_frame_hash is one decoded frame, in output order, turned upright
// (see dh_decode_all).
typedef struct dh_frame_hash {
	int64_t pts;
	uint8_t md5[16];
	int32_t width, height; // of the upright frame
} dh_frame_hash;

void dh_init(void);

// dh_decode_targets decodes the n targets into dst (dst_len bytes), each
// scaled to out_w x out_h RGB24 and turned by st->rotation.
int dh_decode_targets(const uint8_t *data, int64_t len, const dh_config *cfg,
                      dh_target *targets, int32_t n, uint8_t *dst, int64_t dst_len,
                      dh_stats *st);

// dh_decode_all decodes every frame and sets *count to the frames output.
// When hashes is not NULL it sets *hashes to an av_malloc'ed array of one
// hash per output frame, which the caller frees with av_free; each frame is
// hashed after the turn the ffmpeg CLI applies (transpose, or hflip+vflip),
// and a turn the CLI would make by another filter is DH_ERR_UNSUPPORTED.
int dh_decode_all(const uint8_t *data, int64_t len, const dh_config *cfg,
                  dh_frame_hash **hashes, int64_t *count, dh_stats *st);

// dh_packets demuxes the video stream without decoding, storing up to cap
// packets and setting *count (the total, which may exceed cap).
int dh_packets(const uint8_t *data, int64_t len, const dh_config *cfg,
               dh_packet *pkts, int64_t cap, int64_t *count, dh_stats *st);

// dh_scale_rgb scales the sw x sh packed RGB24 picture at src (rows of
// stride bytes) to dw x dh RGB24 at dst (rows of dst_stride bytes) with
// swscale's bilinear filter, mirrored left to right when flip is set.
int dh_scale_rgb(const uint8_t *src, int32_t stride, int32_t sw, int32_t sh, uint8_t *dst, int32_t dw,
                 int32_t dh, int32_t dst_stride, int32_t flip, char *msg, int32_t msg_len);

// dh_flip_rgb mirrors the w x h RGB24 picture at p (rows of stride
// bytes) left to right.
void dh_flip_rgb(uint8_t *p, int32_t w, int32_t h, int64_t stride);

#endif
