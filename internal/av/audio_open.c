// audio_open.c opens the audio stream of an in-memory file for audio.c:
// a custom AVIOContext over the bytes, the container probed and checked
// against the allow list, no nested opens, bounded probing, the deadline
// and cancel flag polled by the interrupt callback (memio.c, shared with
// av.c). It never sets AVCodecContext.opaque: av.c's log callback
// follows that field back to a video call (see av.go).
#include "audio_open.h"

#include <libavutil/avstring.h>
#include <libavutil/bprint.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define AU_IO_BUF_SIZE 32768

int au_check_interrupt(au_ctx *c) { return dh_guard_check(&c->guard); }

// au_fail records a message (the first one wins) and returns code.
int au_fail(au_ctx *c, int code, const char *fmt, ...) {
	if (c->st->msg[0] == 0) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(c->st->msg, sizeof c->st->msg, fmt, ap);
		va_end(ap);
	}
	return code;
}

// au_map_err turns an FFmpeg error from step `what` into a DH_ERR_* code.
int au_map_err(au_ctx *c, int err, const char *what) {
	if (c->guard.interrupted || err == AVERROR_EXIT) {
		if (!c->guard.interrupted)
			c->guard.interrupted = DH_ERR_TIMEOUT;
		return au_fail(c, c->guard.interrupted, "%s: %s", what,
		               c->guard.interrupted == DH_ERR_CANCELED ? "canceled" : "deadline exceeded");
	}
	char buf[AV_ERROR_MAX_STRING_SIZE];
	av_strerror(err, buf, sizeof buf);
	return au_fail(c, dh_err_code(err), "%s: %s", what, buf);
}

// au_probe identifies the container from the first bytes (dh_probe) and
// checks the allow list.
static int au_probe(au_ctx *c, const AVInputFormat **fmt) {
	int64_t limit;
	switch (dh_probe(c->io.data, c->io.len, c->cfg->probe_size, fmt, &limit)) {
	case DH_ERR_LIMIT:
		return au_fail(c, DH_ERR_LIMIT, "probe: out of memory");
	case DH_ERR_CORRUPT:
		return au_fail(c, DH_ERR_CORRUPT, "probe: unrecognised container in %lld bytes", (long long)limit);
	}
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

void au_free(au_ctx *c) {
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
int au_open(au_ctx *c, const uint8_t *data, int64_t len, const dh_config *cfg,
                   dh_audio_stats *st, int need_decoder) {
	memset(c, 0, sizeof *c);
	memset(st, 0, sizeof *st);
	c->cfg = cfg;
	c->st = st;
	dh_guard_init(&c->guard, cfg);
	c->io = (dh_mem){.data = data, .len = len, .guard = &c->guard};
	c->out_pos = INT64_MIN;
	if (len <= 0)
		return au_fail(c, DH_ERR_CORRUPT, "empty input");

	const AVInputFormat *fmt;
	int ret = au_probe(c, &fmt);
	if (ret)
		return ret;
	uint8_t *buf = av_malloc(AU_IO_BUF_SIZE);
	if (!buf)
		return au_fail(c, DH_ERR_LIMIT, "open: out of memory");
	c->pb = avio_alloc_context(buf, AU_IO_BUF_SIZE, 0, &c->io, dh_mem_read, NULL, dh_mem_seek);
	if (!c->pb) {
		av_free(buf);
		return au_fail(c, DH_ERR_LIMIT, "open: out of memory");
	}
	c->fc = avformat_alloc_context();
	if (!c->fc)
		return au_fail(c, DH_ERR_LIMIT, "open: out of memory");
	c->fc->pb = c->pb;
	c->fc->interrupt_callback.callback = dh_guard_cb;
	c->fc->interrupt_callback.opaque = &c->guard;

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
		if (c->guard.interrupted)
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

