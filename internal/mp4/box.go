package mp4

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
)

// ErrFormat reports an MP4/MOV file whose boxes cannot be read: a box
// running past its parent, a count that does not fit its box, a frame
// count over video.MaxFrames. A valid file without a video track (audio
// only) fails with an error that matches ErrFormat too, so that callers
// treat it alike, but says only that the track is missing.
var ErrFormat = errors.New("decode: invalid MP4/MOV")

// noVideoTrack is the error of an MP4/MOV file without a video track; it
// lists the handler types of the tracks it has ("soun", "text").
type noVideoTrack struct{ handlers []string }

func (e noVideoTrack) Error() string {
	if len(e.handlers) == 0 {
		return "decode: MP4/MOV has no tracks, so no video track"
	}
	return fmt.Sprintf("decode: MP4/MOV has no video track (its tracks: %s)", strings.Join(e.handlers, ", "))
}

// Unwrap makes the error match ErrFormat.
func (e noVideoTrack) Unwrap() error { return ErrFormat }

// trakHandler returns a trak's handler type (hdlr), such as "soun", with
// "?" for an unreadable one and for each byte that is not printable
// ASCII (a forged one must not put control codes in an error line).
func trakHandler(trak []byte) string {
	t, ok := handlerType(trak)
	if !ok {
		return "?"
	}
	h := []byte(strings.TrimRight(string(t), "\x00"))
	for i, c := range h {
		if c < 0x20 || c > 0x7e {
			h[i] = '?'
		}
	}
	return string(h)
}

// handlerType returns the raw handler type of a trak's hdlr box (4
// bytes, "vide" for video), ok false when the trak has none it can read.
func handlerType(trak []byte) (t []byte, ok bool) {
	_, _, p, ok := fullBox(child(child(trak, "mdia"), "hdlr"))
	if !ok || len(p) < 8 {
		return nil, false
	}
	return p[4:8], true
}

// emptyStts reports whether a trak has no stts entries (a fragmented
// file's moov): FFmpeg then stops applying edit lists frame by frame.
func emptyStts(trak []byte) bool {
	_, _, p, ok := fullBox(child(child(child(child(trak, "mdia"), "minf"), "stbl"), "stts"))
	return !ok || len(p) < 4 || be32(p, 0) == 0
}

// sttsDuration returns the sum of an stts box's entries, count times
// delta, as FFmpeg totals them for the stream duration (a delta negative
// as a signed number counting 1, as readStts reads it); 0 for a box it
// cannot read.
func sttsDuration(stts []byte) int64 {
	n, p, err := tableEntries("stts", stts, 8)
	if stts == nil || err != nil {
		return 0
	}
	var sum int64
	for e := range n {
		d := int64(int32(be32(p, 8*e+4)))
		if d < 0 {
			d = 1
		}
		sum += int64(be32(p, 8*e)) * d // at most 2^32 * 2^31 per entry
		if sum < 0 {
			return math.MaxInt64
		}
	}
	return sum
}

// boxIter walks the ISO BMFF boxes packed in b: each is a 32-bit size and
// a four-character type, a 64-bit size following when size == 1, and
// size == 0 meaning "to the end of b".
type boxIter struct {
	b   []byte
	off int // absolute offset of b[0] in the file, for error messages
	err error
}

// next returns the next box's type and body (the bytes after its header).
// It returns ok == false at the end of b or on a malformed header, setting
// it.err in the second case.
func (it *boxIter) next() (typ [4]byte, body []byte, ok bool) {
	if len(it.b) == 0 || it.err != nil {
		return typ, nil, false
	}
	if len(it.b) < 8 {
		it.fail("box header truncated")
		return typ, nil, false
	}
	size := uint64(binary.BigEndian.Uint32(it.b))
	copy(typ[:], it.b[4:8])
	hdr := uint64(8)
	switch size {
	case 0:
		size = uint64(len(it.b))
	case 1:
		if len(it.b) < 16 {
			it.fail("64-bit box size truncated")
			return typ, nil, false
		}
		size, hdr = binary.BigEndian.Uint64(it.b[8:]), 16
	}
	if size < hdr || size > uint64(len(it.b)) {
		it.fail(fmt.Sprintf("box %q of %d bytes does not fit in the %d bytes left", string(typ[:]), size, len(it.b)))
		return typ, nil, false
	}
	body = it.b[hdr:size:size]
	it.b = it.b[size:]
	it.off += int(size)
	return typ, body, true
}

func (it *boxIter) fail(msg string) {
	it.err = fmt.Errorf("%w: %s at offset %d", ErrFormat, msg, it.off)
}

// child returns the body of the first box of type typ directly inside b.
func child(b []byte, typ string) []byte {
	it := boxIter{b: b}
	for {
		t, body, ok := it.next()
		if !ok {
			return nil
		}
		if string(t[:]) == typ {
			return body
		}
	}
}

// fullBox splits a full box body into its version, flags and payload; ok
// is false when the body is too short for the 4-byte version and flags.
func fullBox(body []byte) (version uint8, flags uint32, payload []byte, ok bool) {
	if len(body) < 4 {
		return 0, 0, nil, false
	}
	v := binary.BigEndian.Uint32(body)
	return uint8(v >> 24), v & 0xffffff, body[4:], true
}

// be32 and be64 read big-endian integers; callers check lengths first.
func be32(b []byte, i int) uint32 { return binary.BigEndian.Uint32(b[i:]) }
func be64(b []byte, i int) uint64 { return binary.BigEndian.Uint64(b[i:]) }

