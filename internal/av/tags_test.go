package av

import (
	"encoding/binary"
	"testing"
)

// TestVfWCodec checks the fourccs a V_MS/VFW/FOURCC track names against
// the codecs FFmpeg reads them as: AVI's tags for the codecs datahelix
// decodes and for common others, a QuickTime-only tag (hvc1, found after
// AVI's), the upper-cased match, uncompressed RGB, and tags FFmpeg
// 5.1 does not know (HEVC and H265 among them: AVI has no HEVC tag).
func TestVfWCodec(t *testing.T) {
	for tag, want := range map[string]string{
		"H264": "h264", "avc1": "h264", "X264": "h264", "H265": "", "HEVC": "", "hvc1": "hevc", "VP80": "vp8", "VP90": "vp9", "AV01": "av1",
		"FFV1": "ffv1", "WMV2": "wmv2", "XVID": "mpeg4", "xvid": "mpeg4", "MP42": "msmpeg4v2", "MJPG": "mjpeg", "MPNG": "png",
		"ZZZZ":             "",
		"\x00\x00\x00\x00": "rawvideo", // BI_RGB: uncompressed
	} {
		if got := VfWCodec(binary.LittleEndian.Uint32([]byte(tag))); got != want {
			t.Errorf("VfWCodec(%q) = %q, want %q", tag, got, want)
		}
	}
}
