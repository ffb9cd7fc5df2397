// audio_open.h is internal to the audio half of package av: the state of
// one audio call (au_ctx) and the helpers of audio_open.c that open a
// file and its best audio stream, which audio.c decodes. audio.go's cgo
// preamble includes only audio.h.
#ifndef DATAHELIX_AUDIO_OPEN_H
#define DATAHELIX_AUDIO_OPEN_H

#include "audio.h"
#include "memio.h"

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/channel_layout.h>
#include <libswresample/swresample.h>

#define AU_MAX_DECODE_ERRORS 32
#define AU_MAX_RATE 768000       // input or output sample rate
#define AU_MAX_CHANNELS 64       // input channels (FFmpeg's own bound is similar)
#define AU_MAX_FRAME (1 << 20)   // samples in one decoded frame
#define AU_SEEK_MIN_S 1.0        // seek only to a span starting later than this
#define AU_PREROLL_S 0.25        // decode this much before the span after a seek
#define AU_PACKET_PROBE 32768    // probesize after the header (see au_open)

// au_ctx is the state of one audio call.
typedef struct au_ctx {
	const dh_config *cfg;
	dh_audio_stats *st;
	dh_guard guard; // the call's deadline and cancel flag
	dh_mem io;      // the file's bytes
	AVIOContext *pb;
	AVFormatContext *fc;
	AVCodecContext *cc;
	AVStream *as;
	int si;
	AVPacket *pkt;
	AVFrame *frame;
	SwrContext *swr;
	int swr_rate, swr_fmt;     // input the resampler was made for
	AVChannelLayout swr_layout;
	int swr_out;               // channels the resampler outputs: 1 for mono input (copied to every channel), else all
	int64_t out_pos;           // output sample index of the resampler's next output; INT64_MIN = unset
	float **scratch;           // planar output of one swr_convert
	int scratch_cap;           // samples per plane of scratch
	int scratch_ch;            // planes of scratch
	int64_t last_err;
	int eof_sent, demux_done;
} au_ctx;

// au_open opens data, finds its best audio stream and, with
// need_decoder, opens its decoder; au_free frees what it opened (also
// after a failure).
int au_open(au_ctx *c, const uint8_t *data, int64_t len, const dh_config *cfg, dh_audio_stats *st,
            int need_decoder);
void au_free(au_ctx *c);

// au_check_interrupt reports (and records) a cancelled call or a passed
// deadline.
int au_check_interrupt(au_ctx *c);

// au_fail records a message (the first one wins) and returns code;
// au_map_err turns an FFmpeg error of step what into a DH_ERR_* code.
int au_fail(au_ctx *c, int code, const char *fmt, ...);
int au_map_err(au_ctx *c, int err, const char *what);

#endif
