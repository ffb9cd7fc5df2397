package mp4

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/datahelix/datahelix/internal/av"
	"github.com/datahelix/datahelix/internal/video/videotest"
)

// twoVideoClips are the clips of make_tracks.sh: two video tracks, of
// which FFmpeg decodes the second (av_find_best_stream). The first is 25
// frames of 160x120 at 25 fps, or 10 of 64x48 at 10 fps, the second the
// other. Each comment says what went wrong when Parse described the
// first video track.
var twoVideoClips = []struct {
	File          string
	Frames        int
	Width, Height int
}{
	// Both default: the second has the larger bit rate. The record was
	// 64x48 with 10 frames 100 ms apart, FFmpeg decoded 160x120 at 40 ms:
	// 4 of 8 sampled frames missed, filled with others.
	{"h264_2video_rate.mp4", 25, 160, 120},
	// The first is not default (tkhd enabled flag clear): 6 of 8 sampled
	// frames missed.
	{"h264_2video_disabled.mp4", 10, 64, 48},
	// The first has a kind box with a role for the visually impaired
	// ("description"): 6 of 8 missed.
	{"h264_2video_kind.mp4", 10, 64, 48},
}

// TestParseMP4TrackChoice checks on hand-made files the rules by which
// Parse picks the video track FFmpeg decodes, among 2 tracks of 2
// frames of 100 ticks at timescale 1000: the first of equal scores; the
// default one (tkhd enabled flag) over a larger bit rate; one without a
// caption or description kind box over one with; then the larger bit
// rate, the bytes of its frames over its duration, mdhd's or the stts
// total when shorter (30 bytes over mdhd's 100 ms beat 40 over 200 ms,
// and 50 bytes over the stts total of 200 ms, mdhd saying 1 s, beat them
// too); in a file with a trex box, the bytes of the fragments too.
func TestParseMP4TrackChoice(t *testing.T) {
	// track builds a trak of id with 16x(id) pictures (so that the
	// choice shows in the height), tkhd flags, mdhd duration, frame sizes
	// a and b, and extra boxes for its udta.
	track := func(id, flags, mdhd, a, b uint32, udta ...[]byte) []byte {
		var u []byte
		if len(udta) > 0 {
			u = box("udta", udta...)
		}
		return box("trak",
			fbox("tkhd", 0, flags, u32s(0, 0, id, 0, mdhd)),
			u,
			box("mdia",
				fbox("mdhd", 0, 0, u32s(0, 0, 1000, mdhd, 0)),
				fbox("hdlr", 0, 0, u32s(0), []byte("vide"), make([]byte, 13)),
				box("minf", box("stbl", append([][]byte{videoEntry("avc1", 16, uint16(id)),
					fbox("stts", 0, 0, u32s(1, 2, 100)), fbox("stsz", 0, 0, u32s(0, 2, a, b))}, oneChunk()...)...))))
	}
	kind := func(scheme, value string) []byte {
		return fbox("kind", 0, 0, []byte(scheme+"\x00"+value+"\x00"))
	}
	tests := []struct {
		name   string
		traks  [][]byte
		height int
	}{
		{"equal", [][]byte{track(1, 3, 200, 10, 10), track(2, 3, 200, 10, 10)}, 1},
		{"larger bit rate", [][]byte{track(1, 3, 200, 10, 10), track(2, 3, 200, 10, 11)}, 2},
		{"first disabled", [][]byte{track(1, 2, 200, 50, 50), track(2, 3, 200, 10, 10)}, 2},
		{"second disabled", [][]byte{track(1, 3, 200, 10, 10), track(2, 0, 200, 50, 50)}, 1},
		{"caption", [][]byte{track(1, 3, 200, 50, 50, kind("urn:mpeg:dash:role:2011", "caption")), track(2, 3, 200, 10, 10)}, 2},
		{"description", [][]byte{track(1, 3, 200, 50, 50, kind("urn:mpeg:dash:role:2011", "description")), track(2, 3, 200, 10, 10)}, 2},
		{"other role", [][]byte{track(1, 3, 200, 50, 50, kind("urn:mpeg:dash:role:2011", "main")), track(2, 3, 200, 10, 10)}, 1},
		{"other scheme", [][]byte{track(1, 3, 200, 50, 50, kind("urn:example", "caption")), track(2, 3, 200, 10, 10)}, 1},
		{"mdhd shorter", [][]byte{track(1, 3, 200, 20, 20), track(2, 3, 100, 15, 15)}, 2},
		{"stts shorter", [][]byte{track(1, 3, 200, 20, 20), track(2, 3, 1000, 25, 25)}, 2},
		{"sound first", [][]byte{soundTrak(), track(2, 3, 200, 10, 10)}, 2},
		// FFmpeg reads a kind box wherever it descends, for the last
		// track begun before it.
		{"kind in trak", [][]byte{track(1, 3, 200, 10, 10), box("trak", track(2, 3, 200, 50, 50)[8:], kind("urn:mpeg:dash:role:2011", "caption"))}, 1},
		{"kind in moov after traks", [][]byte{track(1, 3, 200, 10, 10), track(2, 3, 200, 50, 50),
			box("udta", kind("urn:mpeg:dash:role:2011", "description"))}, 1},
		{"kind in moov before traks", [][]byte{box("udta", kind("urn:mpeg:dash:role:2011", "description")),
			track(1, 3, 200, 10, 10), track(2, 3, 200, 50, 50)}, 2},
		{"kind of empty strings", [][]byte{track(1, 3, 200, 10, 10), track(2, 3, 200, 50, 50, kind("", ""))}, 2},
	}
	for _, tt := range tests {
		v, err := Parse(box("moov", append([][]byte{fbox("mvhd", 0, 0, u32s(0, 0, 1000, 200))}, tt.traks...)...))
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if v.Height != tt.height {
			t.Errorf("%s: picked track %d, want %d", tt.name, v.Height, tt.height)
		}
	}
	// Fragments: track 1 has 2 moov frames of 10 bytes, track 2 none in
	// the moov and 2 of 11 in a fragment; without the fragments track 1
	// would win.
	moov := box("moov", fbox("mvhd", 0, 0, u32s(0, 0, 1000, 0)),
		track(1, 3, 200, 10, 10),
		box("trak",
			fbox("tkhd", 0, 3, u32s(0, 0, 2, 0, 0)),
			box("mdia",
				fbox("mdhd", 0, 0, u32s(0, 0, 1000, 0, 0)),
				fbox("hdlr", 0, 0, u32s(0), []byte("vide"), make([]byte, 13)),
				box("minf", box("stbl", videoEntry("avc1", 16, 2), fbox("stts", 0, 0, u32s(0)), fbox("stsz", 0, 0, u32s(0, 0)))))),
		box("mvex", fbox("trex", 0, 0, u32s(2, 1, 100, 11, 0))))
	moof := box("moof", box("traf", fbox("tfhd", 0, 0, u32s(2)), fbox("trun", 0, 0, u32s(2))))
	v, err := Parse(bytes.Join([][]byte{moov, moof}, nil))
	if err != nil || v.Height != 2 || v.Frames != 2 {
		t.Errorf("fragments: %+v, %v; want track 2's 2 frames", v, err)
	}
	// An stsz whose count its box cannot hold fails the file, whichever
	// track FFmpeg would decode: FFmpeg reads the boxes after it as sizes,
	// or refuses the file when they run past its end.
	forged := box("trak", fbox("tkhd", 0, 3, u32s(0, 0, 2, 0, 200)), box("mdia",
		fbox("mdhd", 0, 0, u32s(0, 0, 1000, 200, 0)),
		fbox("hdlr", 0, 0, u32s(0), []byte("vide"), make([]byte, 13)),
		box("minf", box("stbl", videoEntry("avc1", 16, 2), fbox("stts", 0, 0, u32s(1, 2, 100)), fbox("stsz", 0, 0, u32s(0, 1000, 1))))))
	if v, err := Parse(box("moov", track(1, 3, 200, 10, 10), forged)); !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "stsz has 1000 sizes") {
		t.Errorf("forged stsz in the second track: %+v, %v; want ErrFormat", v, err)
	}
	// A kind box FFmpeg cannot read fails the file, in any track.
	for _, k := range [][]byte{
		fbox("kind", 1, 0, []byte("urn:mpeg:dash:role:2011\x00main\x00")),
		fbox("kind", 0, 0x800000, []byte("a\x00b\x00")),
		fbox("kind", 0, 0, []byte("urn:mpeg:dash:role:2011\x00main")),
		fbox("kind", 0, 0, nil),
		box("kind", []byte{0, 0}),
	} {
		sound := box("trak", soundTrak()[8:], box("udta", k))
		if v, err := Parse(box("moov", track(1, 3, 200, 10, 10), sound)); !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "kind box") ||
			!strings.Contains(err.Error(), "trak 2") {
			t.Errorf("kind box %q in a sound track: %+v, %v; want ErrFormat naming the kind box of trak 2", k, v, err)
		}
	}
	// Before the first trak, FFmpeg checks only a kind box's size: one of
	// under 6 bytes fails the file, one of version 1 does not.
	for _, k := range [][]byte{box("kind"), box("kind", []byte{0, 0, 0, 0, 0}), fbox("kind", 1, 0, []byte("a\x00b\x00"))} {
		v, err := Parse(box("moov", box("udta", k), track(1, 3, 200, 10, 10)))
		if short := len(k) < 14; short && (!errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "moov/udta has a kind box")) ||
			!short && err != nil {
			t.Errorf("kind box %q before the first trak: %+v, %v", k, v, err)
		}
	}
}

