// av.c is the C half of package av: FFmpeg 5.1 demuxing and decoding of an
// in-memory buffer through a custom AVIOContext, under the limits of a
// dh_config. Each dh_* entry point is one cgo call that opens, decodes and
// frees everything it used, so calls on different goroutines share nothing.
#include "av.h"
#include "memio.h"

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/avstring.h>
#include <libavutil/display.h>
#include <libavutil/imgutils.h>
#include <libavutil/md5.h>
#include <libavutil/pixdesc.h>
#include <libswscale/swscale.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define IO_BUF_SIZE 32768
#define MAX_DECODE_ERRORS 32
#define SEEK_RETRIES 3
#define DAMAGE_RECENT 128 // damaged packets remembered to count each once

// The first error FFmpeg logged during the current call on this thread,
// and whether it was the max_pixels check, which FFmpeg reports only as
// EINVAL plus a log line.
static __thread char tls_log[192];
static __thread int tls_pixel_limit;

static void decoder_logged_error(void *avcl);

// log_cb replaces FFmpeg's printing (nothing is printed) and runs on
// whichever thread logs. Of the messages at AV_LOG_ERROR or worse, it counts
// the decoder's as damage to the packet being decoded (see
// decoder_logged_error) and keeps the calling thread's first one for the
// call's error detail.
static void log_cb(void *avcl, int level, const char *fmt, va_list vl) {
	if (level > AV_LOG_ERROR)
		return;
	decoder_logged_error(avcl);
	char line[192];
	int prefix = 0; // no "[h264 @ 0x...]" context prefix
	av_log_format_line2(avcl, level, fmt, vl, line, sizeof line, &prefix);
	if (strstr(line, "max pixel"))
		tls_pixel_limit = 1;
	if (tls_log[0] == 0) {
		size_t n = strcspn(line, "\n");
		line[n] = 0;
		av_strlcpy(tls_log, line, sizeof tls_log);
	}
}

void dh_init(void) { av_log_set_callback(log_cb); }

typedef struct dh_ctx {
	const dh_config *cfg;
	dh_stats *st;
	dh_guard guard; // the call's deadline and cancel flag
	dh_mem io;
	AVIOContext *pb;
	AVFormatContext *fc;
	AVCodecContext *cc;
	AVStream *vs;
	int si;
	AVPacket *pkt;
	struct SwsContext *sws;
	int sws_cs, sws_range; // colour details applied to sws (-1 = none yet)
	uint8_t *rgb_tmp;      // out_w*out_h*3 bytes: a picture before its turn (st->rotation)
	AVFrame *turned;       // a frame after its turn, for dh_decode_all's hashes
	int turn;              // TURN_* bits: how the ffmpeg CLI turns the stream's frames upright
	int eof_sent;          // the decoder got its flush packet
	int demux_done;        // av_read_frame reported the end
	int64_t pos_ts;        // largest dts (else pts) read since the last seek
	int64_t skip_before;   // skip non-reference frames with pts below this
	int64_t last_err;      // last FFmpeg error a decoder call returned
	int64_t index_lag;     // how far index timestamps (dts) may trail pts
	// Damage found by the decoder, counted once per packet. A packet is
	// known by a key: its byte position in the file plus one (0 stands for
	// the header, before any packet), or a new negative number when it has
	// no position. The key rides through the decoder as reordered_opaque,
	// which FFmpeg copies into the frame the packet starts and into the
	// context of the frame thread that decodes the packet, and stays the
	// same when a seek makes the packet decode again. damage_mu guards the
	// ring: the log callback runs on FFmpeg's threads.
	int64_t sent_key;                      // key of the last packet sent to the decoder
	int64_t unnamed;                       // last negative key handed out
	int log_damage;                        // the decoder's error messages are damage
	int damage_mu_ok;                      // damage_mu was initialised
	pthread_mutex_t damage_mu;
	int64_t damage_recent[DAMAGE_RECENT]; // keys of the latest damaged packets
	int64_t damage_seen;                   // packets ever put in damage_recent
} dh_ctx;

// note_damage counts the packet with key `key` in st->damaged unless it
// was counted already. A packet is remembered among the last DAMAGE_RECENT
// damaged ones, many more than the decoder holds in flight (its reorder
// delay plus its frame threads) or decodes again after a seek, so the
// signs of one packet, which arrive within that span, count once.
static void note_damage(dh_ctx *c, int64_t key) {
	if (!c->damage_mu_ok)
		return;
	pthread_mutex_lock(&c->damage_mu);
	int seen = 0;
	for (int64_t i = 0; i < DAMAGE_RECENT && i < c->damage_seen; i++)
		seen |= c->damage_recent[i] == key;
	if (!seen) {
		c->damage_recent[c->damage_seen++ % DAMAGE_RECENT] = key;
		c->st->damaged++;
	}
	pthread_mutex_unlock(&c->damage_mu);
}

// decoder_logged_error counts an error message logged through avcl as
// damage when avcl is the decoder of a call that counts its messages.
// Only ctx_open sets AVCodecContext.opaque in this process, and FFmpeg
// copies it, with reordered_opaque, into the context of the frame thread
// decoding a packet, so a message from any thread of a call's decoder leads
// back to the call and the packet. The call outlives the message:
// avcodec_free_context joins the decoder's threads before the call returns.
static void decoder_logged_error(void *avcl) {
	if (!avcl || *(const AVClass **)avcl != avcodec_get_class())
		return;
	const AVCodecContext *cc = avcl;
	dh_ctx *c = cc->opaque;
	if (c && c->log_damage)
		note_damage(c, cc->reordered_opaque);
}

static int check_interrupt(dh_ctx *c) { return dh_guard_check(&c->guard); }

