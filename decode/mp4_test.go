package decode

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/datahelix/datahelix/decode/av"
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
			v, err := ParseMP4(readVideo(t, tt.file))
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
			compareWithProbe(t, tt.file, v)
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

// trak returns a video trak with the given sample table boxes.
func trak(id, timescale, duration uint32, elst []byte, stbl ...[]byte) []byte {
	var edts []byte
	if elst != nil {
		edts = box("edts", elst)
	}
	return box("trak",
		fbox("tkhd", 0, 3, u32s(0, 0, id, 0, duration)),
		edts,
		box("mdia",
			fbox("mdhd", 0, 0, u32s(0, 0, timescale, duration, 0)),
			fbox("hdlr", 0, 0, u32s(0), []byte("vide"), make([]byte, 13)),
			box("minf", box("stbl", stbl...))))
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
	v, err := ParseMP4(file)
	if err != nil {
		t.Fatal(err)
	}
	want := &VideoInfo{Container: "mp4", Codec: "h264", Width: 640, Height: 360, Timescale: 1000, Duration: 400, Frames: 4,
		FrameBytes: []uint32{10, 20, 30, 40}, FramePTS: []int64{150, 50, 250, 550}, Keyframes: []int{0, 2}, Bytes: 100}
	if !reflect.DeepEqual(v, want) {
		t.Errorf("got  %+v\nwant %+v", v, want)
	}

	// size == 0 on the last box means "to the end of the file".
	open := append(u32s(0), []byte("moov")...)
	open = append(open, moov[8:]...)
	if v2, err := ParseMP4(append(box("ftyp", []byte("qt  "), u32s(0)), open...)); err != nil || v2.Frames != 4 || v2.Container != "mov" {
		t.Errorf("size-0 moov: %+v, %v", v2, err)
	}

	// stz2 with 8-bit sizes, no stss: every frame is a keyframe.
	stbl2 := [][]byte{videoEntry("hev1", 32, 16), fbox("stts", 0, 0, u32s(1, 3, 10)), fbox("stz2", 0, 0, u32s(8, 3), []byte{5, 6, 7})}
	v3, err := ParseMP4(box("moov", trak(1, 100, 30, nil, stbl2...)))
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
	v, err := ParseMP4(bytes.Join([][]byte{box("ftyp", []byte("iso5"), u32s(0)), moov, frag1, box("mdat"), other, frag2}, nil))
	if err != nil {
		t.Fatal(err)
	}
	want := &VideoInfo{Container: "mp4", Codec: "av1", Width: 320, Height: 240, Timescale: 12800, Duration: 2200, Frames: 5,
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
		{"constant stsz over cap", box("moov", trak(1, 10, 2, nil, entry, stts, fbox("stsz", 0, 0, u32s(5, MaxVideoFrames+1))))},
		{"stts count past box", box("moov", trak(1, 10, 2, nil, entry, fbox("stts", 0, 0, u32s(1<<30, 1, 1)), fbox("stsz", 0, 0, u32s(5, 2))))},
		{"stss count past box", box("moov", trak(1, 10, 2, nil, entry, stts, fbox("stsz", 0, 0, u32s(5, 2)), fbox("stss", 0, 0, u32s(1<<28))))},
		{"zero timescale", box("moov", trak(1, 0, 2, nil, entry, stts, fbox("stsz", 0, 0, u32s(5, 2))))},
		{"no frames", box("moov", trak(1, 10, 2, nil, entry, stts, fbox("stsz", 0, 0, u32s(5, 0))))},
		{"trun over cap", bytes.Join([][]byte{
			box("moov", trak(1, 10, 0, nil, entry, stts, fbox("stsz", 0, 0, u32s(0, 0)))),
			box("moof", box("traf", fbox("tfhd", 0, 0, u32s(1)), fbox("trun", 0, 0, u32s(MaxVideoFrames+1))))}, nil)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if v, err := ParseMP4(tt.data); !errors.Is(err, ErrBadMP4) {
				t.Errorf("ParseMP4 = %+v, %v; want ErrBadMP4", v, err)
			}
		})
	}
}

