package decoding

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/datahelix/datahelix/internal/video/videotest"
	"github.com/datahelix/datahelix/internal/webm"
)

// recordAndDecode builds s's record under lim, and decodes s under lim
// from its record under the default limits, so that the decoders' own
// checks judge it.
func recordAndDecode(t *testing.T, s *Sample, lim Limits) (recErr, decErr error) {
	t.Helper()
	_, recErr = ParseRecord(s, lim)
	rec, err := ParseRecord(s, Limits{})
	if err != nil {
		t.Fatalf("record under the default limits: %v", err)
	}
	_, decErr = NewDecoder(Options{Frames: 2, Size: 16, Limits: lim}).Decode(context.Background(), s, rec)
	return recErr, decErr
}

// wantRefused checks that err is a *SampleError of kind naming member
// and holding every one of words.
func wantRefused(t *testing.T, what string, err, kind error, member string, words ...string) {
	t.Helper()
	var se *SampleError
	if !errors.Is(err, kind) || !errors.As(err, &se) || se.Member != member {
		t.Errorf("%s: %v; want %v naming member %q", what, err, kind, member)
		return
	}
	for _, w := range words {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: %q does not say %q", what, err, w)
		}
	}
}

// TestRecordRefusesCodecDecodingRefuses checks that a clip of a codec
// decoding refuses (MPEG-2 in an MP4, MPEG-4 Part 2 in a Matroska file)
// fails when its record is built, naming the member and the codec, rather
// than being costed, planned and moved, then dropped at every draw; and
// that the codecs decoding allows still pass.
func TestRecordRefusesCodecDecodingRefuses(t *testing.T) {
	mkv := videotest.Read(t, "h264.mkv")
	asp := bytes.Replace(mkv, []byte("V_MPEG4/ISO/AVC"), []byte("V_MPEG4/ISO/ASP"), 1)
	if bytes.Equal(asp, mkv) {
		t.Fatal("h264.mkv has no V_MPEG4/ISO/AVC codec ID")
	}
	for _, c := range []struct {
		ext   string
		data  []byte
		codec string
	}{
		{"mp4", videotest.Read(t, "refused/mpeg2_mp4v.mp4"), "mpeg2video"},
		{"mkv", asp, "mpeg4"},
	} {
		s := decSample("clip", map[string][]byte{c.ext: c.data, "txt": []byte("a caption")})
		_, err := ParseRecord(s, Limits{})
		wantRefused(t, "record of "+c.codec, err, ErrUnsupported, "clip."+c.ext, "video codec "+c.codec, "h264, hevc, vp9, vp8, av1")
		// With the codec allowed the record passes, and FFmpeg, asked
		// with the default list, refuses it by the same name.
		rec, err := ParseRecord(s, Limits{Codecs: DefaultLimits().Codecs + "," + c.codec})
		if err != nil {
			t.Fatalf("record of %s with the codec allowed: %v", c.codec, err)
		}
		_, err = NewDecoder(Options{Frames: 2, Size: 16}).Decode(context.Background(), s, rec)
		wantRefused(t, "decode of "+c.codec, err, ErrUnsupported, "clip."+c.ext, "codec "+c.codec)
	}
	for _, name := range []string{"h264.mkv", "hevc.mp4", "av1.mp4"} {
		s := decSample("clip", map[string][]byte{name[strings.LastIndexByte(name, '.')+1:]: videotest.Read(t, name)})
		if _, err := ParseRecord(s, Limits{}); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestRecordRefusesOverPixelLimits checks that a clip or an image beyond
// the pixel limits fails when its record is built with ErrLimit, naming
// the member, exactly where decoding fails: at the limit both pass, one
// pixel under it both fail. Images beside a clip are not decoded and not
// checked.
func TestRecordRefusesOverPixelLimits(t *testing.T) {
	clip := videotest.Read(t, "h264.mkv")
	v, err := webm.Parse(clip)
	if err != nil {
		t.Fatal(err)
	}
	img := readImage(t, "y420.jpg")
	info, err := parseImageHeader(img)
	if err != nil {
		t.Fatal(err)
	}
	video := decSample("clip", map[string][]byte{"mkv": clip, "jpg": img})
	image := decSample("pic", map[string][]byte{"jpg": img, "txt": []byte("a caption")})
	vpx, ipx := int64(v.Width)*int64(v.Height), int64(info.Width)*int64(info.Height)

	for _, c := range []struct {
		what   string
		s      *Sample
		member string
		at     Limits // exactly the sample's pixels
		under  Limits // one pixel fewer
		words  []string
	}{
		{"clip", video, "clip.mkv", Limits{MaxPixels: vpx, MaxImagePixels: 1}, Limits{MaxPixels: vpx - 1}, []string{"picture", "exceeds"}},
		{"image", image, "pic.jpg", Limits{MaxImagePixels: ipx}, Limits{MaxImagePixels: ipx - 1}, []string{"jpeg image", "exceeds"}},
	} {
		recErr, decErr := recordAndDecode(t, c.s, c.at)
		if recErr != nil || decErr != nil {
			t.Errorf("%s at the limit: record %v, decode %v; want both to pass", c.what, recErr, decErr)
		}
		recErr, decErr = recordAndDecode(t, c.s, c.under)
		wantRefused(t, c.what+" record over the limit", recErr, ErrLimit, c.member, c.words...)
		wantRefused(t, c.what+" decode over the limit", decErr, ErrLimit, c.member)
	}
}

// TestRecordRefusesTooManyImages checks that a document of more images
// than MaxImages fails when its record is built, as decoding fails it,
// and that one at the limit passes both.
func TestRecordRefusesTooManyImages(t *testing.T) {
	img := readImage(t, "y420.jpg")
	doc := decSample("doc", map[string][]byte{"0.txt": []byte("one"), "1.jpg": img, "2.txt": []byte("two"), "3.jpg": img, "4.jpg": img})
	recErr, decErr := recordAndDecode(t, doc, Limits{MaxImages: 3})
	if recErr != nil || decErr != nil {
		t.Errorf("3 images, limit 3: record %v, decode %v; want both to pass", recErr, decErr)
	}
	recErr, decErr = recordAndDecode(t, doc, Limits{MaxImages: 2})
	wantRefused(t, "record of 3 images, limit 2", recErr, ErrLimit, "", "3 images, limit 2")
	wantRefused(t, "decode of 3 images, limit 2", decErr, ErrLimit, "", "3 images, limit 2")
}

// TestRecordNamesVfWCodec checks Matroska tracks in the AVI compatibility
// mode (V_MS/VFW/FOURCC, which FFmpeg's muxer writes for FFV1, WMV,
// MS-MPEG-4 and others) and V_MPEG4/MS/V3: the record names the codec as
// ffprobe does (it said unknown), so that one decoding refuses is refused
// when the record is built. The FFV1 clip with its fourcc rewritten to
// VP90, XVID and an unknown tag names what ffprobe names too, and VP9, a
// codec decoding allows, passes. (ffprobe gives up on the clip rewritten
// to H264 or AV01, whose frames those decoders cannot parse;
// av.TestVfWCodec checks those tags.)
func TestRecordNamesVfWCodec(t *testing.T) {
	for name, codec := range map[string]string{"refused/ffv1_vfw.mkv": "ffv1", "refused/msmpeg4v3.mkv": "msmpeg4v3"} {
		data := videotest.Read(t, name)
		v, err := webm.Parse(data)
		if err != nil {
			t.Fatal(err)
		}
		if v.Codec != codec {
			t.Errorf("%s: codec %s, want %s", name, v.Codec, codec)
		}
		videotest.Compare(t, name, "v:0", v)
		_, err = ParseRecord(decSample("clip", map[string][]byte{"mkv": data}), Limits{})
		wantRefused(t, name, err, ErrUnsupported, "clip.mkv", "video codec "+codec)
	}
	ffv1 := videotest.Read(t, "refused/ffv1_vfw.mkv")
	at := bytes.Index(ffv1, []byte("FFV1"))
	if at < 0 {
		t.Fatal("no FFV1 fourcc in ffv1_vfw.mkv")
	}
	for _, tag := range []string{"VP90", "XVID", "Q9Z!"} {
		data := slices.Clone(ffv1)
		copy(data[at:], tag)
		path := filepath.Join(t.TempDir(), "x.mkv")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		want := videotest.Probe(t, path, "v:0").Codec
		if want == "none" {
			want = "unknown" // ffprobe's name for a codec FFmpeg does not know
		}
		v, err := webm.Parse(data)
		if err != nil || v.Codec != want {
			t.Fatalf("fourcc %s: codec %v (%v), ffprobe says %s", tag, v.Codec, err, want)
		}
		_, err = ParseRecord(decSample("clip", map[string][]byte{"mkv": data}), Limits{})
		if allowed := listed(v.Codec, DefaultLimits().Codecs) || v.Codec == "unknown"; allowed != (err == nil) {
			t.Errorf("fourcc %s (%s): record error %v", tag, v.Codec, err)
		}
	}
}
