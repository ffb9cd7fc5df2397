// audio.c is the audio half of package av: the best audio stream of an
// in-memory file, demuxed through a custom AVIOContext as av.c does, under
// the same dh_config limits (allow lists, probe size, packets and frames
// per call, a deadline and a cancel flag polled by the interrupt callback),
// decoded and resampled with libswresample to planar float at the rate and
// channel count asked for.
//
// It keeps its own small copies of av.c's I/O helpers so that the two
// files change independently. It never sets AVCodecContext.opaque: av.c's
// log callback follows that field back to a video call (see av.go).
#include "audio.h"

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/avstring.h>
#include <libavutil/bprint.h>
#include <libavutil/channel_layout.h>
#include <libavutil/samplefmt.h>
#include <libswresample/swresample.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define AU_IO_BUF_SIZE 32768
#define AU_MAX_DECODE_ERRORS 32
#define AU_MAX_RATE 768000       // input or output sample rate
#define AU_MAX_CHANNELS 64       // input channels (FFmpeg's own bound is similar)
#define AU_MAX_FRAME (1 << 20)   // samples in one decoded frame
#define AU_SEEK_MIN_S 1.0        // seek only to a span starting later than this
#define AU_PREROLL_S 0.25        // decode this much before the span after a seek
#define AU_PACKET_PROBE 32768    // probesize after the header (see au_open)

typedef struct au_ctx {
	const dh_config *cfg;
	dh_audio_stats *st;
	int64_t deadline; // CLOCK_MONOTONIC ns, 0 = none
	int interrupted;  // DH_ERR_TIMEOUT or DH_ERR_CANCELED once hit
	const uint8_t *data;
	int64_t len, pos;
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

static int64_t au_now_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int au_check_interrupt(au_ctx *c) {
	if (c->interrupted)
		return 1;
	if (c->cfg->cancel && __atomic_load_n(c->cfg->cancel, __ATOMIC_RELAXED)) {
		c->interrupted = DH_ERR_CANCELED;
		return 1;
	}
	if (c->deadline && au_now_ns() > c->deadline) {
		c->interrupted = DH_ERR_TIMEOUT;
		return 1;
	}
	return 0;
}

static int au_interrupt_cb(void *opaque) { return au_check_interrupt(opaque); }

static int au_read(void *opaque, uint8_t *buf, int size) {
	au_ctx *c = opaque;
	if (au_check_interrupt(c))
		return AVERROR_EXIT;
	int64_t left = c->len - c->pos;
	if (left <= 0)
		return AVERROR_EOF;
	if (size > left)
		size = (int)left;
	memcpy(buf, c->data + c->pos, size);
	c->pos += size;
	return size;
}

static int64_t au_seek(void *opaque, int64_t off, int whence) {
	au_ctx *c = opaque;
	switch (whence & ~AVSEEK_FORCE) {
	case AVSEEK_SIZE:
		return c->len;
	case SEEK_SET:
		break;
	case SEEK_CUR:
		off += c->pos;
		break;
	case SEEK_END:
		off += c->len;
		break;
	default:
		return AVERROR(EINVAL);
	}
	if (off < 0 || off > c->len)
		return AVERROR(EINVAL);
	c->pos = off;
	return off;
}

// au_fail records a message (the first one wins) and returns code.
static int au_fail(au_ctx *c, int code, const char *fmt, ...) {
	if (c->st->msg[0] == 0) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(c->st->msg, sizeof c->st->msg, fmt, ap);
		va_end(ap);
	}
	return code;
}

// au_map_err turns an FFmpeg error from step `what` into a DH_ERR_* code.
static int au_map_err(au_ctx *c, int err, const char *what) {
	if (c->interrupted || err == AVERROR_EXIT) {
		if (!c->interrupted)
			c->interrupted = DH_ERR_TIMEOUT;
		return au_fail(c, c->interrupted, "%s: %s", what,
		               c->interrupted == DH_ERR_CANCELED ? "canceled" : "deadline exceeded");
	}
	char buf[AV_ERROR_MAX_STRING_SIZE];
	av_strerror(err, buf, sizeof buf);
	switch (err) {
	case AVERROR(ENOMEM):
		return au_fail(c, DH_ERR_LIMIT, "%s: %s", what, buf);
	case AVERROR_DECODER_NOT_FOUND:
	case AVERROR_DEMUXER_NOT_FOUND:
	case AVERROR_PATCHWELCOME:
	case AVERROR(ENOSYS):
		return au_fail(c, DH_ERR_UNSUPPORTED, "%s: %s", what, buf);
	}
	return au_fail(c, DH_ERR_CORRUPT, "%s: %s", what, buf);
}