// TestParseMP4ForgedTableCounts forges the entry count of each sample
// table box: stco, co64 and stsc were not checked, and FFmpeg then failed
// with "Cannot allocate memory" instead of a message naming the box.
func TestParseMP4ForgedTableCounts(t *testing.T) {
	entry := videoEntry("avc1", 16, 16)
	good := map[string][]byte{
		"stts": fbox("stts", 0, 0, u32s(1, 2, 1)),
		"stsz": fbox("stsz", 0, 0, u32s(5, 2)),
		"stsc": fbox("stsc", 0, 0, u32s(1, 1, 2, 1)),
		"stco": fbox("stco", 0, 0, u32s(1, 48)),
		"ctts": fbox("ctts", 0, 0, u32s(1, 2, 0)),
		"stss": fbox("stss", 0, 0, u32s(1, 1)),
	}
	file := func(boxes map[string][]byte, chunks string) []byte {
		stbl := [][]byte{entry}
		for _, typ := range []string{"stts", "ctts", "stss", "stsz", "stsc", chunks} {
			stbl = append(stbl, boxes[typ])
		}
		return box("moov", trak(1, 10, 2, nil, stbl...))
	}
	good["co64"] = fbox("co64", 0, 0, u32s(1, 0, 48))
	for _, chunks := range []string{"stco", "co64"} {
		if v, err := ParseMP4(file(good, chunks)); err != nil || v.Frames != 2 {
			t.Fatalf("valid file with %s: %+v, %v", chunks, v, err)
		}
	}
	tests := []struct {
		typ, want string
	}{
		{"stco", "stco counts 2147483647 entries, but its 4 bytes of 4-byte entries hold at most 1"},
		{"co64", "co64 counts 2147483647 entries, but its 8 bytes of 8-byte entries hold at most 1"},
		{"stsc", "stsc counts 2147483647 entries, but its 12 bytes of 12-byte entries hold at most 1"},
		{"stts", "stts counts 2147483647 entries, but its 8 bytes of 8-byte entries hold at most 1"},
		{"ctts", "ctts counts 2147483647 entries, but its 8 bytes of 8-byte entries hold at most 1"},
		{"stss", "stss counts 2147483647 entries, but its 4 bytes of 4-byte entries hold at most 1"},
	}
	for _, tt := range tests {
		boxes := maps.Clone(good)
		b := bytes.Clone(boxes[tt.typ])
		binary.BigEndian.PutUint32(b[12:], 0x7FFFFFFF) // after size, type, version and flags
		boxes[tt.typ] = b
		chunks := "stco"
		if tt.typ == "co64" {
			chunks = "co64"
		}
		_, err := ParseMP4(file(boxes, chunks))
		if !errors.Is(err, ErrBadMP4) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("forged %s count: err %v, want ErrBadMP4 saying %q", tt.typ, err, tt.want)
		}
	}
	// An stts without entries for frames: FFmpeg refuses it as "missing
	// mandatory atoms".
	boxes := maps.Clone(good)
	boxes["stts"] = fbox("stts", 0, 0, u32s(0))
	if _, err := ParseMP4(file(boxes, "stco")); !errors.Is(err, ErrBadMP4) || !strings.Contains(err.Error(), "stts has no entries for 2 frames") {
		t.Errorf("empty stts: err %v", err)
	}
}

