package mp4

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/datahelix/datahelix/internal/av"
	"github.com/datahelix/datahelix/internal/video"
	"github.com/datahelix/datahelix/internal/video/videotest"
)

// TestMP4CodecNames checks the codec names Parse gives sample entries
// against FFmpeg 5.1's: a visual entry takes its codec from its esds,
// which may name MPEG-1/2 video, JPEG or PNG (it said mpeg4), or an audio
// codec FFmpeg names in a video stream (aac; it said mpeg4), or mp3, which
// makes FFmpeg read the track as audio; QuickTime's MPEG-1/2 tags and
// others FFmpeg knows (it said unknown). TestMP4EsdsMatchesAV checks each
// esds value against package av.
func TestMP4CodecNames(t *testing.T) {
	// esds builds an esds box whose ES_Descriptor has the flags esFlags
	// (with the fields they announce) and whose DecoderConfigDescriptor
	// has the objectTypeIndication oti; long writes lengths on 4 bytes.
	esds := func(esFlags, oti byte, long bool) []byte {
		length := func(n int) []byte {
			if long {
				return []byte{0x80, 0x80, 0x80, byte(n)}
			}
			return []byte{byte(n)}
		}
		dc := append([]byte{0x04}, length(13)...)
		dc = append(dc, oti, 0x11, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
		es := []byte{0, 1, esFlags}
		if esFlags&0x80 != 0 {
			es = append(es, 0, 2)
		}
		if esFlags&0x40 != 0 {
			es = append(es, 3, 'a', 'b', 'c')
		}
		if esFlags&0x20 != 0 {
			es = append(es, 0, 3)
		}
		es = append(es, dc...)
		return fbox("esds", 0, 0, append(append([]byte{0x03}, length(len(es))...), es...))
	}
	entry := func(typ string, ext ...[]byte) []byte {
		e := make([]byte, 78)
		binary.BigEndian.PutUint16(e[24:], 16)
		binary.BigEndian.PutUint16(e[26:], 16)
		return fbox("stsd", 0, 0, u32s(1), box(typ, append([][]byte{e}, ext...)...))
	}
	tests := []struct {
		entry []byte
		codec string
	}{
		{entry("mp4v", esds(0, 0x20, false)), "mpeg4"},
		{entry("mp4v"), "mpeg4"},
		{entry("mp4v", esds(0, 0x61, false)), "mpeg2video"},
		{entry("mp4v", esds(0xe0, 0x60, true)), "mpeg2video"},
		{entry("mp4v", esds(0, 0x6a, false)), "mpeg1video"},
		{entry("mp4v", esds(0x40, 0x6c, false)), "mjpeg"},
		{entry("mp4v", esds(0, 0x6d, false)), "png"},
		{entry("mp4v", esds(0, 0x40, false)), "aac"},        // an audio codec in a video stream
		{entry("mp4v", esds(0, 0xa5, false)), "ac3"},        // likewise
		{entry("mp4v", esds(0, 0x44, false)), "mpeg2video"}, // 0x64 found case-insensitively
		{entry("mp4v", esds(0, 0x01, false)), "unknown"},    // MPEG-4 systems
		{entry("mp4v", esds(0, 0x70, false)), "mpeg4"},      // not in FFmpeg's table: kept
		{entry("avc1", esds(0, 0x6c, false)), "mjpeg"},      // any visual entry
		{entry("m2v1"), "mpeg2video"},
		{entry("xd5c"), "mpeg2video"},
		{entry("hdv6"), "mpeg2video"},
		{entry("mx5p"), "mpeg2video"},
		{entry("m1v "), "mpeg1video"},
		{entry("png "), "png"},
		{entry("mjpb"), "mjpegb"},
		{entry("ai5q"), "h264"},
		{entry("dvh1"), "hevc"},
		{entry("xd5z"), "unknown"},
		{entry("rle "), "unknown"},
	}
	for _, tt := range tests {
		v, err := Parse(box("moov", trak(1, 10, 2, nil, tt.entry, fbox("stts", 0, 0, u32s(1, 2, 1)), fbox("stsz", 0, 0, u32s(5, 2)))))
		if err != nil || v.Codec != tt.codec {
			t.Errorf("entry %q: codec %v, %v; want %s", tt.entry[20:24], v, err, tt.codec)
		}
	}
	// mp3 makes the track audio: no video track, or the other one.
	for _, oti := range []byte{0x69, 0x6b, 0x49} {
		mp3 := trak(1, 10, 2, nil, entry("mp4v", esds(0, oti, false)), fbox("stts", 0, 0, u32s(1, 2, 1)), fbox("stsz", 0, 0, u32s(5, 2)))
		if v, err := Parse(box("moov", mp3)); !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "no video track (its tracks: vide holding mp3") {
			t.Errorf("esds %#x: %+v, %v; want ErrFormat, no video track", oti, v, err)
		}
		other := trak(2, 10, 2, nil, entry("avc1"), fbox("stts", 0, 0, u32s(1, 2, 1)), fbox("stsz", 0, 0, u32s(1, 2)))
		if v, err := Parse(box("moov", mp3, other)); err != nil || v.Codec != "h264" {
			t.Errorf("esds %#x, then an avc1 track: %+v, %v; want the h264 track", oti, v, err)
		}
	}
}