// au_probe identifies the container from the first bytes, growing the
// window as av_probe_input_buffer2 does, and checks the allow list.
static int au_probe(au_ctx *c, const AVInputFormat **fmt) {
	int64_t limit = c->cfg->probe_size;
	if (limit > c->len)
		limit = c->len;
	*fmt = NULL;
	for (int64_t n = limit < 2048 ? limit : 2048;; n *= 2) {
		if (n > limit)
			n = limit;
		uint8_t *buf = av_mallocz(n + AVPROBE_PADDING_SIZE);
		if (!buf)
			return au_fail(c, DH_ERR_LIMIT, "probe: out of memory");
		memcpy(buf, c->data, n);
		AVProbeData pd = {.filename = "", .buf = buf, .buf_size = (int)n};
		int score = 0;
		*fmt = av_probe_input_format3(&pd, 1, &score);
		av_free(buf);
		if ((*fmt && score > AVPROBE_SCORE_RETRY) || n >= limit)
			break;
	}
	if (!*fmt)
		return au_fail(c, DH_ERR_CORRUPT, "probe: unrecognised container in %lld bytes", (long long)limit);
	if (av_match_list((*fmt)->name, c->cfg->formats, ',') <= 0)
		return au_fail(c, DH_ERR_UNSUPPORTED, "container %s is not allowed (allowed: %s)", (*fmt)->name,
		               c->cfg->formats);
	return 0;
}

// decoder_names returns the comma-separated names of the decoders of the
// codecs in list (codec names such as mp3, whose decoder is mp3float),
// for a codec_whitelist, which avcodec_open2 matches against decoder
// names; av_free it.
static char *decoder_names(const char *list) {
	AVBPrint b;
	av_bprint_init(&b, 0, AV_BPRINT_SIZE_UNLIMITED);
	void *it = NULL;
	const AVCodec *d;
	while ((d = av_codec_iterate(&it))) {
		if (!av_codec_is_decoder(d) || av_match_list(avcodec_get_name(d->id), list, ',') <= 0)
			continue;
		av_bprintf(&b, "%s%s", b.len ? "," : "", d->name);
	}
	char *s = NULL;
	if (!av_bprint_is_complete(&b) || av_bprint_finalize(&b, &s) < 0)
		return NULL;
	return s;
}

static void au_free(au_ctx *c) {
	if (c->scratch)
		av_freep(&c->scratch[0]);
	av_freep(&c->scratch);
	swr_free(&c->swr);
	av_channel_layout_uninit(&c->swr_layout);
	av_frame_free(&c->frame);
	av_packet_free(&c->pkt);
	avcodec_free_context(&c->cc);
	avformat_close_input(&c->fc);
	if (c->pb) {
		av_freep(&c->pb->buffer);
		avio_context_free(&c->pb);
	}
}