// BenchmarkParseMP4 parses the record of a 30 s, 750-frame H.264 clip
// with B-frames (issue goal: under 50 µs per parse).
func BenchmarkParseMP4(b *testing.B) {
	data := readVideo(b, "h264_30s.mp4")
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseMP4(data); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzParseMP4 feeds mutated real MP4/MOV files to the box walker: it
// must return a consistent VideoInfo or ErrBadMP4, never panic.
func FuzzParseMP4(f *testing.F) {
	for _, name := range []string{"h264_bf2.mp4", "h264_faststart.mp4", "h264_frag.mp4", "h264_delay.mp4", "h264_nobf.mov", "hevc.mp4", "av1.mp4", "vp9.mp4",
		"h264_sscut.mp4", "h264_fragmoov.mp4", "h264_cmaf.mp4", "h264_elsttail.mp4", "h264_elsthidden.mp4",
		"rot90_420.mp4", "upright180.mp4"} {
		data, err := os.ReadFile(filepath.Join("testdata", "video", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	// A sample table with chunk boxes, the stco count forged.
	f.Add(box("moov", trak(1, 10, 2, nil, videoEntry("avc1", 16, 16), fbox("stts", 0, 0, u32s(1, 2, 1)), fbox("stsz", 0, 0, u32s(5, 2)),
		fbox("stsc", 0, 0, u32s(1, 1, 2, 1)), fbox("stco", 0, 0, u32s(0x7FFFFFFF, 48)))))
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := ParseMP4(data)
		if err != nil {
			if !errors.Is(err, ErrBadMP4) {
				t.Fatalf("error %v does not wrap ErrBadMP4", err)
			}
			return
		}
		checkVideoInfo(t, v)
	})
}

// checkVideoInfo verifies the invariants every parsed VideoInfo keeps.
func checkVideoInfo(t *testing.T, v *VideoInfo) {
	t.Helper()
	if v.Frames <= 0 || v.Frames > MaxVideoFrames || v.Timescale == 0 {
		t.Fatalf("Frames %d, Timescale %d", v.Frames, v.Timescale)
	}
	if !v.FrameCountEstimated && (len(v.FrameBytes) != v.Frames || len(v.FramePTS) != v.Frames) {
		t.Fatalf("Frames %d but %d sizes, %d pts", v.Frames, len(v.FrameBytes), len(v.FramePTS))
	}
	if len(v.Keyframes) == 0 {
		t.Fatalf("no keyframes")
	}
	for i, k := range v.Keyframes {
		if k < 0 || k >= v.Frames || (i > 0 && k <= v.Keyframes[i-1]) {
			t.Fatalf("keyframes %v not ascending within [0,%d)", v.Keyframes, v.Frames)
		}
	}
	for i, k := range v.Discarded {
		if k < 0 || k >= v.Frames || (i > 0 && k <= v.Discarded[i-1]) {
			t.Fatalf("discarded frames %v not ascending within [0,%d)", v.Discarded, v.Frames)
		}
	}
	if turn := v.Turn(); !(v.Rotation >= -180 && v.Rotation <= 180) || turn < 0 || turn > 270 || turn%90 != 0 {
		t.Fatalf("Rotation %v, turn %d: want -180 to 180, and 0, 90, 180 or 270", v.Rotation, turn)
	}
}

// TestMP4Rotation checks ParseMP4's Rotation and Turn against FFmpeg's on
// rot90_420.mp4 with its tkhd matrix rewritten, mirrored ones included,
// and with an mvhd matrix that FFmpeg multiplies in: the turn against
// av.StreamInfo.Rotation, the rotation against ffprobe's side data on
// the same rewritten files (FFmpeg 5.1; none for "movie turns back",
// whose product is the identity, and a NaN printed as an integer for
// "degenerate").
func TestMP4Rotation(t *testing.T) {
	const one = 0x10000 // 1.0 in the matrix's 16.16 fixed point
	orig := readVideo(t, "rot90_420.mp4")
	matrix := func(data []byte, typ string, off int, abcd [4]int32) {
		i := bytes.Index(data, []byte(typ))
		if i < 0 || data[i+4] != 0 {
			t.Fatalf("rot90_420.mp4: no version 0 %s box", typ)
		}
		for k, at := range []int{0, 4, 12, 16} { // a, b, c, d
			binary.BigEndian.PutUint32(data[i+8+off+at:], uint32(abcd[k]))
		}
	}
	for _, tc := range []struct {
		name       string
		tkhd, mvhd [4]int32
		ccw, turn  int // ffprobe's rotation, FFmpeg's clockwise turn
	}{
		{"as made", [4]int32{0, -one, one, 0}, [4]int32{one, 0, 0, one}, 90, 270},
		{"identity", [4]int32{one, 0, 0, one}, [4]int32{one, 0, 0, one}, 0, 0},
		{"clockwise", [4]int32{0, one, -one, 0}, [4]int32{one, 0, 0, one}, -90, 90},
		{"hflip", [4]int32{-one, 0, 0, one}, [4]int32{one, 0, 0, one}, -180, 180},
		{"vflip", [4]int32{one, 0, 0, -one}, [4]int32{one, 0, 0, one}, 0, 0},
		{"cclock_flip", [4]int32{0, one, one, 0}, [4]int32{one, 0, 0, one}, -90, 90},
		{"movie turns back", [4]int32{0, -one, one, 0}, [4]int32{0, one, -one, 0}, 0, 0},
		{"movie turns too", [4]int32{0, -one, one, 0}, [4]int32{0, -one, one, 0}, -180, 180},
		{"45 degrees", [4]int32{46341, -46341, 46341, 46341}, [4]int32{one, 0, 0, one}, 45, 0},
		{"degenerate", [4]int32{0, 0, 0, 0}, [4]int32{one, 0, 0, one}, 0, 0},
	} {
		data := bytes.Clone(orig)
		matrix(data, "tkhd", 36, tc.tkhd)
		matrix(data, "mvhd", 32, tc.mvhd)
		v, err := ParseMP4(data)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		ccw, turn := int(v.Rotation), v.Turn()
		_, info, err := av.Packets(context.Background(), data, av.DefaultConfig())
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if ccw != tc.ccw || turn != tc.turn || turn != info.Rotation {
			t.Errorf("%s: rotation %d, turn %d; want %d, %d (FFmpeg turns it by %d)", tc.name, ccw, turn, tc.ccw, tc.turn, info.Rotation)
		}
	}
	// A tkhd too short to hold a matrix, and no mvhd: none.
	v, err := ParseMP4(box("moov", trak(1, 10, 2, nil, videoEntry("avc1", 16, 16), fbox("stts", 0, 0, u32s(1, 2, 1)), fbox("stsz", 0, 0, u32s(5, 2)))))
	if err != nil || v.Rotation != 0 || v.Turn() != 0 {
		t.Errorf("no matrix: rotation %v, turn %d, err %v; want none", v.Rotation, v.Turn(), err)
	}
}

// TestMP4RotationMatchesAV checks, on every MP4/MOV clip of
// testdata/video, that the turn ParseMP4 reads (VideoInfo.Turn) is the
// one package av reads from FFmpeg's display matrix side data
// (StreamInfo.Rotation).
func TestMP4RotationMatchesAV(t *testing.T) {
	dir := filepath.Join("testdata", "video")
	cfg := av.DefaultConfig()
	cfg.Codecs += ",rawvideo" // refused/rot180_uyvy.mov
	n := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(p) != ".mp4" && filepath.Ext(p) != ".mov" {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		v, err := ParseMP4(data)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			return nil
		}
		_, info, err := av.Packets(context.Background(), data, cfg)
		if err != nil {
			t.Errorf("%s: av: %v", p, err)
			return nil
		}
		n++
		if v.Turn() != info.Rotation {
			t.Errorf("%s: rotation %v, turn %d; FFmpeg turns it by %d", p, v.Rotation, v.Turn(), info.Rotation)
		}
		return nil
	})
	if err != nil || n < 20 {
		t.Fatalf("walked %d clips of %s: %v", n, dir, err)
	}
}