// fail records a message (the first one wins) and returns code.
static int fail(dh_ctx *c, int code, const char *fmt, ...) {
	if (c->st->msg[0] == 0) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(c->st->msg, sizeof c->st->msg, fmt, ap);
		va_end(ap);
		if (tls_log[0]) {
			size_t n = strlen(c->st->msg);
			snprintf(c->st->msg + n, sizeof c->st->msg - n, " (%s)", tls_log);
		}
	}
	return code;
}

// map_err turns an FFmpeg error from step `what` into a DH_ERR_* code.
static int map_err(dh_ctx *c, int err, const char *what) {
	char buf[AV_ERROR_MAX_STRING_SIZE];
	if (c->guard.interrupted || err == AVERROR_EXIT) {
		if (!c->guard.interrupted)
			c->guard.interrupted = DH_ERR_TIMEOUT;
		return fail(c, c->guard.interrupted, "%s: %s", what,
		            c->guard.interrupted == DH_ERR_CANCELED ? "canceled" : "deadline exceeded");
	}
	av_strerror(err, buf, sizeof buf);
	if (tls_pixel_limit)
		return fail(c, DH_ERR_LIMIT, "%s: picture exceeds %lld pixels", what,
		            (long long)c->cfg->max_pixels);
	return fail(c, dh_err_code(err), "%s: %s", what, buf);
}

// probe identifies the container from the first bytes (dh_probe) and
// checks it against the allow list.
static int probe(dh_ctx *c, const AVInputFormat **fmt) {
	int64_t limit;
	switch (dh_probe(c->io.data, c->io.len, c->cfg->probe_size, fmt, &limit)) {
	case DH_ERR_LIMIT:
		return fail(c, DH_ERR_LIMIT, "probe: out of memory");
	case DH_ERR_CORRUPT:
		return fail(c, DH_ERR_CORRUPT, "probe: unrecognised container in %lld bytes", (long long)limit);
	}
	if (av_match_list((*fmt)->name, c->cfg->formats, ',') <= 0)
		return fail(c, DH_ERR_UNSUPPORTED, "container %s is not allowed (allowed: %s)",
		            (*fmt)->name, c->cfg->formats);
	return 0;
}

// How a frame is turned upright: mirrored across, down or both (hflip,
// vflip; both is a turn by 180 degrees), or by one of the transpose
// filter's directions: clock, cclock, cclock_flip (the plain transpose,
// out(x,y) = in(y,x)) or clock_flip (across the other diagonal).
enum {
	TURN_HFLIP = 1,
	TURN_VFLIP = 2,
	TURN_CLOCK = 4,
	TURN_CCLOCK = 8,
	TURN_CCLOCK_FLIP = 16,
	TURN_CLOCK_FLIP = 32,
	TURN_TRANSPOSES = TURN_CLOCK | TURN_CCLOCK | TURN_CCLOCK_FLIP | TURN_CLOCK_FLIP,
};

// read_rotation sets st->angle, st->rotation and c->turn from the video
// stream's display matrix (AV_PKT_DATA_DISPLAYMATRIX: the MP4/MOV tkhd
// matrix) as the ffmpeg 5.1 CLI reads it for -autorotate (get_rotation in
// cmdutils.c and configure_input_video_filter in ffmpeg_filter.c): the
// clockwise angle, rounded to whole degrees, in [0, 360), and the filter
// that turns the frames: for 90 degrees transpose=clock, or cclock_flip
// when the matrix also mirrors (m[3] > 0); for 270 transpose=cclock, or
// clock_flip when it mirrors (m[3] < 0); for 180 hflip when m[0] < 0 and
// vflip when m[4] < 0; for 0 vflip when m[4] < 0. A mirrored matrix
// (negative determinant) is thus undone too, its mirror read as a turn
// plus a vertical flip. An angle that is not a multiple of 90 degrees
// (which the CLI turns with its rotate filter) is taken to the nearest
// one here. A degenerate matrix (no rotation can be read) counts as none.
static void read_rotation(dh_ctx *c) {
	size_t size = 0;
	const int32_t *m = (const int32_t *)av_stream_get_side_data(c->vs, AV_PKT_DATA_DISPLAYMATRIX, &size);
	double theta = 0;
	if (m && size >= 9 * sizeof *m)
		theta = -round(av_display_rotation_get(m));
	if (!m || size < 9 * sizeof *m || !isfinite(theta)) {
		m = NULL; // the CLI's tests all fail on a NaN angle: no filter
		theta = 0;
	}
	theta -= 360 * floor(theta / 360 + 0.9 / 360);
	int angle = (int)theta;
	if (angle < 0 || angle >= 360)
		angle = 0;
	c->st->angle = angle;
	c->st->rotation = (angle + 45) / 90 % 4 * 90;
	if (!m)
		return;
	switch (c->st->rotation) {
	case 0:
		c->turn = m[4] < 0 ? TURN_VFLIP : 0;
		break;
	case 90:
		c->turn = m[3] > 0 ? TURN_CCLOCK_FLIP : TURN_CLOCK;
		break;
	case 180:
		c->turn = (m[0] < 0 ? TURN_HFLIP : 0) | (m[4] < 0 ? TURN_VFLIP : 0);
		break;
	case 270:
		c->turn = m[3] < 0 ? TURN_CLOCK_FLIP : TURN_CCLOCK;
		break;
	}
}