// au_open opens the file and finds its best audio stream; with
// need_decoder it opens the stream's decoder too.
static int au_open(au_ctx *c, const uint8_t *data, int64_t len, const dh_config *cfg,
                   dh_audio_stats *st, int need_decoder) {
	memset(c, 0, sizeof *c);
	memset(st, 0, sizeof *st);
	c->cfg = cfg;
	c->st = st;
	c->data = data;
	c->len = len;
	c->out_pos = INT64_MIN;
	if (cfg->timeout_ns > 0)
		c->deadline = au_now_ns() + cfg->timeout_ns;
	if (len <= 0)
		return au_fail(c, DH_ERR_CORRUPT, "empty input");

	const AVInputFormat *fmt;
	int ret = au_probe(c, &fmt);
	if (ret)
		return ret;
	uint8_t *buf = av_malloc(AU_IO_BUF_SIZE);
	if (!buf)
		return au_fail(c, DH_ERR_LIMIT, "open: out of memory");
	c->pb = avio_alloc_context(buf, AU_IO_BUF_SIZE, 0, c, au_read, NULL, au_seek);
	if (!c->pb) {
		av_free(buf);
		return au_fail(c, DH_ERR_LIMIT, "open: out of memory");
	}
	c->fc = avformat_alloc_context();
	if (!c->fc)
		return au_fail(c, DH_ERR_LIMIT, "open: out of memory");
	c->fc->pb = c->pb;
	c->fc->interrupt_callback.callback = au_interrupt_cb;
	c->fc->interrupt_callback.opaque = c;

	char *decoders = decoder_names(cfg->codecs);
	if (!decoders)
		return au_fail(c, DH_ERR_LIMIT, "open: out of memory");
	AVDictionary *o = NULL;
	av_dict_set(&o, "format_whitelist", cfg->formats, 0);
	av_dict_set(&o, "codec_whitelist", decoders[0] ? decoders : "none", 0);
	av_dict_set(&o, "protocol_whitelist", "none", 0); // no nested opens
	av_dict_set_int(&o, "probesize", cfg->probe_size, 0);
	av_dict_set_int(&o, "analyzeduration", cfg->analyze_us, 0);
	av_dict_set_int(&o, "max_streams", 16, 0);
	ret = avformat_open_input(&c->fc, NULL, fmt, &o);
	av_dict_free(&o);
	if (ret < 0) {
		av_free(decoders);
		return au_map_err(c, ret, "open");
	}
	av_strlcpy(st->format, c->fc->iformat->name, sizeof st->format);
	int any = 0, known = 1, timed = c->fc->duration > 0;
	for (unsigned i = 0; i < c->fc->nb_streams; i++) {
		AVCodecParameters *p = c->fc->streams[i]->codecpar;
		// Cover art (an attached picture) does not make a file a clip.
		if (p->codec_type == AVMEDIA_TYPE_VIDEO &&
		    !(c->fc->streams[i]->disposition & AV_DISPOSITION_ATTACHED_PIC))
			st->has_video = 1;
		if (p->codec_type != AVMEDIA_TYPE_AUDIO)
			continue;
		any = 1;
		known &= p->sample_rate > 0 && p->ch_layout.nb_channels > 0;
		timed |= c->fc->streams[i]->duration > 0 && c->fc->streams[i]->duration != AV_NOPTS_VALUE;
	}
	if (au_check_interrupt(c)) {
		av_free(decoders);
		return au_map_err(c, AVERROR_EXIT, "open");
	}
	if (!any) {
		av_free(decoders);
		return au_fail(c, DH_ERR_NO_AUDIO, "no audio stream");
	}
	if (!known || (!need_decoder && !timed)) {
		// Raw streams (mp3, ADTS AAC, FLAC) give their parameters, or the
		// duration a probe reports, only to avformat_find_stream_info, which decodes a few
		// frames with the allowed decoders, one thread each, and only
		// the audio streams.
		AVDictionary **opts = av_calloc(c->fc->nb_streams, sizeof *opts);
		if (!opts) {
			av_free(decoders);
			return au_fail(c, DH_ERR_LIMIT, "open: out of memory");
		}
		for (unsigned i = 0; i < c->fc->nb_streams; i++) {
			av_dict_set_int(&opts[i], "threads", 1, 0);
			av_dict_set(&opts[i], "codec_whitelist", decoders[0] ? decoders : "none", 0);
			if (c->fc->streams[i]->codecpar->codec_type != AVMEDIA_TYPE_AUDIO)
				c->fc->streams[i]->discard = AVDISCARD_ALL;
		}
		ret = avformat_find_stream_info(c->fc, opts);
		for (unsigned i = 0; i < c->fc->nb_streams; i++)
			av_dict_free(&opts[i]);
		av_free(opts);
		if (ret < 0) {
			av_free(decoders);
			return au_map_err(c, ret, "find stream info");
		}
	}
	ret = av_find_best_stream(c->fc, AVMEDIA_TYPE_AUDIO, -1, -1, NULL, 0);
	if (ret < 0 || au_check_interrupt(c)) {
		av_free(decoders);
		if (c->interrupted)
			return au_map_err(c, AVERROR_EXIT, "find stream info");
		return au_fail(c, DH_ERR_CORRUPT, "no audio stream with a sample rate and channels");
	}
	c->si = ret;
	c->as = c->fc->streams[c->si];
	AVCodecParameters *par = c->as->codecpar;
	av_free(decoders);
	for (unsigned i = 0; i < c->fc->nb_streams; i++)
		c->fc->streams[i]->discard = (int)i == c->si ? AVDISCARD_DEFAULT : AVDISCARD_ALL;
	// The WAV demuxer has FFmpeg probe the packets of a 16-bit PCM stream
	// for compressed audio inside it (DTS), probing all it read so far
	// again at every packet up to probesize: with the 1 MiB of the header
	// probe, a quadratic cost that made decoding a second of WAV after a
	// seek take 50 ms. Packets need far less.
	if (c->fc->probesize > AU_PACKET_PROBE)
		c->fc->probesize = AU_PACKET_PROBE;

	const char *cname = avcodec_get_name(par->codec_id);
	av_strlcpy(st->codec, cname, sizeof st->codec);
	st->sample_rate = par->sample_rate;
	st->channels = par->ch_layout.nb_channels;
	st->tb_num = c->as->time_base.num;
	st->tb_den = c->as->time_base.den;
	if (c->as->time_base.num <= 0 || c->as->time_base.den <= 0)
		return au_fail(c, DH_ERR_CORRUPT, "invalid audio time base");
	if (c->as->duration > 0 && c->as->duration != AV_NOPTS_VALUE) {
		st->duration = c->as->duration;
	} else if (c->fc->duration > 0 && c->fc->duration != AV_NOPTS_VALUE) {
		st->duration = c->fc->duration;
		st->tb_num = 1;
		st->tb_den = AV_TIME_BASE;
	}
	if (c->as->start_time != AV_NOPTS_VALUE)
		st->start_time = av_rescale_q(c->as->start_time, c->as->time_base,
		                              (AVRational){st->tb_num, st->tb_den});
	if (av_match_list(cname, cfg->codecs, ',') <= 0)
		return au_fail(c, DH_ERR_UNSUPPORTED, "audio codec %s is not allowed (allowed: %s)", cname,
		               cfg->codecs);
	if (par->sample_rate > AU_MAX_RATE || par->ch_layout.nb_channels > AU_MAX_CHANNELS)
		return au_fail(c, DH_ERR_LIMIT, "audio of %d Hz and %d channels exceeds %d Hz or %d channels",
		               par->sample_rate, par->ch_layout.nb_channels, AU_MAX_RATE, AU_MAX_CHANNELS);
	const AVCodec *dec = avcodec_find_decoder(par->codec_id);
	if (!dec)
		return au_fail(c, DH_ERR_UNSUPPORTED, "no decoder for audio codec %s", cname);
	if (!need_decoder)
		return 0;

	c->pkt = av_packet_alloc();
	c->frame = av_frame_alloc();
	c->cc = avcodec_alloc_context3(dec);
	if (!c->pkt || !c->frame || !c->cc)
		return au_fail(c, DH_ERR_LIMIT, "open: out of memory");
	ret = avcodec_parameters_to_context(c->cc, par);
	if (ret < 0)
		return au_map_err(c, ret, "codec parameters");
	c->cc->pkt_timebase = c->as->time_base;
	AVDictionary *co = NULL;
	av_dict_set_int(&co, "threads", 1, 0);
	av_dict_set(&co, "codec_whitelist", dec->name, 0);
	ret = avcodec_open2(c->cc, dec, &co);
	av_dict_free(&co);
	if (ret < 0)
		return au_map_err(c, ret, "open decoder");
	av_strlcpy(st->codec, dec->name, sizeof st->codec);
	return 0;
}

