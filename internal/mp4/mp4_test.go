package mp4

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/datahelix/datahelix/internal/video"
	"github.com/datahelix/datahelix/internal/video/videotest"
)

func TestParseMP4MatchesFFprobe(t *testing.T) {
	tests := []struct {
		file      string
		container string
		codec     string
		frames    int
	}{
		{"h264_bf2.mp4", "mp4", "h264", 50},       // B-frames, ctts, edit list, moov after mdat
		{"h264_faststart.mp4", "mp4", "h264", 50}, // moov first
		{"h264_frag.mp4", "mp4", "h264", 50},      // empty moov, moof/traf/trun
		{"h264_delay.mp4", "mp4", "h264", 50},     // leading empty edit
		{"h264_nobf.mov", "mov", "h264", 50},      // QuickTime, no ctts
		{"hevc.mp4", "mp4", "hevc", 50},
		{"av1.mp4", "mp4", "av1", 50},
		{"vp9.mp4", "mp4", "vp9", 50},
		{"h264_30s.mp4", "mp4", "h264", 750},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			v, err := Parse(videotest.Read(t, tt.file))
			if err != nil {
				t.Fatal(err)
			}
			if v.Container != tt.container || v.Codec != tt.codec || v.Frames != tt.frames {
				t.Errorf("got %s %s %d frames, want %s %s %d", v.Container, v.Codec, v.Frames, tt.container, tt.codec, tt.frames)
			}
			var sum int64
			for _, b := range v.FrameBytes {
				sum += int64(b)
			}
			if v.Bytes != sum || v.Duration <= 0 || v.FrameCountEstimated {
				t.Errorf("Bytes %d (sum %d), Duration %d, estimated %v", v.Bytes, sum, v.Duration, v.FrameCountEstimated)
			}
			videotest.Compare(t, tt.file, "v:0", v)
		})
	}
}

// Helpers building ISO BMFF boxes for hand-made test files.

func box(typ string, parts ...[]byte) []byte {
	body := bytes.Join(parts, nil)
	b := binary.BigEndian.AppendUint32(nil, uint32(8+len(body)))
	return append(append(b, typ...), body...)
}

func fbox(typ string, version uint8, flags uint32, parts ...[]byte) []byte {
	return box(typ, append([][]byte{binary.BigEndian.AppendUint32(nil, uint32(version)<<24|flags)}, parts...)...)
}

func u32s(vs ...uint32) []byte {
	var b []byte
	for _, v := range vs {
		b = binary.BigEndian.AppendUint32(b, v)
	}
	return b
}

// videoEntry returns an stsd box with one visual sample entry.
func videoEntry(typ string, w, h uint16) []byte {
	e := make([]byte, 78)
	binary.BigEndian.PutUint16(e[24:], w)
	binary.BigEndian.PutUint16(e[26:], h)
	return fbox("stsd", 0, 0, u32s(1), box(typ, e))
}

// trak returns a video trak with the given sample table boxes, and one
// chunk holding every frame (stsc, stco) unless they include a chunk box:
// FFmpeg reads no frames of a track without them (brokenTrack).
func trak(id, timescale, duration uint32, elst []byte, stbl ...[]byte) []byte {
	var edts []byte
	if elst != nil {
		edts = box("edts", elst)
	}
	if !slices.ContainsFunc(stbl, func(b []byte) bool {
		typ := string(b[4:8])
		return typ == "stsc" || typ == "stco" || typ == "co64"
	}) {
		stbl = append(slices.Clip(stbl), oneChunk()...)
	}
	return box("trak",
		fbox("tkhd", 0, 3, u32s(0, 0, id, 0, duration)),
		edts,
		box("mdia",
			fbox("mdhd", 0, 0, u32s(0, 0, timescale, duration, 0)),
			fbox("hdlr", 0, 0, u32s(0), []byte("vide"), make([]byte, 13)),
			box("minf", box("stbl", stbl...))))
}

// oneChunk returns an stsc and an stco putting every frame in one chunk.
func oneChunk() [][]byte {
	return [][]byte{fbox("stsc", 0, 0, u32s(1, 1, 1<<20, 1)), fbox("stco", 0, 0, u32s(1, 0))}
}

func soundTrak() []byte {
	return box("trak", box("mdia",
		fbox("mdhd", 0, 0, u32s(0, 0, 48000, 48000, 0)),
		fbox("hdlr", 0, 0, u32s(0), []byte("soun"), make([]byte, 13))))
}

