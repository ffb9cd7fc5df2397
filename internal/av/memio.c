// memio.c: see memio.h.
#include "memio.h"

#include <string.h>
#include <time.h>

static int64_t now_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

void dh_guard_init(dh_guard *g, const dh_config *cfg) {
	g->cancel = cfg->cancel;
	g->deadline = cfg->timeout_ns > 0 ? now_ns() + cfg->timeout_ns : 0;
	g->interrupted = 0;
}

int dh_guard_check(dh_guard *g) {
	if (g->interrupted)
		return 1;
	if (g->cancel && __atomic_load_n(g->cancel, __ATOMIC_RELAXED)) {
		g->interrupted = DH_ERR_CANCELED;
		return 1;
	}
	if (g->deadline && now_ns() > g->deadline) {
		g->interrupted = DH_ERR_TIMEOUT;
		return 1;
	}
	return 0;
}

int dh_guard_cb(void *guard) { return dh_guard_check(guard); }

int dh_mem_read(void *mem, uint8_t *buf, int size) {
	dh_mem *m = mem;
	if (dh_guard_check(m->guard))
		return AVERROR_EXIT;
	int64_t left = m->len - m->pos;
	if (left <= 0)
		return AVERROR_EOF;
	if (size > left)
		size = (int)left;
	memcpy(buf, m->data + m->pos, size);
	m->pos += size;
	return size;
}

int64_t dh_mem_seek(void *mem, int64_t off, int whence) {
	dh_mem *m = mem;
	switch (whence & ~AVSEEK_FORCE) {
	case AVSEEK_SIZE:
		return m->len;
	case SEEK_SET:
		break;
	case SEEK_CUR:
		off += m->pos;
		break;
	case SEEK_END:
		off += m->len;
		break;
	default:
		return AVERROR(EINVAL);
	}
	if (off < 0 || off > m->len)
		return AVERROR(EINVAL);
	m->pos = off;
	return off;
}

int dh_err_code(int err) {
	switch (err) {
	case AVERROR(ENOMEM):
		return DH_ERR_LIMIT;
	case AVERROR_DECODER_NOT_FOUND:
	case AVERROR_DEMUXER_NOT_FOUND:
	case AVERROR_PATCHWELCOME:
	case AVERROR(ENOSYS):
		return DH_ERR_UNSUPPORTED;
	}
	return DH_ERR_CORRUPT;
}

int dh_probe(const uint8_t *data, int64_t len, int64_t probe_size, const AVInputFormat **fmt, int64_t *limit) {
	*limit = probe_size < len ? probe_size : len;
	*fmt = NULL;
	for (int64_t n = *limit < 2048 ? *limit : 2048;; n *= 2) {
		if (n > *limit)
			n = *limit;
		uint8_t *buf = av_mallocz(n + AVPROBE_PADDING_SIZE);
		if (!buf)
			return DH_ERR_LIMIT;
		memcpy(buf, data, n);
		AVProbeData pd = {.filename = "", .buf = buf, .buf_size = (int)n};
		int score = 0;
		*fmt = av_probe_input_format3(&pd, 1, &score);
		av_free(buf);
		if ((*fmt && score > AVPROBE_SCORE_RETRY) || n >= *limit)
			break;
	}
	return *fmt ? 0 : DH_ERR_CORRUPT;
}