int dh_audio_probe(const uint8_t *data, int64_t len, const dh_config *cfg, dh_audio_stats *st) {
	au_ctx c;
	int ret = au_open(&c, data, len, cfg, st, 0);
	au_free(&c);
	return ret;
}

// au_read_packet reads the next packet of the audio stream into c->pkt:
// 0, AVERROR_EOF at the end (also after a read error, recorded in
// st->read_error), or a DH_ERR_* code.
static int au_read_packet(au_ctx *c) {
	for (;;) {
		if (au_check_interrupt(c))
			return au_map_err(c, AVERROR_EXIT, "read");
		if (c->demux_done)
			return AVERROR_EOF;
		int ret = av_read_frame(c->fc, c->pkt);
		if (ret < 0) {
			if (c->interrupted || ret == AVERROR_EXIT || ret == AVERROR(ENOMEM))
				return au_map_err(c, ret, "read");
			c->demux_done = 1;
			if (ret != AVERROR_EOF)
				c->st->read_error = 1;
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
			return au_fail(c, DH_ERR_LIMIT, "more than %lld audio packets read",
			               (long long)c->cfg->max_packets);
		}
		return 0;
	}
}

static int au_decoder_error(au_ctx *c, int err) {
	if (c->interrupted || err == AVERROR_EXIT || err == AVERROR(ENOMEM))
		return au_map_err(c, err, "decode audio");
	c->last_err = err;
	if (++c->st->errors > AU_MAX_DECODE_ERRORS)
		return au_map_err(c, err, "decode audio: too many errors");
	return 0;
}

