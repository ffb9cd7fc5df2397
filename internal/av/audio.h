// audio.h declares the audio half of package av (audio.c): the best audio
// stream of an in-memory file, probed or decoded to float PCM at a chosen
// rate and channel count with libswresample, under the limits of a
// dh_config (av.h). Like av.c, each entry point is one cgo call that frees
// everything it used.
#ifndef DATAHELIX_AUDIO_H
#define DATAHELIX_AUDIO_H

#include "av.h"

// DH_ERR_NO_AUDIO: the file opened but has no audio stream.
enum { DH_ERR_NO_AUDIO = -7 };

// dh_audio_stats reports what an audio call found and did.
typedef struct dh_audio_stats {
	int64_t frames;        // audio frames output by the decoder
	int64_t packets;       // packets sent to the decoder
	int64_t errors;        // packets the decoder rejected (skipped)
	int64_t written;       // output samples (per channel) taken from the stream; the rest are zeros
	int64_t duration;      // stream duration in its time base, else the file's in µs (tb 1/1000000); 0 = unknown
	int64_t start_time;    // stream start time in its time base (0 when unknown)
	int32_t tb_num, tb_den; // time base of duration and start_time
	int32_t sample_rate;   // of the stream
	int32_t channels;      // of the stream
	int32_t has_video;     // the file also has a video stream (not cover art)
	int32_t read_error;    // the demuxer stopped on an error, not at a clean end
	char codec[32];        // codec name (avcodec_get_name), then the decoder's name
	char format[32];       // demuxer short name
	char msg[256];         // detail of the failure
} dh_audio_stats;

// dh_audio_probe opens the file and describes its best audio stream
// without decoding.
int dh_audio_probe(const uint8_t *data, int64_t len, const dh_config *cfg, dh_audio_stats *st);

// dh_decode_audio decodes the best audio stream and writes output samples
// first .. first+count-1 at rate Hz (output sample k is the signal at time
// k/rate on the file's timeline) as planar float: channel c's samples at
// dst + c*count. dst (channels*count floats) is zeroed first, so what the
// stream does not cover stays silent.
int dh_decode_audio(const uint8_t *data, int64_t len, const dh_config *cfg, int64_t first,
                    int64_t count, int32_t rate, int32_t channels, float *dst, dh_audio_stats *st);

#endif