static int ctx_open(dh_ctx *c, const uint8_t *data, int64_t len, const dh_config *cfg,
                    dh_stats *st, int need_decoder) {
	memset(c, 0, sizeof *c);
	memset(st, 0, sizeof *st);
	tls_log[0] = 0;
	tls_pixel_limit = 0;
	c->cfg = cfg;
	c->st = st;
	c->sws_cs = c->sws_range = -1;
	c->pos_ts = INT64_MIN;
	c->skip_before = INT64_MIN;
	dh_guard_init(&c->guard, cfg);
	c->io = (dh_mem){.data = data, .len = len, .guard = &c->guard};
	if (pthread_mutex_init(&c->damage_mu, NULL))
		return fail(c, DH_ERR_LIMIT, "open: cannot create a mutex");
	c->damage_mu_ok = 1;
	if (len <= 0)
		return fail(c, DH_ERR_CORRUPT, "empty input");

	const AVInputFormat *fmt;
	int ret = probe(c, &fmt);
	if (ret)
		return ret;

	uint8_t *buf = av_malloc(IO_BUF_SIZE);
	if (!buf)
		return fail(c, DH_ERR_LIMIT, "open: out of memory");
	c->pb = avio_alloc_context(buf, IO_BUF_SIZE, 0, &c->io, dh_mem_read, NULL, dh_mem_seek);
	if (!c->pb) {
		av_free(buf);
		return fail(c, DH_ERR_LIMIT, "open: out of memory");
	}
	c->fc = avformat_alloc_context();
	if (!c->fc)
		return fail(c, DH_ERR_LIMIT, "open: out of memory");
	c->fc->pb = c->pb;
	c->fc->interrupt_callback.callback = dh_guard_cb;
	c->fc->interrupt_callback.opaque = &c->guard;

	AVDictionary *o = NULL;
	av_dict_set(&o, "format_whitelist", cfg->formats, 0);
	av_dict_set(&o, "codec_whitelist", cfg->codecs, 0);
	// No protocol is named "none": nested opens (mov drefs, playlists) fail.
	av_dict_set(&o, "protocol_whitelist", "none", 0);
	av_dict_set_int(&o, "probesize", cfg->probe_size, 0);
	av_dict_set_int(&o, "analyzeduration", cfg->analyze_us, 0);
	av_dict_set_int(&o, "max_streams", 16, 0);
	ret = avformat_open_input(&c->fc, NULL, fmt, &o);
	av_dict_free(&o);
	if (ret < 0)
		return map_err(c, ret, "open");
	av_strlcpy(st->format, c->fc->iformat->name, sizeof st->format);

	ret = av_find_best_stream(c->fc, AVMEDIA_TYPE_VIDEO, -1, -1, NULL, 0);
	if (ret < 0)
		return fail(c, DH_ERR_CORRUPT, "no video stream");
	c->si = ret;
	c->vs = c->fc->streams[c->si];
	for (unsigned i = 0; i < c->fc->nb_streams; i++)
		c->fc->streams[i]->discard = (int)i == c->si ? AVDISCARD_DEFAULT : AVDISCARD_ALL;

	AVCodecParameters *par = c->vs->codecpar;
	const char *cname = avcodec_get_name(par->codec_id);
	av_strlcpy(st->codec, cname, sizeof st->codec);
	if (av_match_list(cname, cfg->codecs, ',') <= 0)
		return fail(c, DH_ERR_UNSUPPORTED, "codec %s is not allowed (allowed: %s)", cname,
		            cfg->codecs);
	const AVCodec *dec = avcodec_find_decoder(par->codec_id);
	if (!dec)
		return fail(c, DH_ERR_UNSUPPORTED, "no decoder for codec %s", cname);

	if (cfg->find_info || par->width <= 0 || par->height <= 0) {
		AVDictionary **opts = av_calloc(c->fc->nb_streams, sizeof *opts);
		if (!opts)
			return fail(c, DH_ERR_LIMIT, "open: out of memory");
		for (unsigned i = 0; i < c->fc->nb_streams; i++) {
			av_dict_set_int(&opts[i], "threads", 1, 0);
			av_dict_set_int(&opts[i], "max_pixels", cfg->max_pixels, 0);
		}
		ret = avformat_find_stream_info(c->fc, opts);
		for (unsigned i = 0; i < c->fc->nb_streams; i++)
			av_dict_free(&opts[i]);
		av_free(opts);
		if (ret < 0)
			return map_err(c, ret, "find stream info");
	}
	st->width = par->width;
	st->height = par->height;
	read_rotation(c);
	st->tb_num = c->vs->time_base.num;
	st->tb_den = c->vs->time_base.den;
	st->duration = c->vs->duration;
	st->nb_frames = c->vs->nb_frames;
	st->start_time = c->vs->start_time;
	// The mov demuxer indexes samples by dts, which trails pts by the
	// reorder delay: searching its index for a pts must look that much
	// earlier to find the keyframe shown at or before it.
	AVRational fr = av_guess_frame_rate(c->fc, c->vs, NULL);
	if (strncmp(c->fc->iformat->name, "mov", 3) == 0 && par->video_delay > 0 && fr.num > 0 && fr.den > 0)
		c->index_lag = av_rescale_q(par->video_delay, av_inv_q(fr), c->vs->time_base);
	if (par->width <= 0 || par->height <= 0)
		return fail(c, DH_ERR_CORRUPT, "no picture size in the header");
	if ((int64_t)par->width * par->height > cfg->max_pixels)
		return fail(c, DH_ERR_LIMIT, "picture %dx%d exceeds %lld pixels", par->width,
		            par->height, (long long)cfg->max_pixels);
	if (c->vs->time_base.num <= 0 || c->vs->time_base.den <= 0)
		return fail(c, DH_ERR_CORRUPT, "invalid time base");

	c->pkt = av_packet_alloc();
	if (!c->pkt)
		return fail(c, DH_ERR_LIMIT, "open: out of memory");
	if (!need_decoder)
		return 0;

	c->cc = avcodec_alloc_context3(dec);
	if (!c->cc)
		return fail(c, DH_ERR_LIMIT, "open: out of memory");
	ret = avcodec_parameters_to_context(c->cc, par);
	if (ret < 0)
		return map_err(c, ret, "codec parameters");
	c->cc->pkt_timebase = c->vs->time_base;
	// Damage the decoder finds reaches the caller (note_damage) as a frame
	// flagged as concealed (H.264 flags them), as a rejected packet, or,
	// for HEVC only, as an error message: HEVC conceals damage it detects
	// in slice data without flagging the frame or failing the packet, and
	// reports it only in the log. H.264 also logs errors for intact
	// open-GOP streams decoded from a seek (mmco: unref short failure), and
	// VP9 logs them only with a rejected packet, so their messages do not
	// count. With check_hashes, AV_EF_CRCCHECK makes HEVC check the MD5 of
	// each picture against the decoded-picture-hash SEI, when the encoder
	// wrote one (x265 --hash 1), and log a mismatch; no other allowed video
	// decoder reads the flag. It is asked for, not the default: an MD5 per
	// picture doubles the decode time of a cheap clip. AV_EF_EXPLODE is
	// not set: it would fail packets (and then whole clips) that FFmpeg
	// decodes with concealment.
	c->cc->opaque = c;
	c->cc->reordered_opaque = 0; // the header's key
	if (cfg->check_hashes)
		c->cc->err_recognition |= AV_EF_CRCCHECK;
	c->log_damage = dec->id == AV_CODEC_ID_HEVC;
	AVDictionary *co = NULL;
	av_dict_set_int(&co, "threads", cfg->threads > 0 ? cfg->threads : 1, 0);
	av_dict_set_int(&co, "max_pixels", cfg->max_pixels, 0);
	av_dict_set(&co, "codec_whitelist", dec->name, 0);
	ret = avcodec_open2(c->cc, dec, &co);
	av_dict_free(&co);
	if (ret < 0)
		return map_err(c, ret, "open decoder");
	av_strlcpy(st->codec, dec->name, sizeof st->codec);
	return 0;
}