func TestParseMP4Synthetic(t *testing.T) {
	stbl := [][]byte{
		videoEntry("avc1", 640, 360),
		fbox("stts", 0, 0, u32s(1, 4, 100)),
		fbox("ctts", 0, 0, u32s(4, 1, 200, 1, 0, 1, 100, 1, 300)),
		fbox("stsz", 0, 0, u32s(0, 4, 10, 20, 30, 40)),
		fbox("stss", 0, 0, u32s(2, 3, 1)), // unsorted on purpose
	}
	mvhd := fbox("mvhd", 0, 0, u32s(0, 0, 1000, 400))
	elst := fbox("elst", 0, 0, u32s(2, 50, 0xffffffff, 1<<16, 400, 100, 1<<16)) // 50 ms empty, then from media time 100
	moov := box("moov", mvhd, soundTrak(), trak(7, 1000, 400, elst, stbl...))
	mdat := box("mdat", make([]byte, 100))
	// A 64-bit sized free box and moov after mdat.
	large := append(u32s(1), []byte("free")...)
	large = binary.BigEndian.AppendUint64(large, 24)
	large = append(large, make([]byte, 8)...)
	file := bytes.Join([][]byte{box("ftyp", []byte("isom"), u32s(0)), large, mdat, moov}, nil)
	v, err := Parse(file)
	if err != nil {
		t.Fatal(err)
	}
	want := &video.Track{Container: "mp4", Codec: "h264", Width: 640, Height: 360, Timescale: 1000, Duration: 400, Frames: 4,
		FrameBytes: []uint32{10, 20, 30, 40}, FramePTS: []int64{150, 50, 250, 550}, Keyframes: []int{0, 2}, Bytes: 100}
	if !reflect.DeepEqual(v, want) {
		t.Errorf("got  %+v\nwant %+v", v, want)
	}

	// size == 0 on the last box means "to the end of the file".
	open := append(u32s(0), []byte("moov")...)
	open = append(open, moov[8:]...)
	if v2, err := Parse(append(box("ftyp", []byte("qt  "), u32s(0)), open...)); err != nil || v2.Frames != 4 || v2.Container != "mov" {
		t.Errorf("size-0 moov: %+v, %v", v2, err)
	}

	// stz2 with 8-bit sizes, no stss: every frame is a keyframe.
	stbl2 := [][]byte{videoEntry("hev1", 32, 16), fbox("stts", 0, 0, u32s(1, 3, 10)), fbox("stz2", 0, 0, u32s(8, 3), []byte{5, 6, 7})}
	v3, err := Parse(box("moov", trak(1, 100, 30, nil, stbl2...)))
	if err != nil {
		t.Fatal(err)
	}
	if v3.Codec != "hevc" || !reflect.DeepEqual(v3.FrameBytes, []uint32{5, 6, 7}) || !reflect.DeepEqual(v3.Keyframes, []int{0, 1, 2}) ||
		!reflect.DeepEqual(v3.FramePTS, []int64{0, 10, 20}) {
		t.Errorf("stz2 clip: %+v", v3)
	}
}

func TestParseMP4Fragments(t *testing.T) {
	// Empty moov with trex defaults (duration 512, size 7, non-sync), two
	// fragments: the first uses tfhd defaults and first-sample flags, the
	// second per-sample fields, a tfdt and negative composition offsets.
	// The offset -512 makes FFmpeg add 512 (its dts_shift) to every pts,
	// the first fragment's too.
	moov := box("moov",
		fbox("mvhd", 0, 0, u32s(0, 0, 1000, 0)),
		trak(2, 12800, 0, nil, videoEntry("av01", 320, 240), fbox("stts", 0, 0, u32s(0)), fbox("stsz", 0, 0, u32s(0, 0))),
		box("mvex", fbox("trex", 0, 0, u32s(1, 1, 1, 1, 0)), fbox("trex", 0, 0, u32s(2, 1, 512, 7, sampleIsNonSync))))
	frag1 := box("moof", box("traf",
		fbox("tfhd", 0, tfhdDefaultSize, u32s(2, 9)),
		fbox("trun", 0, trunFirstSampleFlags, u32s(3, 0))))
	other := box("moof", box("traf", fbox("tfhd", 0, 0, u32s(1)), fbox("trun", 0, trunSize, u32s(1, 99))))
	frag2 := box("moof", box("traf",
		fbox("tfhd", 0, 0, u32s(2)),
		fbox("tfdt", 1, 0, u32s(0, 2000)),
		fbox("trun", 1, trunDuration|trunSize|trunFlags|trunCTSOffset, u32s(2, 100, 11, 0, 0xfffffe00, 100, 12, sampleIsNonSync, 0))))
	v, err := Parse(bytes.Join([][]byte{box("ftyp", []byte("iso5"), u32s(0)), moov, frag1, box("mdat"), other, frag2}, nil))
	if err != nil {
		t.Fatal(err)
	}
	want := &video.Track{Container: "mp4", Codec: "av1", Width: 320, Height: 240, Timescale: 12800, Duration: 2200, Frames: 5,
		FrameBytes: []uint32{9, 9, 9, 11, 12}, FramePTS: []int64{512, 1024, 1536, 2000, 2612}, Keyframes: []int{0, 3}, Bytes: 50}
	if !reflect.DeepEqual(v, want) {
		t.Errorf("got  %+v\nwant %+v", v, want)
	}
}

