// rgb.c holds package av's operations on packed RGB24 pictures: the
// scaling of a decoded image (a crop of it, in place) to the output size,
// and the horizontal flip of a transform.
#include "av.h"

#include <libavutil/avstring.h>
#include <libswscale/swscale.h>
#include <string.h>

int dh_scale_rgb(const uint8_t *src, int32_t stride, int32_t sw, int32_t sh, uint8_t *dst, int32_t dw,
                 int32_t dh, int32_t dst_stride, int32_t flip, char *msg, int32_t msg_len) {
	if (sw <= 0 || sh <= 0 || dw <= 0 || dh <= 0 || stride < sw * 3 || dst_stride < dw * 3) {
		av_strlcpy(msg, "bad picture size", msg_len);
		return DH_ERR_ARG;
	}
	struct SwsContext *s = sws_getContext(sw, sh, AV_PIX_FMT_RGB24, dw, dh, AV_PIX_FMT_RGB24, SWS_BILINEAR,
	                                      NULL, NULL, NULL);
	if (!s) {
		av_strlcpy(msg, "cannot scale RGB24", msg_len);
		return DH_ERR_LIMIT;
	}
	const uint8_t *in[4] = {src, NULL, NULL, NULL};
	int ils[4] = {stride, 0, 0, 0};
	uint8_t *out[4] = {dst, NULL, NULL, NULL};
	int ols[4] = {dst_stride, 0, 0, 0};
	sws_scale(s, in, ils, 0, sh, out, ols);
	sws_freeContext(s);
	if (flip)
		dh_flip_rgb(dst, dw, dh, dst_stride);
	return DH_OK;
}

void dh_flip_rgb(uint8_t *p, int32_t w, int32_t h, int64_t stride) {
	for (int32_t y = 0; y < h; y++) {
		uint8_t *a = p + (ptrdiff_t)y * stride, *b = a + (ptrdiff_t)(w - 1) * 3;
		for (; a < b; a += 3, b -= 3) {
			uint8_t t[3];
			memcpy(t, a, 3);
			memcpy(a, b, 3);
			memcpy(b, t, 3);
		}
	}
}