static void ctx_free(dh_ctx *c) {
	sws_freeContext(c->sws);
	av_freep(&c->rgb_tmp);
	av_frame_free(&c->turned);
	av_packet_free(&c->pkt);
	avcodec_free_context(&c->cc); // joins the decoder's threads: no message follows
	if (c->damage_mu_ok) {
		pthread_mutex_destroy(&c->damage_mu);
		c->damage_mu_ok = 0;
	}
	avformat_close_input(&c->fc);
	if (c->pb) {
		av_freep(&c->pb->buffer);
		avio_context_free(&c->pb);
	}
}

// read_packet reads the next packet of the video stream into c->pkt.
// It returns 0, AVERROR_EOF at the end (also after a read error, which it
// records in st->read_error, as ffmpeg treats one), or a DH_ERR_* code.
static int read_packet(dh_ctx *c) {
	for (;;) {
		if (check_interrupt(c))
			return map_err(c, AVERROR_EXIT, "read");
		if (c->demux_done)
			return AVERROR_EOF;
		int ret = av_read_frame(c->fc, c->pkt);
		if (ret < 0) {
			if (c->guard.interrupted || ret == AVERROR_EXIT || ret == AVERROR(ENOMEM))
				return map_err(c, ret, "read");
			c->demux_done = 1;
			if (ret != AVERROR_EOF) {
				c->st->read_error = 1;
				char buf[AV_ERROR_MAX_STRING_SIZE];
				av_strerror(ret, buf, sizeof buf);
				fail(c, 0, "read: %s", buf);
			}
			return AVERROR_EOF;
		}
		if (c->pkt->stream_index != c->si) {
			av_packet_unref(c->pkt);
			continue;
		}
		if (c->pkt->flags & AV_PKT_FLAG_CORRUPT)
			c->st->read_error = 1;
		if (++c->st->packets > c->cfg->max_packets) {
			av_packet_unref(c->pkt);
			return fail(c, DH_ERR_LIMIT, "more than %lld packets read",
			            (long long)c->cfg->max_packets);
		}
		int64_t ts = c->pkt->dts != AV_NOPTS_VALUE ? c->pkt->dts : c->pkt->pts;
		if (ts != AV_NOPTS_VALUE && ts > c->pos_ts)
			c->pos_ts = ts;
		return 0;
	}
}

// decoder_error counts a rejected packet; too many make the stream corrupt.
// A rejected packet is damaged too: without frame threads FFmpeg rejects
// the packet just sent, with them one sent earlier, whose key is not known
// (so its other signs, if any, count it again).
static int decoder_error(dh_ctx *c, int err) {
	if (c->guard.interrupted || err == AVERROR_EXIT || err == AVERROR(ENOMEM) || tls_pixel_limit)
		return map_err(c, err, "decode");
	c->last_err = err;
	note_damage(c, c->cc->active_thread_type & FF_THREAD_FRAME ? --c->unnamed : c->sent_key);
	if (++c->st->errors > MAX_DECODE_ERRORS)
		return map_err(c, err, "decode: too many errors");
	return 0;
}

// next_frame returns the decoder's next frame in f: 0, AVERROR_EOF when
// the stream is drained, or a DH_ERR_* code.
static int next_frame(dh_ctx *c, AVFrame *f) {
	for (;;) {
		int ret = avcodec_receive_frame(c->cc, f);
		if (ret == 0) {
			if (f->decode_error_flags)
				note_damage(c, f->reordered_opaque);
			if (++c->st->frames > c->cfg->max_frames) {
				av_frame_unref(f);
				return fail(c, DH_ERR_LIMIT, "more than %lld frames decoded",
				            (long long)c->cfg->max_frames);
			}
			return 0;
		}
		if (ret == AVERROR_EOF)
			return AVERROR_EOF;
		if (ret != AVERROR(EAGAIN)) {
			if ((ret = decoder_error(c, ret)))
				return ret;
			continue;
		}
		if (c->eof_sent)
			return AVERROR_EOF;
		ret = read_packet(c);
		if (ret == AVERROR_EOF) {
			c->eof_sent = 1;
			avcodec_send_packet(c->cc, NULL);
			continue;
		}
		if (ret)
			return ret;
		if (c->cfg->skip_nonref)
			c->cc->skip_frame = c->pkt->pts != AV_NOPTS_VALUE && c->pkt->pts < c->skip_before
			                        ? AVDISCARD_NONREF
			                        : AVDISCARD_DEFAULT;
		c->sent_key = c->pkt->pos >= 0 ? c->pkt->pos + 1 : --c->unnamed;
		c->cc->reordered_opaque = c->sent_key;
		ret = avcodec_send_packet(c->cc, c->pkt);
		av_packet_unref(c->pkt);
		if (ret < 0 && (ret = decoder_error(c, ret)))
			return ret;
	}
}