// mp4Codec maps a visual sample entry type to FFmpeg 5.1's codec name
// (ff_codec_movvideo_tags; dvh1 is HEVC in mov.c): the codecs datahelix
// decodes under every tag FFmpeg knows them by, and the common others.
func mp4Codec(t [4]byte) string {
	tag := string(t[:])
	switch tag {
	case "avc1", "avc2", "avc3", "avc4", "dva1", "dvav", "AVin", "aivx", "rv64", "xalg", "avlg",
		"ai5p", "ai5q", "ai52", "ai53", "ai55", "ai56", "ai1p", "ai1q", "ai12", "ai13", "ai15", "ai16":
		return "h264"
	case "hvc1", "hev1", "dvhe", "dvh1":
		return "hevc"
	case "av01":
		return "av1"
	case "vp09":
		return "vp9"
	case "vp08":
		return "vp8"
	case "mp4v", "DIVX", "XVID", "3IV2":
		return "mpeg4"
	case "jpeg", "mjpa", "AVDJ", "AVRn", "dmb1":
		return "mjpeg"
	case "mjpb":
		return "mjpegb"
	case "apch", "apcn", "apcs", "apco", "ap4h", "ap4x":
		return "prores"
	case "s263", "h263", "H263":
		return "h263"
	case "png ", "MNG ":
		return "png"
	case "m1v ", "m1v1", "mpeg", "mp1v":
		return "mpeg1video"
	case "m2v1", "mp2v", "AVmp", "xdhd", "xdh2":
		return "mpeg2video"
	}
	// MPEG-2 HDV (hdv1..hdva), IMX (mx3n..mx5p), XDCAM (xd51..xd5f, xdv1..xdvf).
	switch p, c := tag[:3], tag[3]; {
	case p == "hdv" && (c >= '1' && c <= '9' || c == 'a'),
		(p == "mx3" || p == "mx4" || p == "mx5") && (c == 'n' || c == 'p'),
		p == "xd5" && strings.IndexByte("1459abcdef", c) >= 0,
		p == "xdv" && (c >= '1' && c <= '9' || c >= 'a' && c <= 'f'):
		return "mpeg2video"
	}
	return "unknown"
}

// esdsCodec returns the codec FFmpeg 5.1 takes from an esds box's
// DecoderConfigDescriptor (ff_mp4_read_dec_config_descr), "" when the box
// does not name one; FFmpeg reads it in any visual sample entry.
func esdsCodec(esds []byte) string {
	_, _, p, ok := fullBox(esds)
	if !ok {
		return ""
	}
	// descr reads a descriptor's tag and expandable length, returning the
	// bytes after them.
	descr := func(b []byte) (byte, []byte, bool) {
		if len(b) < 1 {
			return 0, nil, false
		}
		tag, b := b[0], b[1:]
		for i := 0; i < 4 && len(b) > 0; i++ {
			c := b[0]
			b = b[1:]
			if c&0x80 == 0 {
				break
			}
		}
		return tag, b, true
	}
	tag, p, ok := descr(p)
	if !ok {
		return ""
	}
	skip := 2 // ES_ID, or an ID when the first descriptor is not an ES_Descriptor
	if tag == 0x03 && len(p) >= 3 {
		flags := p[2]
		skip = 3
		if flags&0x80 != 0 {
			skip += 2
		}
		if flags&0x40 != 0 && len(p) > skip {
			skip += 1 + int(p[skip])
		}
		if flags&0x20 != 0 {
			skip += 2
		}
	}
	if len(p) < skip {
		return ""
	}
	tag, p, ok = descr(p[skip:])
	if !ok || tag != 0x04 || len(p) < 1 {
		return ""
	}
	oti := p[0]
	if c, ok := mp4ObjTypes[oti]; ok {
		return c
	}
	// ff_codec_get_id, failing to find the value, looks again with each
	// byte of it and of the table's values upper-cased as ASCII: 0x41 to
	// 0x4E find the codecs of 0x61 to 0x6E.
	if oti >= 0x41 && oti <= 0x5A {
		return mp4ObjTypes[oti+0x20]
	}
	return ""
}

// mp4ObjTypes is FFmpeg 5.1's ff_mp4_obj_type, the codec (as ffprobe names
// it) of each objectTypeIndication of an esds; the first of a value listed
// twice. In a video track, FFmpeg keeps the type of the stream video for
// all but mp3, which makes it audio (mov_finalize_stsd_codec). 0x01 and
// 0x02 (MPEG-4 systems) have no codec descriptor: ffprobe says unknown.
var mp4ObjTypes = map[byte]string{
	0x01: "unknown", 0x02: "unknown", 0x08: "mov_text",
	0x20: "mpeg4", 0x21: "h264", 0x23: "hevc", 0x40: "aac",
	0x60: "mpeg2video", 0x61: "mpeg2video", 0x62: "mpeg2video", 0x63: "mpeg2video", 0x64: "mpeg2video", 0x65: "mpeg2video",
	0x66: "aac", 0x67: "aac", 0x68: "aac", 0x69: "mp3", 0x6A: "mpeg1video", 0x6B: "mp3",
	0x6C: "mjpeg", 0x6D: "png", 0x6E: "jpeg2000",
	0xA3: "vc1", 0xA4: "dirac", 0xA5: "ac3", 0xA6: "eac3", 0xA9: "dts", 0xAD: "opus", 0xB1: "vp9",
	0xC1: "flac", 0xD0: "tscc2", 0xD1: "evrc", 0xDD: "vorbis", 0xE0: "dvd_subtitle", 0xE1: "qcelp",
}
