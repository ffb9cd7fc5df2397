package av

/*
#include <libavformat/avformat.h>
#include <libavcodec/avcodec.h>

// dh_vfw_codec is the name of the codec FFmpeg's Matroska demuxer takes a
// V_MS/VFW/FOURCC track's compression fourcc for: the RIFF (AVI) video
// tags, then QuickTime's, each matched as it is and then upper-cased; NULL
// when neither names one.
static const char *dh_vfw_codec(uint32_t tag) {
	const struct AVCodecTag *tags[] = {avformat_get_riff_video_tags(), avformat_get_mov_video_tags(), NULL};
	enum AVCodecID id = av_codec_get_id(tags, tag);
	return id == AV_CODEC_ID_NONE ? NULL : avcodec_get_name(id);
}
*/
import "C"

// VfWCodec returns the FFmpeg codec name ("h264", "ffv1", "wmv2", ...)
// that FFmpeg 5.1 reads a Matroska V_MS/VFW/FOURCC track's codec as, from
// the compression fourcc of its BITMAPINFOHEADER (the little-endian
// biCompression field), or "" when FFmpeg knows no codec by it. Such
// tracks hold what an AVI held: FFV1, WMV, MPEG-4 Part 2, and any codec
// the muxer had no Matroska codec ID for.
func VfWCodec(fourcc uint32) string {
	name := C.dh_vfw_codec(C.uint32_t(fourcc))
	if name == nil {
		return ""
	}
	return C.GoString(name)
}