// TestParseMP4BrokenTrack breaks one video track of the clips of
// make_tracks.sh as FFmpeg 5.1 keeps a track it cannot read, with bit
// rate 0 ("missing mandatory atoms, broken header": no stts, stts or stsc
// without entries, no stco; "timescale not set": no mdhd), and checks
// that Parse describes the track package av demuxes, the other one, as
// FFmpeg does (it failed the file with the broken track's error); that a
// broken track FFmpeg decodes (it wins by its enabled flag) fails the file
// with its error, FFmpeg reading no packets of it; and that a table count
// FFmpeg cannot allocate fails the file in either track, as in FFmpeg.
func TestParseMP4BrokenTrack(t *testing.T) {
	rename := func(k int, typ string) func([]byte) {
		return func(d []byte) { copy(d[trakBox(t, d, k, typ)+4:], "free") }
	}
	count := func(k int, typ string, n uint32) func([]byte) {
		return func(d []byte) { binary.BigEndian.PutUint32(d[trakBox(t, d, k, typ)+12:], n) }
	}
	tests := []struct {
		name, file string
		breakIt    func([]byte)
		height     int    // of the track FFmpeg decodes; 0 when the file fails
		err        string // Parse's error when it fails
	}{
		// Both tracks default: the 160x120 one, second, has the larger
		// bit rate unless broken.
		{"second without stts", "h264_2video_rate.mp4", rename(1, "stts"), 48, ""},
		{"first without stts", "h264_2video_rate.mp4", rename(0, "stts"), 120, ""},
		{"second with an empty stts", "h264_2video_rate.mp4", count(1, "stts", 0), 48, ""},
		{"second without stsc", "h264_2video_rate.mp4", rename(1, "stsc"), 48, ""},
		{"second with an empty stco", "h264_2video_rate.mp4", count(1, "stco", 0), 48, ""},
		{"second without stco", "h264_2video_rate.mp4", rename(1, "stco"), 48, ""},
		{"first without mdhd", "h264_2video_rate.mp4", rename(0, "mdhd"), 120, ""},
		// The second, 64x48, is the only default one: FFmpeg picks it
		// broken and reads no packets.
		{"default one without stts", "h264_2video_disabled.mp4", rename(1, "stts"), 0, "missing stts"},
		{"default one without stsc", "h264_2video_disabled.mp4", rename(1, "stsc"), 0, "without stsc entries"},
		{"other one without stts", "h264_2video_disabled.mp4", rename(0, "stts"), 48, ""},
		// A forged count: FFmpeg fails the file ("Cannot allocate memory").
		{"first with a forged stco count", "h264_2video_rate.mp4", count(0, "stco", 0x7FFFFFFF), 0, "stco counts 2147483647 entries"},
		{"first with a forged stts count", "h264_2video_rate.mp4", count(0, "stts", 0x7FFFFFFF), 0, "stts counts 2147483647 entries"},
	}
	for _, tt := range tests {
		data := bytes.Clone(videotest.Read(t, tt.file))
		tt.breakIt(data)
		v, err := Parse(data)
		if tt.height == 0 {
			if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s: Parse gives %+v, %v; want ErrFormat saying %q", tt.name, v, err, tt.err)
			}
			if pk, si, err := av.Packets(context.Background(), data, av.DefaultConfig()); err == nil && len(pk) > 0 {
				t.Errorf("%s: FFmpeg reads %d packets of its %dx%d stream", tt.name, len(pk), si.Width, si.Height)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		checkVideoInfo(t, v)
		if v.Height != tt.height {
			t.Errorf("%s: picked the %dx%d track, want height %d", tt.name, v.Width, v.Height, tt.height)
		}
		videotest.SameAsAV(t, tt.name, data, v)
	}
}