// au_next_frame returns the decoder's next frame in c->frame: 0,
// AVERROR_EOF when the stream is drained, or a DH_ERR_* code.
static int au_next_frame(au_ctx *c) {
	for (;;) {
		int ret = avcodec_receive_frame(c->cc, c->frame);
		if (ret == 0) {
			if (++c->st->frames > c->cfg->max_frames) {
				av_frame_unref(c->frame);
				return au_fail(c, DH_ERR_LIMIT, "more than %lld audio frames decoded",
				               (long long)c->cfg->max_frames);
			}
			return 0;
		}
		if (ret == AVERROR_EOF)
			return AVERROR_EOF;
		if (ret != AVERROR(EAGAIN)) {
			if ((ret = au_decoder_error(c, ret)))
				return ret;
			continue;
		}
		if (c->eof_sent)
			return AVERROR_EOF;
		ret = au_read_packet(c);
		if (ret == AVERROR_EOF) {
			c->eof_sent = 1;
			avcodec_send_packet(c->cc, NULL);
			continue;
		}
		if (ret)
			return ret;
		ret = avcodec_send_packet(c->cc, c->pkt);
		av_packet_unref(c->pkt);
		if (ret < 0 && (ret = au_decoder_error(c, ret)))
			return ret;
	}
}

// au_emit copies n planar samples of c->scratch, the resampler's output
// starting at output sample c->out_pos, into the part of dst they cover
// (samples first .. first+count-1), and advances out_pos.
static void au_emit(au_ctx *c, int n, int channels, int64_t first, int64_t count, float *dst) {
	if (n <= 0)
		return;
	int64_t from = c->out_pos, to = c->out_pos + n;
	int64_t lo = from > first ? from : first, hi = to < first + count ? to : first + count;
	if (lo < hi) {
		for (int ch = 0; ch < channels; ch++)
			memcpy(dst + ch * count + (lo - first), c->scratch[ch < c->swr_out ? ch : 0] + (lo - from),
			       (size_t)(hi - lo) * sizeof(float));
		c->st->written += hi - lo;
	}
	c->out_pos = to;
}

// au_grow makes c->scratch hold n samples in each of channels planes
// (the resampler's output channels, which a change of the stream's
// format may raise).
static int au_grow(au_ctx *c, int n, int channels) {
	if (n <= c->scratch_cap && channels <= c->scratch_ch)
		return 0;
	if (n < c->scratch_cap)
		n = c->scratch_cap;
	if (c->scratch)
		av_freep(&c->scratch[0]);
	av_freep(&c->scratch);
	c->scratch_cap = c->scratch_ch = 0;
	if (av_samples_alloc_array_and_samples((uint8_t ***)&c->scratch, NULL, channels, n,
	                                       AV_SAMPLE_FMT_FLTP, 0) < 0)
		return au_fail(c, DH_ERR_LIMIT, "out of memory");
	c->scratch_cap = n;
	c->scratch_ch = channels;
	return 0;
}