static int do_seek(dh_ctx *c, int64_t ts) {
	int ret = av_seek_frame(c->fc, c->si, ts, AVSEEK_FLAG_BACKWARD);
	if (ret < 0)
		return map_err(c, ret, "seek");
	avcodec_flush_buffers(c->cc);
	c->eof_sent = 0;
	c->demux_done = 0;
	c->pos_ts = INT64_MIN;
	c->st->seeks++;
	return 0;
}

static int64_t frame_pts(const AVFrame *f) {
	return f->pts != AV_NOPTS_VALUE ? f->pts : f->best_effort_timestamp;
}

// turn_plane writes the w x h plane src (rows of linesize sls, pixels of
// step bytes) turned by turn (TURN_* bits) to dst (rows of linesize dls),
// which is h x w when turn transposes.
static void turn_plane(uint8_t *dst, int dls, const uint8_t *src, int sls, int w, int h, int step,
                       int turn) {
	int tr = turn & TURN_TRANSPOSES;
	int dw = tr ? h : w, dh = tr ? w : h;
	for (int y = 0; y < dh; y++) {
		uint8_t *d = dst + (ptrdiff_t)y * dls;
		for (int x = 0; x < dw; x++, d += step) {
			int sx = turn & TURN_HFLIP ? w - 1 - x : x, sy = turn & TURN_VFLIP ? h - 1 - y : y;
			if (turn & TURN_CLOCK) {
				sx = y;
				sy = h - 1 - x;
			} else if (turn & TURN_CCLOCK) {
				sx = w - 1 - y;
				sy = x;
			} else if (turn & TURN_CCLOCK_FLIP) {
				sx = y;
				sy = x;
			} else if (turn & TURN_CLOCK_FLIP) {
				sx = w - 1 - y;
				sy = h - 1 - x;
			}
			memcpy(d, src + (ptrdiff_t)sy * sls + (ptrdiff_t)sx * step, step);
		}
	}
}

// upright_to_coded maps the pixel x, y of the upright picture to the
// pixel of the w x h coded one that turn_plane puts there.
static void upright_to_coded(int turn, int w, int h, int x, int y, int *sx, int *sy) {
	*sx = turn & TURN_HFLIP ? w - 1 - x : x;
	*sy = turn & TURN_VFLIP ? h - 1 - y : y;
	if (turn & TURN_CLOCK) {
		*sx = y;
		*sy = h - 1 - x;
	} else if (turn & TURN_CCLOCK) {
		*sx = w - 1 - y;
		*sy = x;
	} else if (turn & TURN_CCLOCK_FLIP) {
		*sx = y;
		*sy = x;
	} else if (turn & TURN_CLOCK_FLIP) {
		*sx = w - 1 - y;
		*sy = h - 1 - x;
	}
}

// crop_source points src at the crop rectangle of f (cfg->crop_*, a
// rectangle of the upright ref_w x ref_h picture) and sets *w, *h to its
// size: the rectangle is scaled to the frame's upright size, mapped
// through the turn onto the coded frame, and its corner moved left and
// up onto the chroma grid (even for 4:2:0), so that every plane's
// pointer moves by whole samples. Nothing is copied: sws_scale reads the
// rectangle in place.
static int crop_source(dh_ctx *c, const AVFrame *f, const uint8_t *src[4], int *w, int *h) {
	const dh_config *cfg = c->cfg;
	const AVPixFmtDescriptor *d = av_pix_fmt_desc_get(f->format);
	if (!d || d->flags & (AV_PIX_FMT_FLAG_BITSTREAM | AV_PIX_FMT_FLAG_HWACCEL | AV_PIX_FMT_FLAG_PAL))
		return fail(c, DH_ERR_UNSUPPORTED, "cannot crop %s", d ? d->name : "an unknown pixel format");
	int tr = c->turn & TURN_TRANSPOSES;
	int64_t uw = tr ? f->height : f->width, uh = tr ? f->width : f->height;
	int64_t rw = cfg->ref_w > 0 ? cfg->ref_w : uw, rh = cfg->ref_h > 0 ? cfg->ref_h : uh;
	// The rectangle in the frame's upright pixels, end exclusive.
	int64_t x0 = cfg->crop_x * uw / rw, y0 = cfg->crop_y * uh / rh;
	int64_t x1 = ((int64_t)cfg->crop_x + cfg->crop_w) * uw, y1 = ((int64_t)cfg->crop_y + cfg->crop_h) * uh;
	x1 = (x1 + rw - 1) / rw;
	y1 = (y1 + rh - 1) / rh;
	x0 = FFMIN(FFMAX(x0, 0), uw - 1);
	y0 = FFMIN(FFMAX(y0, 0), uh - 1);
	x1 = FFMIN(FFMAX(x1, x0 + 1), uw);
	y1 = FFMIN(FFMAX(y1, y0 + 1), uh);
	// Its corners on the coded frame.
	int ax, ay, bx, by;
	upright_to_coded(c->turn, f->width, f->height, (int)x0, (int)y0, &ax, &ay);
	upright_to_coded(c->turn, f->width, f->height, (int)x1 - 1, (int)y1 - 1, &bx, &by);
	int cx0 = FFMIN(ax, bx), cy0 = FFMIN(ay, by), cx1 = FFMAX(ax, bx) + 1, cy1 = FFMAX(ay, by) + 1;
	cx0 &= ~((1 << d->log2_chroma_w) - 1);
	cy0 &= ~((1 << d->log2_chroma_h) - 1);
	int done[4] = {0, 0, 0, 0};
	for (int i = 0; i < d->nb_components; i++) {
		const AVComponentDescriptor *comp = &d->comp[i];
		if (done[comp->plane])
			continue;
		done[comp->plane] = 1;
		int chroma = (i == 1 || i == 2) && !(d->flags & AV_PIX_FMT_FLAG_RGB);
		int sx = chroma ? cx0 >> d->log2_chroma_w : cx0, sy = chroma ? cy0 >> d->log2_chroma_h : cy0;
		src[comp->plane] = f->data[comp->plane] + (ptrdiff_t)sy * f->linesize[comp->plane] + (ptrdiff_t)sx * comp->step;
	}
	*w = cx1 - cx0;
	*h = cy1 - cy0;
	return 0;
}