func TestParseMP4Malformed(t *testing.T) {
	stts := fbox("stts", 0, 0, u32s(1, 2, 1))
	entry := videoEntry("avc1", 16, 16)
	tests := []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"no moov", box("ftyp", []byte("isom"), u32s(0))},
		{"box past end", append(u32s(100), []byte("moov")...)},
		{"no video", box("moov", soundTrak())},
		{"stsz count past box", box("moov", trak(1, 10, 2, nil, entry, stts, fbox("stsz", 0, 0, u32s(0, 1000, 1))))},
		{"constant stsz over cap", box("moov", trak(1, 10, 2, nil, entry, stts, fbox("stsz", 0, 0, u32s(5, video.MaxFrames+1))))},
		{"stts count past box", box("moov", trak(1, 10, 2, nil, entry, fbox("stts", 0, 0, u32s(1<<30, 1, 1)), fbox("stsz", 0, 0, u32s(5, 2))))},
		{"stss count past box", box("moov", trak(1, 10, 2, nil, entry, stts, fbox("stsz", 0, 0, u32s(5, 2)), fbox("stss", 0, 0, u32s(1<<28))))},
		{"zero timescale", box("moov", trak(1, 0, 2, nil, entry, stts, fbox("stsz", 0, 0, u32s(5, 2))))},
		{"no frames", box("moov", trak(1, 10, 2, nil, entry, stts, fbox("stsz", 0, 0, u32s(5, 0))))},
		{"trun over cap", bytes.Join([][]byte{
			box("moov", trak(1, 10, 0, nil, entry, stts, fbox("stsz", 0, 0, u32s(0, 0)))),
			box("moof", box("traf", fbox("tfhd", 0, 0, u32s(1)), fbox("trun", 0, 0, u32s(video.MaxFrames+1))))}, nil)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if v, err := Parse(tt.data); !errors.Is(err, ErrFormat) {
				t.Errorf("Parse = %+v, %v; want ErrFormat", v, err)
			}
		})
	}
}

// BenchmarkParseMP4 parses the record of a 30 s, 750-frame H.264 clip
// with B-frames (issue goal: under 50 µs per parse).
func BenchmarkParseMP4(b *testing.B) {
	data := videotest.Read(b, "h264_30s.mp4")
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(data); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzParseMP4 feeds mutated real MP4/MOV files to the box walker: it
// must return a consistent VideoInfo or ErrFormat, never panic.
func FuzzParseMP4(f *testing.F) {
	for _, name := range []string{"h264_bf2.mp4", "h264_faststart.mp4", "h264_frag.mp4", "h264_delay.mp4", "h264_nobf.mov", "hevc.mp4", "av1.mp4", "vp9.mp4",
		"h264_sscut.mp4", "h264_fragmoov.mp4", "h264_cmaf.mp4", "h264_elsttail.mp4", "h264_elsthidden.mp4",
		"rot90_420.mp4", "upright180.mp4", "h264_2video_kind.mp4"} {
		data, err := os.ReadFile(filepath.Join(videoDir, name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	// A file sidx boxes index whole, a kind box after its mdat.
	f.Add(indexedMP4(f, videotest.Read(f, "h264_2video_rate.mp4"), 1, fbox("kind", 0, 0, []byte("urn:mpeg:dash:role:2011\x00caption\x00")), 0, true))
	// A sample table with chunk boxes, the stco count forged.
	f.Add(box("moov", trak(1, 10, 2, nil, videoEntry("avc1", 16, 16), fbox("stts", 0, 0, u32s(1, 2, 1)), fbox("stsz", 0, 0, u32s(5, 2)),
		fbox("stsc", 0, 0, u32s(1, 1, 2, 1)), fbox("stco", 0, 0, u32s(0x7FFFFFFF, 48)))))
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := Parse(data)
		if err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("error %v does not wrap ErrFormat", err)
			}
			return
		}
		checkVideoInfo(t, v)
	})
}

// videoDir holds the test clips, shared with package decode's tests.
var videoDir = videotest.Dir

// checkVideoInfo fails t when v breaks an invariant of parsed tracks.
func checkVideoInfo(t *testing.T, v *video.Track) {
	t.Helper()
	if err := v.Check(); err != nil {
		t.Fatal(err)
	}
}

