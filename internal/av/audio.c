// audio.c is the audio half of package av: the best audio stream of an
// in-memory file, opened by audio_open.c under the limits of a dh_config
// as av.c opens video, decoded and resampled with libswresample to
// planar float at the rate and channel count asked for, aligned to the
// output's samples and cut to the span asked for.
#include "audio_open.h"

#include <libavutil/samplefmt.h>
#include <string.h>

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
			if (c->guard.interrupted || ret == AVERROR_EXIT || ret == AVERROR(ENOMEM))
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
	if (c->guard.interrupted || err == AVERROR_EXIT || err == AVERROR(ENOMEM))
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
		else if (c.guard.interrupted) {
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