// to_rgb converts f to out_w x out_h RGB24 at dst with sws_scale
// (bilinear), honouring the frame's colour matrix and range, and turns it
// upright as the ffmpeg CLI turns it (c->turn). A picture turned by 90
// or 270 degrees is scaled to out_h x out_w first, so the turned one fills
// out_w x out_h: the turn of the scaled RGB moves whole pixels, the
// cheapest exact place for it.
static int to_rgb(dh_ctx *c, const AVFrame *f, uint8_t *dst) {
	const dh_config *cfg = c->cfg;
	int turn = c->turn, tr = turn & TURN_TRANSPOSES;
	int sw = tr ? cfg->out_h : cfg->out_w;
	int sh = tr ? cfg->out_w : cfg->out_h;
	uint8_t *to = dst;
	if (turn) {
		if (!c->rgb_tmp && !(c->rgb_tmp = av_malloc((size_t)cfg->out_w * cfg->out_h * 3)))
			return fail(c, DH_ERR_LIMIT, "out of memory");
		to = c->rgb_tmp;
	}
	const uint8_t *src[4] = {f->data[0], f->data[1], f->data[2], f->data[3]};
	int src_w = f->width, src_h = f->height;
	if (cfg->crop_w > 0 && cfg->crop_h > 0) {
		int ret = crop_source(c, f, src, &src_w, &src_h);
		if (ret)
			return ret;
	}
	struct SwsContext *s = sws_getCachedContext(c->sws, src_w, src_h, f->format, sw, sh,
	                                            AV_PIX_FMT_RGB24, SWS_BILINEAR, NULL, NULL, NULL);
	if (!s)
		return fail(c, DH_ERR_UNSUPPORTED, "cannot convert %s %dx%d to RGB",
		            av_get_pix_fmt_name(f->format), f->width, f->height);
	int cs = f->colorspace == AVCOL_SPC_BT709        ? SWS_CS_ITU709
	         : f->colorspace == AVCOL_SPC_BT2020_NCL ? SWS_CS_BT2020
	                                                 : SWS_CS_DEFAULT;
	const char *name = av_get_pix_fmt_name(f->format);
	int range = f->color_range == AVCOL_RANGE_JPEG || (name && strncmp(name, "yuvj", 4) == 0);
	if (s != c->sws || cs != c->sws_cs || range != c->sws_range) {
		sws_setColorspaceDetails(s, sws_getCoefficients(cs), range,
		                         sws_getCoefficients(SWS_CS_DEFAULT), 1, 0, 1 << 16, 1 << 16);
		c->sws_cs = cs;
		c->sws_range = range;
	}
	c->sws = s;
	int64_t dls = cfg->out_stride > 0 ? cfg->out_stride : (int64_t)cfg->out_w * 3;
	uint8_t *d[4] = {to, NULL, NULL, NULL};
	int ls[4] = {turn ? sw * 3 : (int)dls, 0, 0, 0};
	sws_scale(s, src, f->linesize, 0, src_h, d, ls);
	if (turn)
		turn_plane(dst, (int)dls, to, sw * 3, sw, sh, 3, turn);
	if (cfg->hflip)
		dh_flip_rgb(dst, cfg->out_w, cfg->out_h, dls);
	return 0;
}