// indexedMP4 returns rate (h264_2video_rate.mp4) with its moov moved
// before its mdat, two sidx boxes of version v after the moov, one a
// track, whose references cover the mdat and tail after it, less short
// bytes, then, with mfra, an mfra box: FFmpeg stops its walk after the
// mdat when they end at the mfra or at the end of the file.
func indexedMP4(tb testing.TB, rate []byte, v uint8, tail []byte, short int, mfra bool) []byte {
	tb.Helper()
	fast := moovFirst(tb, rate)
	moovEnd := topBox(tb, fast, "mdat")
	covered := uint32(len(fast) - moovEnd + len(tail) - short)
	sidx := func(k int, first uint32) []byte {
		mdhd := trakBox(tb, rate, k, "mdhd")
		f := u32s(0, first) // earliest presentation time, first offset
		if v == 1 {
			f = u32s(0, 0, 0, first)
		}
		return fbox("sidx", v, 0, u32s(be32(rate, trakBox(tb, rate, k, "tkhd")+20), be32(rate, mdhd+20)), f,
			u32s(1, covered, be32(rate, mdhd+24), 0x90000000)) // 1 reference of the track's duration, a keyframe first
	}
	second := sidx(1, 0)
	var end []byte
	if mfra {
		end = box("mfra", fbox("mfro", 0, 0, u32s(24)))
	}
	return slices.Concat(fast[:moovEnd], sidx(0, uint32(len(second))), second, fast[moovEnd:], tail, end)
}

// moovFirst returns data, a file of the clips of make_tracks.sh (two
// traks, an mdat then the moov that ends it), with the moov moved before
// the mdat and the chunk offsets (stco) of its traks with it.
func moovFirst(tb testing.TB, data []byte) []byte {
	tb.Helper()
	moov, mdat := topBox(tb, data, "moov"), topBox(tb, data, "mdat")
	size := len(data) - moov
	if int(be32(data, moov)) != size || mdat > moov {
		tb.Fatal("moov not after the mdat, ending the file")
	}
	m := bytes.Clone(data[moov:])
	for k := range 2 {
		stco := trakBox(tb, data, k, "stco") - moov
		for i := range int(be32(m, stco+12)) {
			binary.BigEndian.PutUint32(m[stco+16+4*i:], be32(m, stco+16+4*i)+uint32(size))
		}
	}
	return slices.Concat(data[:mdat], m, data[mdat:moov])
}

// topBox returns the offset of the first top-level box of type typ.
func topBox(t testing.TB, data []byte, typ string) int {
	t.Helper()
	for off := 0; off+8 <= len(data); off += int(be32(data, off)) {
		if string(data[off+4:off+8]) == typ {
			return off
		}
		if be32(data, off) < 8 {
			break
		}
	}
	t.Fatalf("no %s box", typ)
	return 0
}

// trakBox returns the offset of the first box of type typ inside the k-th
// trak (from 0) of the moov, looking depth first through its mdia, minf,
// stbl, udta and edts boxes; with typ "", the trak's own offset.
func trakBox(t testing.TB, data []byte, k int, typ string) int {
	t.Helper()
	var search func(off, end int, typ string, nth *int) int
	search = func(off, end int, typ string, nth *int) int {
		for off+8 <= end {
			size := int(be32(data, off))
			if size < 8 || off+size > end {
				break
			}
			switch name := string(data[off+4 : off+8]); {
			case name == typ:
				if *nth == 0 {
					return off
				}
				*nth--
			case name == "mdia" || name == "minf" || name == "stbl" || name == "udta" || name == "edts":
				if r := search(off+8, off+size, typ, nth); r >= 0 {
					return r
				}
			}
			off += size
		}
		return -1
	}
	moov := topBox(t, data, "moov")
	nth := k
	trak := search(moov+8, moov+int(be32(data, moov)), "trak", &nth)
	if trak < 0 {
		t.Fatalf("no trak %d", k)
	}
	if typ == "" {
		return trak
	}
	nth = 0
	off := search(trak+8, trak+int(be32(data, trak)), typ, &nth)
	if off < 0 {
		t.Fatalf("trak %d has no %s box", k, typ)
	}
	return off
}

// grow returns a copy of data with ins inserted at offset at and the
// 32-bit sizes of the boxes at offsets boxes, which enclose it, grown by
// len(ins). The moov must come after the mdat, so that no chunk moves.
func grow(t *testing.T, data []byte, at int, ins []byte, boxes ...int) []byte {
	t.Helper()
	if topBox(t, data, "moov") < topBox(t, data, "mdat") {
		t.Fatal("moov before mdat: inserting would move the chunks")
	}
	out := slices.Concat(data[:at], ins, data[at:])
	for _, b := range boxes {
		if b >= at || b+int(be32(data, b)) < at {
			t.Fatalf("box at %d does not enclose %d", b, at)
		}
		binary.BigEndian.PutUint32(out[b:], be32(data, b)+uint32(len(ins)))
	}
	return out
}
