// memio.h is internal to package av: what its video (av.c) and audio
// (audio_open.c) halves share to read an in-memory file through FFmpeg
// under a deadline and a cancel flag, and to name FFmpeg's errors.
#ifndef DATAHELIX_MEMIO_H
#define DATAHELIX_MEMIO_H

#include "av.h"

#include <libavformat/avformat.h>

// dh_guard is a call's deadline and cancel flag, polled by FFmpeg's
// interrupt callback (dh_guard_cb) and by dh_mem's reads.
typedef struct dh_guard {
	const volatile int32_t *cancel; // the call stops when *cancel != 0 (may be NULL)
	int64_t deadline;               // CLOCK_MONOTONIC ns, 0 = none
	int interrupted;                // DH_ERR_TIMEOUT or DH_ERR_CANCELED once hit
} dh_guard;

// dh_guard_init starts cfg's call now: its cancel flag, and a deadline
// cfg->timeout_ns away (none when 0).
void dh_guard_init(dh_guard *g, const dh_config *cfg);

// dh_guard_check reports (and records) a cancelled call or a passed
// deadline; dh_guard_cb is it as an AVIOInterruptCB callback.
int dh_guard_check(dh_guard *g);
int dh_guard_cb(void *guard);

// dh_mem is an in-memory file read through an AVIOContext: dh_mem_read
// and dh_mem_seek are its callbacks, and a read fails once guard is
// interrupted.
typedef struct dh_mem {
	const uint8_t *data;
	int64_t len, pos;
	dh_guard *guard;
} dh_mem;

int dh_mem_read(void *mem, uint8_t *buf, int size);
int64_t dh_mem_seek(void *mem, int64_t off, int whence);

// dh_err_code is the DH_ERR_* class of an FFmpeg error that is not an
// interruption: LIMIT for memory, UNSUPPORTED for a missing decoder or
// demuxer or an unimplemented feature, CORRUPT for the rest.
int dh_err_code(int err);

// dh_probe identifies the container of data from its first bytes, at
// most probe_size, growing the window as av_probe_input_buffer2 does. It
// returns 0 with *fmt set, DH_ERR_LIMIT when out of memory, or
// DH_ERR_CORRUPT (*fmt NULL) when no container matches; *limit is the
// window it gave up at.
int dh_probe(const uint8_t *data, int64_t len, int64_t probe_size, const AVInputFormat **fmt, int64_t *limit);

#endif