int dh_decode_targets(const uint8_t *data, int64_t len, const dh_config *cfg, dh_target *t,
                      int32_t n, uint8_t *dst, int64_t dst_len, dh_stats *st) {
	dh_ctx c;
	AVFrame *cur = NULL, *last = NULL;
	int ret = ctx_open(&c, data, len, cfg, st, 1);
	if (ret)
		goto out;
	int64_t plane = cfg->out_plane > 0 ? cfg->out_plane : (int64_t)cfg->out_w * cfg->out_h * 3;
	for (int i = 0; i < n; i++)
		if (plane <= 0 || t[i].slot < 0 || ((int64_t)t[i].slot + 1) * plane > dst_len) {
			ret = fail(&c, DH_ERR_ARG, "target %d: slot %d outside the output", i, t[i].slot);
			goto out;
		}
	cur = av_frame_alloc();
	last = av_frame_alloc();
	if (!cur || !last) {
		ret = fail(&c, DH_ERR_LIMIT, "out of memory");
		goto out;
	}
	AVRational ttb = cfg->tb_den > 0 ? (AVRational){cfg->tb_num, cfg->tb_den} : c.vs->time_base;
	int have_cur = 0, have_last = 0;
	int64_t cur_serial = 0, last_serial = 0, written_serial = -1, written_slot = -1;
	int64_t serial = 0;
	int i;
	for (i = 0; i < n; i++) {
		int64_t want = av_rescale_q(t[i].pts, ttb, c.vs->time_base);
		int64_t seek_ts = INT64_MIN;
		if (t[i].seek == DH_SEEK_TO) {
			seek_ts = av_rescale_q(t[i].seek_pts, ttb, c.vs->time_base);
		} else if (t[i].seek == DH_SEEK_AUTO) {
			// Seek when the keyframe before the target lies after what was
			// read. The index is searched in its own domain (dts for mov);
			// the seek itself takes the target pts, as av_seek_frame expects
			// (torchcodec does the same), and finds that keyframe.
			int64_t key_ts;
			if (__builtin_sub_overflow(want, c.index_lag, &key_ts))
				key_ts = INT64_MIN;
			int k = av_index_search_timestamp(c.vs, key_ts, AVSEEK_FLAG_BACKWARD);
			const AVIndexEntry *e = k >= 0 ? avformat_index_get_entry(c.vs, k) : NULL;
			if (e && e->timestamp > c.pos_ts && (c.pos_ts != INT64_MIN || k > 0))
				seek_ts = want;
		}
		c.skip_before = want;
		for (int retry = 0; seek_ts != INT64_MIN; retry++) {
			if ((ret = do_seek(&c, seek_ts)))
				goto out;
			av_frame_unref(cur);
			av_frame_unref(last);
			have_cur = have_last = 0;
			ret = next_frame(&c, cur);
			if (ret == AVERROR_EOF)
				break;
			if (ret)
				goto out;
			have_cur = 1;
			cur_serial = ++serial;
			// A first frame after the target means the demuxer landed on a
			// later keyframe (its index may be by dts): step back by twice
			// the overshoot and try again, a bounded number of times.
			int64_t over, back, next;
			if (frame_pts(cur) <= want || retry == SEEK_RETRIES ||
			    __builtin_sub_overflow(frame_pts(cur), want, &over) ||
			    __builtin_mul_overflow(over, 2, &back) ||
			    __builtin_sub_overflow(seek_ts, back + 1, &next))
				break;
			seek_ts = next;
		}
		for (;;) {
			if (!have_cur) {
				ret = next_frame(&c, cur);
				if (ret == AVERROR_EOF)
					break;
				if (ret)
					goto out;
				have_cur = 1;
				cur_serial = ++serial;
			}
			if (frame_pts(cur) >= want)
				break;
			av_frame_unref(last);
			av_frame_move_ref(last, cur);
			have_last = 1;
			last_serial = cur_serial;
			have_cur = 0;
		}
		// Pick the frame shown at the target time: the one with its pts,
		// else the last one before it (the first one when the target
		// precedes every frame).
		AVFrame *pick = NULL;
		int64_t pick_serial = 0;
		if (have_cur && (frame_pts(cur) == want || !have_last)) {
			pick = cur;
			pick_serial = cur_serial;
		} else if (have_last) {
			pick = last;
			pick_serial = last_serial;
		}
		uint8_t *out = dst + t[i].slot * plane;
		if (!pick) {
			if (written_slot < 0) {
				ret = c.last_err ? map_err(&c, (int)c.last_err, "decode")
				                 : fail(&c, DH_ERR_CORRUPT, "no frame decoded up to pts %lld",
				                        (long long)want);
				goto out;
			}
			memmove(out, dst + written_slot * plane, plane); // stream ended: repeat the last output
			t[i].got_pts = t[i - 1].got_pts;
			c.st->missed++;
			continue;
		}
		if (pick_serial == written_serial) {
			memmove(out, dst + written_slot * plane, plane);
		} else if ((ret = to_rgb(&c, pick, out))) {
			goto out;
		}
		written_serial = pick_serial;
		written_slot = t[i].slot;
		t[i].got_pts = frame_pts(pick);
		if (t[i].got_pts != want)
			c.st->missed++;
		av_strlcpy(st->pix_fmt, av_get_pix_fmt_name(pick->format) ? av_get_pix_fmt_name(pick->format) : "",
		           sizeof st->pix_fmt);
	}
	ret = 0;
out:
	av_frame_free(&cur);
	av_frame_free(&last);
	ctx_free(&c);
	return ret;
}

// hash_frame computes the MD5 of f's planes packed without padding, as
// av_image_copy_to_buffer with align 1 (and so ffmpeg's rawvideo encoder
// and framemd5 muxer) lays them out.
static int hash_frame(const AVFrame *f, uint8_t out[16]) {
	const AVPixFmtDescriptor *d = av_pix_fmt_desc_get(f->format);
	int lines[4];
	if (!d || (d->flags & (AV_PIX_FMT_FLAG_HWACCEL | AV_PIX_FMT_FLAG_PAL | AV_PIX_FMT_FLAG_BITSTREAM)))
		return -1;
	if (av_image_fill_linesizes(lines, f->format, f->width) < 0)
		return -1;
	struct AVMD5 *m = av_md5_alloc();
	if (!m)
		return -1;
	av_md5_init(m);
	int planes = av_pix_fmt_count_planes(f->format);
	for (int p = 0; p < planes; p++) {
		int h = (p == 1 || p == 2) ? AV_CEIL_RSHIFT(f->height, d->log2_chroma_h) : f->height;
		for (int y = 0; y < h; y++)
			av_md5_update(m, f->data[p] + (ptrdiff_t)y * f->linesize[p], lines[p]);
	}
	av_md5_final(m, out);
	av_free(m);
	return 0;
}