// au_flush drains the resampler into dst and frees it.
static int au_flush(au_ctx *c, int channels, int64_t first, int64_t count, float *dst) {
	if (!c->swr)
		return 0;
	for (;;) {
		int want = swr_get_out_samples(c->swr, 0);
		if (want <= 0)
			break;
		int ret = au_grow(c, want, c->swr_out);
		if (ret)
			return ret;
		int n = swr_convert(c->swr, (uint8_t **)c->scratch, want, NULL, 0);
		if (n <= 0)
			break;
		au_emit(c, n, channels, first, count, dst);
	}
	swr_free(&c->swr);
	return 0;
}

int dh_decode_audio(const uint8_t *data, int64_t len, const dh_config *cfg, int64_t first,
                    int64_t count, int32_t rate, int32_t channels, float *dst, dh_audio_stats *st) {
	au_ctx c;
	AVChannelLayout out_layout = {0};
	int ret = au_open(&c, data, len, cfg, st, 1);
	if (ret)
		goto out;
	if (rate <= 0 || rate > AU_MAX_RATE || channels <= 0 || channels > AU_MAX_CHANNELS || count < 0 ||
	    first < INT64_MIN / 4 || first > INT64_MAX / 4 || count > INT64_MAX / 4) {
		ret = au_fail(&c, DH_ERR_ARG, "audio output of %d Hz, %d channels, samples %lld+%lld", rate,
		              channels, (long long)first, (long long)count);
		goto out;
	}
	memset(dst, 0, (size_t)count * channels * sizeof(float));
	av_channel_layout_default(&out_layout, channels);
	// Seek near the span when it starts well into the stream; decode a
	// little before it, since a codec's first frame after a seek (an MDCT
	// codec's, without the frame before to overlap) is not exact. A
	// demuxer that cannot seek decodes from the start instead.
	double start_s = (double)first / rate;
	if (start_s > AU_SEEK_MIN_S) {
		int64_t ts = av_rescale_q((int64_t)((start_s - AU_PREROLL_S) * 1000000), AV_TIME_BASE_Q,
		                          c.as->time_base);
		if (c.as->start_time != AV_NOPTS_VALUE)
			ts = ts > c.as->start_time ? ts : c.as->start_time;
		if (av_seek_frame(c.fc, c.si, ts, AVSEEK_FLAG_BACKWARD) >= 0)
			avcodec_flush_buffers(c.cc);
		else if (c.interrupted) {
			ret = au_map_err(&c, AVERROR_EXIT, "seek");
			goto out;
		}
	}
	int64_t end = first + count;
	for (;;) {
		if (c.out_pos != INT64_MIN && c.out_pos >= end && c.swr)
			break; // the span is covered (the resampler's delay is flushed below)
		ret = au_next_frame(&c);
		if (ret == AVERROR_EOF)
			break;
		if (ret)
			goto out;
		AVFrame *f = c.frame;
		if (f->sample_rate <= 0 || f->sample_rate > AU_MAX_RATE || f->ch_layout.nb_channels <= 0 ||
		    f->ch_layout.nb_channels > AU_MAX_CHANNELS || f->nb_samples > AU_MAX_FRAME) {
			ret = au_fail(&c, DH_ERR_LIMIT, "audio frame of %d samples at %d Hz, %d channels",
			              f->nb_samples, f->sample_rate, f->ch_layout.nb_channels);
			goto out;
		}
		AVChannelLayout in_layout = {0};
		if (f->ch_layout.order == AV_CHANNEL_ORDER_UNSPEC)
			av_channel_layout_default(&in_layout, f->ch_layout.nb_channels);
		else if (av_channel_layout_copy(&in_layout, &f->ch_layout) < 0) {
			ret = au_fail(&c, DH_ERR_LIMIT, "out of memory");
			goto out;
		}
		if (c.swr && (c.swr_rate != f->sample_rate || c.swr_fmt != f->format ||
		              av_channel_layout_compare(&c.swr_layout, &in_layout))) {
			// The stream changed its format: drain the old resampler and
			// go on with a new one from this frame's time.
			if ((ret = au_flush(&c, channels, first, count, dst))) {
				av_channel_layout_uninit(&in_layout);
				goto out;
			}
		}
		if (!c.swr) {
			// Mono is copied to every output channel (au_emit); other
			// layouts go through FFmpeg's matrix to the default layout
			// of the output's channels.
			AVChannelLayout mono = AV_CHANNEL_LAYOUT_MONO;
			c.swr_out = in_layout.nb_channels == 1 ? 1 : channels;
			int err = swr_alloc_set_opts2(&c.swr, c.swr_out == 1 ? &mono : &out_layout,
			                              AV_SAMPLE_FMT_FLTP, rate, &in_layout,
			                              f->format, f->sample_rate, 0, NULL);
			if (err >= 0)
				err = swr_init(c.swr);
			if (err < 0) {
				av_channel_layout_uninit(&in_layout);
				ret = au_fail(&c, DH_ERR_UNSUPPORTED, "cannot resample %s audio of %d channels at %d Hz",
				              av_get_sample_fmt_name(f->format) ? av_get_sample_fmt_name(f->format) : "?",
				              f->ch_layout.nb_channels, f->sample_rate);
				goto out;
			}
			c.swr_rate = f->sample_rate;
			c.swr_fmt = f->format;
			av_channel_layout_uninit(&c.swr_layout);
			av_channel_layout_copy(&c.swr_layout, &in_layout);
			int64_t ts = f->pts != AV_NOPTS_VALUE ? f->pts : f->best_effort_timestamp;
			if (ts != AV_NOPTS_VALUE) {
				// Start the resampler at an input sample that falls on an
				// output sample, so that output sample k is the signal at
				// k/rate exactly, whatever frame decoding starts from:
				// feed it silence back to the last such sample before the
				// frame (less than 0.1 s of it; else round to the nearest
				// output sample). Before a stream's first frame that is
				// the silence before the stream; after a seek it falls in
				// the pre-roll, before the span.
				int64_t in_idx = av_rescale_q_rnd(ts, c.as->time_base, (AVRational){1, f->sample_rate},
				                                  AV_ROUND_NEAR_INF | AV_ROUND_PASS_MINMAX);
				int64_t period = f->sample_rate / av_gcd(f->sample_rate, rate);
				if (in_idx > INT64_MIN / 2 && in_idx < INT64_MAX / 2 && period <= f->sample_rate / 10 + 1) {
					int pad = (int)((in_idx % period + period) % period);
					c.out_pos = av_rescale(in_idx - pad, rate, f->sample_rate);
					if (pad > 0 && swr_inject_silence(c.swr, pad) < 0) {
						av_channel_layout_uninit(&in_layout);
						ret = au_fail(&c, DH_ERR_LIMIT, "out of memory");
						goto out;
					}
				} else {
					c.out_pos = av_rescale_q_rnd(ts, c.as->time_base, (AVRational){1, rate},
					                             AV_ROUND_NEAR_INF | AV_ROUND_PASS_MINMAX);
				}
			} else if (c.out_pos == INT64_MIN) {
				c.out_pos = 0;
			}
		}
		av_channel_layout_uninit(&in_layout);
		int want = swr_get_out_samples(c.swr, f->nb_samples);
		if (want < 0) {
			ret = au_fail(&c, DH_ERR_CORRUPT, "resampler delay");
			goto out;
		}
		if ((ret = au_grow(&c, want + 1, c.swr_out)))
			goto out;
		int n = swr_convert(c.swr, (uint8_t **)c.scratch, c.scratch_cap,
		                    (const uint8_t **)f->extended_data, f->nb_samples);
		av_frame_unref(f);
		if (n < 0) {
			ret = au_fail(&c, DH_ERR_CORRUPT, "resample: error %d", n);
			goto out;
		}
		au_emit(&c, n, channels, first, count, dst);
	}
	if ((ret = au_flush(&c, channels, first, count, dst)))
		goto out;
	if (st->frames == 0) {
		ret = c.last_err ? au_map_err(&c, (int)c.last_err, "decode audio")
		                 : au_fail(&c, DH_ERR_CORRUPT, "no audio frame decoded");
		goto out;
	}
	ret = 0;
out:
	av_channel_layout_uninit(&out_layout);
	au_free(&c);
	return ret;
}
