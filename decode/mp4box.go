package decode

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
)

// ErrBadMP4 reports an MP4/MOV file whose boxes cannot be read: a box
// running past its parent, a count that does not fit its box, a frame
// count over MaxVideoFrames. A valid file without a video track (audio
// only) fails with an error that matches ErrBadMP4 too, so that callers
// treat it alike, but says only that the track is missing.
var ErrBadMP4 = errors.New("decode: invalid MP4/MOV")

// noVideoTrack is the error of an MP4/MOV file without a video track; it
// lists the handler types of the tracks it has ("soun", "text").
type noVideoTrack struct{ handlers []string }

func (e noVideoTrack) Error() string {
	if len(e.handlers) == 0 {
		return "decode: MP4/MOV has no tracks, so no video track"
	}
	return fmt.Sprintf("decode: MP4/MOV has no video track (its tracks: %s)", strings.Join(e.handlers, ", "))
}

// Unwrap makes the error match ErrBadMP4.
func (e noVideoTrack) Unwrap() error { return ErrBadMP4 }

// trakHandler returns a trak's handler type (hdlr), such as "soun", with
// "?" for an unreadable one and for each byte that is not printable
// ASCII (a forged one must not put control codes in an error line).
func trakHandler(trak []byte) string {
	_, _, p, ok := fullBox(child(child(trak, "mdia"), "hdlr"))
	if !ok || len(p) < 8 {
		return "?"
	}
	h := []byte(strings.TrimRight(string(p[4:8]), "\x00"))
	for i, c := range h {
		if c < 0x20 || c > 0x7e {
			h[i] = '?'
		}
	}
	return string(h)
}

// emptyStts reports whether a trak has no stts entries (a fragmented
// file's moov): FFmpeg then stops applying edit lists frame by frame.
func emptyStts(trak []byte) bool {
	_, _, p, ok := fullBox(child(child(child(child(trak, "mdia"), "minf"), "stbl"), "stts"))
	return !ok || len(p) < 4 || be32(p, 0) == 0
}

// MaxVideoFrames caps the frames a container parser accepts for one track,
// so that a forged count cannot make it allocate gigabytes (1<<20 frames is
// over 9 hours at 30 fps).
const MaxVideoFrames = 1 << 20

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
	it.err = fmt.Errorf("%w: %s at offset %d", ErrBadMP4, msg, it.off)
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

// mp4Codec maps a visual sample entry type to FFmpeg's codec name.
func mp4Codec(t [4]byte) string {
	switch string(t[:]) {
	case "avc1", "avc2", "avc3", "avc4":
		return "h264"
	case "hvc1", "hev1":
		return "hevc"
	case "av01":
		return "av1"
	case "vp09":
		return "vp9"
	case "vp08":
		return "vp8"
	case "mp4v":
		return "mpeg4"
	case "jpeg", "mjpa", "mjpb":
		return "mjpeg"
	case "apch", "apcn", "apcs", "apco", "ap4h", "ap4x":
		return "prores"
	case "s263", "h263":
		return "h263"
	}
	return "unknown"
}