// turn_frame sets *out to f turned upright as the ffmpeg 5.1 CLI turns a
// frame before its encoders see it (-autorotate, the default): by the
// transpose filter or by hflip and vflip (see read_rotation). It is f itself when the stream has no turn, else a frame of
// the same pixel format that c owns until the next call. The CLI turns by
// another angle with its rotate filter, which fills the corners, and first
// converts a pixel format whose chroma is subsampled differently across
// and down (4:2:2, 4:4:0) for transpose (to yuv444p with swscale's bicubic
// filter for yuv422p): neither is reproduced, so both are refused.
static int turn_frame(dh_ctx *c, AVFrame *f, AVFrame **out) {
	int angle = c->st->angle;
	*out = f;
	if (!c->turn && (angle == 0 || angle == 180))
		return 0;
	const char *name = av_get_pix_fmt_name(f->format);
	if (angle % 90)
		return fail(c, DH_ERR_UNSUPPORTED,
		            "cannot hash frames turned by %d degrees (ffmpeg turns them with its rotate filter)",
		            angle);
	const AVPixFmtDescriptor *d = av_pix_fmt_desc_get(f->format);
	if (!d || (d->flags & (AV_PIX_FMT_FLAG_HWACCEL | AV_PIX_FMT_FLAG_PAL | AV_PIX_FMT_FLAG_BITSTREAM)))
		return fail(c, DH_ERR_UNSUPPORTED, "cannot turn pixel format %s", name ? name : "none");
	if ((c->turn & TURN_TRANSPOSES) && d->log2_chroma_w != d->log2_chroma_h)
		return fail(c, DH_ERR_UNSUPPORTED,
		            "cannot hash %s frames turned by %d degrees (ffmpeg converts them to another "
		            "pixel format to transpose them)",
		            name, angle);
	if (!c->turned && !(c->turned = av_frame_alloc()))
		return fail(c, DH_ERR_LIMIT, "out of memory");
	AVFrame *t = c->turned;
	av_frame_unref(t);
	t->format = f->format;
	t->width = c->turn & TURN_TRANSPOSES ? f->height : f->width;
	t->height = c->turn & TURN_TRANSPOSES ? f->width : f->height;
	if (av_frame_get_buffer(t, 0) < 0)
		return fail(c, DH_ERR_LIMIT, "out of memory");
	int steps[4];
	av_image_fill_max_pixsteps(steps, NULL, d);
	// turn_plane moves whole pixels of steps[p] bytes: a packed format
	// whose pixel is smaller than its largest step (4:2:2 packed as
	// YUYV, 4 bytes per 2 pixels) would be read past its rows.
	for (int i = 0; i < d->nb_components; i++)
		if (d->comp[i].step != steps[d->comp[i].plane])
			return fail(c, DH_ERR_UNSUPPORTED, "cannot turn pixel format %s", name);
	int planes = av_pix_fmt_count_planes(f->format);
	for (int p = 0; p < planes; p++) {
		int sub = p == 1 || p == 2;
		int w = sub ? AV_CEIL_RSHIFT(f->width, d->log2_chroma_w) : f->width;
		int h = sub ? AV_CEIL_RSHIFT(f->height, d->log2_chroma_h) : f->height;
		turn_plane(t->data[p], t->linesize[p], f->data[p], f->linesize[p], w, h, steps[p], c->turn);
	}
	*out = t;
	return 0;
}

int dh_decode_all(const uint8_t *data, int64_t len, const dh_config *cfg, dh_frame_hash **hashes,
                  int64_t *count, dh_stats *st) {
	dh_ctx c;
	AVFrame *f = NULL;
	int64_t cap = 0;
	*count = 0;
	if (hashes)
		*hashes = NULL;
	int ret = ctx_open(&c, data, len, cfg, st, 1);
	if (ret)
		goto out;
	f = av_frame_alloc();
	if (!f) {
		ret = fail(&c, DH_ERR_LIMIT, "out of memory");
		goto out;
	}
	for (;;) {
		ret = next_frame(&c, f);
		if (ret == AVERROR_EOF)
			break;
		if (ret)
			goto out;
		if (hashes) {
			if (*count >= cap) {
				cap = cap ? 2 * cap : 256;
				dh_frame_hash *grown = av_realloc_array(*hashes, cap, sizeof **hashes);
				if (!grown) {
					ret = fail(&c, DH_ERR_LIMIT, "out of memory");
					goto out;
				}
				*hashes = grown;
			}
			dh_frame_hash *h = &(*hashes)[*count];
			AVFrame *up;
			if ((ret = turn_frame(&c, f, &up)))
				goto out;
			h->pts = frame_pts(f);
			h->width = up->width;
			h->height = up->height;
			if (hash_frame(up, h->md5)) {
				ret = fail(&c, DH_ERR_UNSUPPORTED, "cannot hash pixel format %s",
				           av_get_pix_fmt_name(f->format));
				goto out;
			}
		}
		av_strlcpy(st->pix_fmt, av_get_pix_fmt_name(f->format) ? av_get_pix_fmt_name(f->format) : "",
		           sizeof st->pix_fmt);
		(*count)++;
		av_frame_unref(f);
	}
	ret = 0;
	if (*count == 0)
		ret = c.last_err ? map_err(&c, (int)c.last_err, "decode")
		                 : fail(&c, DH_ERR_CORRUPT, "no frame decoded");
out:
	av_frame_free(&f);
	ctx_free(&c);
	return ret;
}

int dh_packets(const uint8_t *data, int64_t len, const dh_config *cfg, dh_packet *pkts, int64_t cap,
               int64_t *count, dh_stats *st) {
	dh_ctx c;
	*count = 0;
	int ret = ctx_open(&c, data, len, cfg, st, 0);
	if (ret)
		goto out;
	for (;;) {
		ret = read_packet(&c);
		if (ret == AVERROR_EOF)
			break;
		if (ret)
			goto out;
		if (*count < cap)
			pkts[*count] = (dh_packet){.pts = c.pkt->pts,
			                           .dts = c.pkt->dts,
			                           .size = c.pkt->size,
			                           .key = !!(c.pkt->flags & AV_PKT_FLAG_KEY)};
		(*count)++;
		av_packet_unref(c.pkt);
	}
	ret = 0;
out:
	ctx_free(&c);
	return ret;
}