// esdsOTI returns the offset of the objectTypeIndication in the first esds
// box of data (an ES_Descriptor without optional fields, then the
// DecoderConfigDescriptor).
func esdsOTI(t *testing.T, data []byte) int {
	t.Helper()
	i := bytes.Index(data, []byte("esds")) + 8 // past the type, version and flags
	skipDescr := func(tag byte) {
		if i < 8 || data[i] != tag {
			t.Fatalf("no descriptor %#x at %d", tag, i)
		}
		for i++; data[i]&0x80 != 0; i++ {
		}
		i++
	}
	skipDescr(0x03)
	if data[i+2] != 0 {
		t.Fatalf("ES_Descriptor flags %#x", data[i+2])
	}
	i += 3
	skipDescr(0x04)
	return i
}

// TestMP4EsdsMatchesAV sets the esds objectTypeIndication of
// refused/mpeg2_mp4v.mp4 (an mp4v entry) to each of the 256 values and
// checks Parse against package av: the codec FFmpeg names for the video
// stream, or no video track when FFmpeg finds no video stream (mp3, which
// it reads as audio). It also adds an esds to an avc1 entry of
// h264_2video_rate.mp4, of the track FFmpeg decodes: FFmpeg reads it there
// too; and an mp3 one to a track whose mdhd FFmpeg refuses.
func TestMP4EsdsMatchesAV(t *testing.T) {
	orig := videotest.Read(t, "refused/mpeg2_mp4v.mp4")
	at := esdsOTI(t, orig)
	if orig[at] != 0x61 {
		t.Fatalf("objectTypeIndication %#x, want 0x61", orig[at])
	}
	// check compares Parse with FFmpeg on data.
	check := func(name string, data []byte) *video.Track {
		t.Helper()
		v, err := Parse(data)
		_, si, aerr := av.Packets(context.Background(), data, av.DefaultConfig())
		if aerr != nil && strings.Contains(aerr.Error(), "no video stream") {
			if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "no video track") {
				t.Errorf("%s: FFmpeg finds no video stream; Parse gives %+v, %v", name, v, err)
			}
			return nil
		}
		want := si.Codec
		if want == "unknown_codec" || want == "none" {
			want = "unknown" // as ffprobe names a codec without a descriptor
		}
		if err != nil || v.Codec != want {
			t.Errorf("%s: Parse gives %+v, %v; FFmpeg's codec is %s (%v)", name, v, err, si.Codec, aerr)
			return nil
		}
		return v
	}
	for oti := range 256 {
		data := bytes.Clone(orig)
		data[at] = byte(oti)
		check(fmt.Sprintf("esds %#02x", oti), data)
	}

	// The esds of mpeg2_mp4v.mp4 in the avc1 entry of the second track
	// of h264_2video_rate.mp4, the one FFmpeg decodes (its moov comes
	// after its mdat, so that no chunk moves).
	rate := videotest.Read(t, "h264_2video_rate.mp4")
	esdsAt := bytes.Index(orig, []byte("esds")) - 4
	esdsBox := orig[esdsAt : esdsAt+int(be32(orig, esdsAt))]
	stsd := trakBox(t, rate, 1, "stsd")
	entry := stsd + 16
	end := entry + int(be32(rate, entry))
	for _, tc := range []struct {
		oti    byte
		height int
	}{{0x6c, 120}, {0x40, 120}, {0x6b, 48}} {
		e := bytes.Clone(esdsBox)
		e[at-esdsAt] = tc.oti
		data := grow(t, rate, end, e, topBox(t, rate, "moov"), trakBox(t, rate, 1, ""), trakBox(t, rate, 1, "mdia"),
			trakBox(t, rate, 1, "minf"), trakBox(t, rate, 1, "stbl"), stsd, entry)
		if v := check(fmt.Sprintf("avc1 with esds %#02x", tc.oti), data); v != nil && v.Height != tc.height {
			t.Errorf("avc1 with esds %#02x: picked the %dx%d track, want height %d", tc.oti, v.Width, v.Height, tc.height)
		}
	}

	// An mp3 esds makes FFmpeg read the track as audio even when it has
	// no mdhd: in h264_2video_disabled.mp4, whose second track (64x48) is
	// the only default one, FFmpeg then decodes the first, 160x120
	// (Parse took the second for a broken video track, picked it and
	// failed the file).
	dis := videotest.Read(t, "h264_2video_disabled.mp4")
	stsd = trakBox(t, dis, 1, "stsd")
	entry = stsd + 16
	end = entry + int(be32(dis, entry))
	e := bytes.Clone(esdsBox)
	e[at-esdsAt] = 0x6b
	mp3 := grow(t, dis, end, e, topBox(t, dis, "moov"), trakBox(t, dis, 1, ""), trakBox(t, dis, 1, "mdia"),
		trakBox(t, dis, 1, "minf"), trakBox(t, dis, 1, "stbl"), stsd, entry)
	data := bytes.Clone(mp3)
	copy(data[trakBox(t, data, 1, "mdhd")+4:], "free")
	if v := check("mp3 track without an mdhd", data); v == nil || v.Height != 120 {
		t.Errorf("mp3 track without an mdhd: Parse gives %+v; want the 160x120 track", v)
	} else {
		videotest.SameAsAV(t, "mp3 track without an mdhd", data, v)
	}
	// But an mdhd of version 2, in any track, fails the file in FFmpeg
	// ("Not yet implemented"; Parse took the track for audio first).
	data = bytes.Clone(mp3)
	data[trakBox(t, data, 1, "mdhd")+8] = 2
	if v, err := Parse(data); !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "mdhd box of version 2") {
		t.Errorf("mp3 track with an mdhd of version 2: Parse gives %+v, %v; want ErrFormat naming the mdhd", v, err)
	}
	if _, _, err := av.Packets(context.Background(), data, av.DefaultConfig()); err == nil {
		t.Errorf("mp3 track with an mdhd of version 2: FFmpeg opens the file")
	}
}
