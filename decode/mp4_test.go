package decode

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
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
		"rot90_420.mp4", "upright180.mp4", "h264_2video_kind.mp4"} {
		data, err := os.ReadFile(filepath.Join("testdata", "video", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	// A file sidx boxes index whole, a kind box after its mdat.
	f.Add(indexedMP4(f, readVideo(f, "h264_2video_rate.mp4"), 1, fbox("kind", 0, 0, []byte("urn:mpeg:dash:role:2011\x00caption\x00")), 0, true))
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
	cfg.Codecs += ",rawvideo,mpeg2video" // refused/rot180_uyvy.mov, refused/mpeg2_mp4v.mp4
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

// twoVideoClips are the clips of make_tracks.sh: two video tracks, of
// which FFmpeg decodes the second (av_find_best_stream). The first is 25
// frames of 160x120 at 25 fps, or 10 of 64x48 at 10 fps, the second the
// other. Each comment says what went wrong when ParseMP4 described the
// first video track.
var twoVideoClips = []struct {
	file          string
	frames        int
	width, height int
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

// TestParseMP4PicksFFmpegTrack checks that the record of a clip with two
// video tracks describes the one FFmpeg decodes: its packets as av.Packets
// and ffprobe list them (pts, sizes, keyframes), its picture size; that
// Decode finds every sampled frame, each the only frame FFmpeg outputs at
// its time; and that FrameMD5s equals `ffmpeg -map 0:v:1 -f framemd5`.
func TestParseMP4PicksFFmpegTrack(t *testing.T) {
	for _, c := range twoVideoClips {
		t.Run(c.file, func(t *testing.T) {
			data := readVideo(t, c.file)
			v, err := ParseMP4(data)
			if err != nil {
				t.Fatal(err)
			}
			checkVideoInfo(t, v)
			pk, si, err := av.Packets(context.Background(), data, av.DefaultConfig())
			if err != nil {
				t.Fatal(err)
			}
			if v.Width != c.width || v.Height != c.height || si.Width != c.width || si.Height != c.height {
				t.Errorf("record %dx%d, FFmpeg decodes %dx%d; want %dx%d", v.Width, v.Height, si.Width, si.Height, c.width, c.height)
			}
			if v.Frames != c.frames || len(pk) != c.frames {
				t.Fatalf("%d frames, FFmpeg reads %d packets; want %d", v.Frames, len(pk), c.frames)
			}
			var keys []int
			for i, p := range pk {
				if p.Key {
					keys = append(keys, i)
				}
				if int(v.FrameBytes[i]) != p.Size || cmpTime(v.FramePTS[i], v.Timescale, p.PTS, si.TimeBase) != 0 {
					t.Errorf("frame %d: pts %d/%d s, %d bytes; FFmpeg's packet %d*%d/%d s, %d bytes", i,
						v.FramePTS[i], v.Timescale, v.FrameBytes[i], p.PTS, si.TimeBase.Num, si.TimeBase.Den, p.Size)
				}
			}
			if !slices.Equal(v.Keyframes, keys) {
				t.Errorf("keyframes %v, FFmpeg's %v", v.Keyframes, keys)
			}
			compareWithProbeStream(t, c.file, "v:1", v)

			s := decSample("clip", map[string][]byte{"mp4": data})
			rec, err := ParseRecord(s)
			if err != nil {
				t.Fatal(err)
			}
			const n = 8
			out, err := NewDecoder(Options{Frames: n, Size: 16}).Decode(context.Background(), s, rec)
			if err != nil {
				t.Fatal(err)
			}
			if out.MissedFrames != 0 || out.Damaged != 0 {
				t.Errorf("%d of %d sampled frames missed, %d damaged; want 0, 0", out.MissedFrames, n, out.Damaged)
			}
			hs, st, err := av.FrameMD5s(context.Background(), data, av.DefaultConfig())
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range SampleFrames(rec.Video, n) {
				matches := 0
				for _, h := range hs {
					if cmpTime(v.FramePTS[f], v.Timescale, h.PTS, st.TimeBase) == 0 {
						matches++
					}
				}
				if matches != 1 {
					t.Errorf("sampled frame %d (pts %d): %d frames FFmpeg outputs have its time, want 1", f, v.FramePTS[f], matches)
				}
			}
			if _, err := exec.LookPath("ffmpeg"); err != nil {
				return
			}
			raw, err := exec.Command("ffmpeg", "-v", "error", "-threads", "1", "-i", filepath.Join("testdata", "video", c.file),
				"-map", "0:v:1", "-f", "framemd5", "-").Output()
			if err != nil {
				t.Fatalf("ffmpeg framemd5: %v", err)
			}
			var want []string
			for _, line := range strings.Split(string(raw), "\n") {
				if f := strings.Split(line, ","); len(f) == 6 && !strings.HasPrefix(line, "#") {
					want = append(want, strings.TrimSpace(f[5]))
				}
			}
			got, err := FrameMD5s(context.Background(), data, Limits{})
			if err != nil {
				t.Fatal(err)
			}
			if len(want) != c.frames || !slices.Equal(got, want) {
				t.Errorf("FrameMD5s gives %d frames, ffmpeg -map 0:v:1 %d (want %d); they differ", len(got), len(want), c.frames)
			}
		})
	}
}

// TestParseMP4TrackChoice checks on hand-made files the rules by which
// ParseMP4 picks the video track FFmpeg decodes, among 2 tracks of 2
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
		v, err := ParseMP4(box("moov", append([][]byte{fbox("mvhd", 0, 0, u32s(0, 0, 1000, 200))}, tt.traks...)...))
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
	v, err := ParseMP4(bytes.Join([][]byte{moov, moof}, nil))
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
	if v, err := ParseMP4(box("moov", track(1, 3, 200, 10, 10), forged)); !errors.Is(err, ErrBadMP4) || !strings.Contains(err.Error(), "stsz has 1000 sizes") {
		t.Errorf("forged stsz in the second track: %+v, %v; want ErrBadMP4", v, err)
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
		if v, err := ParseMP4(box("moov", track(1, 3, 200, 10, 10), sound)); !errors.Is(err, ErrBadMP4) || !strings.Contains(err.Error(), "kind box") ||
			!strings.Contains(err.Error(), "trak 2") {
			t.Errorf("kind box %q in a sound track: %+v, %v; want ErrBadMP4 naming the kind box of trak 2", k, v, err)
		}
	}
	// Before the first trak, FFmpeg checks only a kind box's size: one of
	// under 6 bytes fails the file, one of version 1 does not.
	for _, k := range [][]byte{box("kind"), box("kind", []byte{0, 0, 0, 0, 0}), fbox("kind", 1, 0, []byte("a\x00b\x00"))} {
		v, err := ParseMP4(box("moov", box("udta", k), track(1, 3, 200, 10, 10)))
		if short := len(k) < 14; short && (!errors.Is(err, ErrBadMP4) || !strings.Contains(err.Error(), "moov/udta has a kind box")) ||
			!short && err != nil {
			t.Errorf("kind box %q before the first trak: %+v, %v", k, v, err)
		}
	}
}

// TestMP4CodecNames checks the codec names ParseMP4 gives sample entries
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
		v, err := ParseMP4(box("moov", trak(1, 10, 2, nil, tt.entry, fbox("stts", 0, 0, u32s(1, 2, 1)), fbox("stsz", 0, 0, u32s(5, 2)))))
		if err != nil || v.Codec != tt.codec {
			t.Errorf("entry %q: codec %v, %v; want %s", tt.entry[20:24], v, err, tt.codec)
		}
	}
	// mp3 makes the track audio: no video track, or the other one.
	for _, oti := range []byte{0x69, 0x6b, 0x49} {
		mp3 := trak(1, 10, 2, nil, entry("mp4v", esds(0, oti, false)), fbox("stts", 0, 0, u32s(1, 2, 1)), fbox("stsz", 0, 0, u32s(5, 2)))
		if v, err := ParseMP4(box("moov", mp3)); !errors.Is(err, ErrBadMP4) || !strings.Contains(err.Error(), "no video track (its tracks: vide holding mp3") {
			t.Errorf("esds %#x: %+v, %v; want ErrBadMP4, no video track", oti, v, err)
		}
		other := trak(2, 10, 2, nil, entry("avc1"), fbox("stts", 0, 0, u32s(1, 2, 1)), fbox("stsz", 0, 0, u32s(1, 2)))
		if v, err := ParseMP4(box("moov", mp3, other)); err != nil || v.Codec != "h264" {
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
// checks ParseMP4 against package av: the codec FFmpeg names for the video
// stream, or no video track when FFmpeg finds no video stream (mp3, which
// it reads as audio). It also adds an esds to an avc1 entry of
// h264_2video_rate.mp4, of the track FFmpeg decodes: FFmpeg reads it there
// too; and an mp3 one to a track whose mdhd FFmpeg refuses.
func TestMP4EsdsMatchesAV(t *testing.T) {
	orig := readVideo(t, "refused/mpeg2_mp4v.mp4")
	at := esdsOTI(t, orig)
	if orig[at] != 0x61 {
		t.Fatalf("objectTypeIndication %#x, want 0x61", orig[at])
	}
	// check compares ParseMP4 with FFmpeg on data.
	check := func(name string, data []byte) *VideoInfo {
		t.Helper()
		v, err := ParseMP4(data)
		_, si, aerr := av.Packets(context.Background(), data, av.DefaultConfig())
		if aerr != nil && strings.Contains(aerr.Error(), "no video stream") {
			if !errors.Is(err, ErrBadMP4) || !strings.Contains(err.Error(), "no video track") {
				t.Errorf("%s: FFmpeg finds no video stream; ParseMP4 gives %+v, %v", name, v, err)
			}
			return nil
		}
		want := si.Codec
		if want == "unknown_codec" || want == "none" {
			want = "unknown" // as ffprobe names a codec without a descriptor
		}
		if err != nil || v.Codec != want {
			t.Errorf("%s: ParseMP4 gives %+v, %v; FFmpeg's codec is %s (%v)", name, v, err, si.Codec, aerr)
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
	rate := readVideo(t, "h264_2video_rate.mp4")
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
	// (ParseMP4 took the second for a broken video track, picked it and
	// failed the file).
	dis := readVideo(t, "h264_2video_disabled.mp4")
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
		t.Errorf("mp3 track without an mdhd: ParseMP4 gives %+v; want the 160x120 track", v)
	} else {
		sameAsAV(t, "mp3 track without an mdhd", data, v)
	}
	// But an mdhd of version 2, in any track, fails the file in FFmpeg
	// ("Not yet implemented"; ParseMP4 took the track for audio first).
	data = bytes.Clone(mp3)
	data[trakBox(t, data, 1, "mdhd")+8] = 2
	if v, err := ParseMP4(data); !errors.Is(err, ErrBadMP4) || !strings.Contains(err.Error(), "mdhd box of version 2") {
		t.Errorf("mp3 track with an mdhd of version 2: ParseMP4 gives %+v, %v; want ErrBadMP4 naming the mdhd", v, err)
	}
	if _, _, err := av.Packets(context.Background(), data, av.DefaultConfig()); err == nil {
		t.Errorf("mp3 track with an mdhd of version 2: FFmpeg opens the file")
	}
}

// TestRefusedCodecNamed checks refused/mpeg2_mp4v.mp4 (make_tracks.sh),
// MPEG-2 video in an mp4v sample entry: its record names the codec as
// ffprobe does (it said mpeg4), and decoding it is refused with
// ErrUnsupported, naming the member and the codec.
func TestRefusedCodecNamed(t *testing.T) {
	const name = "refused/mpeg2_mp4v.mp4"
	data := readVideo(t, name)
	v, err := ParseMP4(data)
	if err != nil {
		t.Fatal(err)
	}
	if v.Codec != "mpeg2video" {
		t.Errorf("codec %s, want mpeg2video", v.Codec)
	}
	compareWithProbe(t, name, v)
	s := decSample("clip", map[string][]byte{"mp4": data})
	_, err = NewDecoder(Options{Frames: 4, Size: 16}).Decode(context.Background(), s, nil)
	if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "clip.mp4") || !strings.Contains(err.Error(), "codec mpeg2video") {
		t.Errorf("Decode: %v; want ErrUnsupported naming clip.mp4 and codec mpeg2video", err)
	}
	if _, err := FrameMD5s(context.Background(), data, Limits{}); !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "codec mpeg2video") {
		t.Errorf("FrameMD5s: %v; want ErrUnsupported naming codec mpeg2video", err)
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

// sameAsAV checks that v, parsed from data, is the video stream package av
// demuxes from it: picture size, and each packet's size and pts.
func sameAsAV(t *testing.T, name string, data []byte, v *VideoInfo) {
	t.Helper()
	pk, si, err := av.Packets(context.Background(), data, av.DefaultConfig())
	if err != nil {
		t.Errorf("%s: av: %v", name, err)
		return
	}
	if v.Width != si.Width || v.Height != si.Height || v.Frames != len(pk) {
		t.Errorf("%s: record %dx%d, %d frames; FFmpeg demuxes %dx%d, %d packets", name, v.Width, v.Height, v.Frames, si.Width, si.Height, len(pk))
		return
	}
	for i, p := range pk {
		if int(v.FrameBytes[i]) != p.Size || cmpTime(v.FramePTS[i], v.Timescale, p.PTS, si.TimeBase) != 0 {
			t.Errorf("%s: frame %d: pts %d/%d s, %d bytes; FFmpeg's packet %d*%d/%d s, %d bytes", name, i,
				v.FramePTS[i], v.Timescale, v.FrameBytes[i], p.PTS, si.TimeBase.Num, si.TimeBase.Den, p.Size)
			return
		}
	}
}

// TestParseMP4BrokenTrack breaks one video track of the clips of
// make_tracks.sh as FFmpeg 5.1 keeps a track it cannot read, with bit
// rate 0 ("missing mandatory atoms, broken header": no stts, stts or stsc
// without entries, no stco; "timescale not set": no mdhd), and checks
// that ParseMP4 describes the track package av demuxes, the other one, as
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
		err        string // ParseMP4's error when it fails
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
		data := bytes.Clone(readVideo(t, tt.file))
		tt.breakIt(data)
		v, err := ParseMP4(data)
		if tt.height == 0 {
			if !errors.Is(err, ErrBadMP4) || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s: ParseMP4 gives %+v, %v; want ErrBadMP4 saying %q", tt.name, v, err, tt.err)
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
		sameAsAV(t, tt.name, data, v)
	}
}

// TestMP4KindMatchesAV checks ParseMP4 against package av on kind boxes
// FFmpeg 5.1 cannot read, in the clip where the first track has a kind
// box for the visually impaired: FFmpeg refuses the file ("Unsupported
// 'kind' box with version 1", or a scheme or value without its NUL) and
// ParseMP4 must too, naming the kind box (it picked the second track,
// and the sample was then dropped at every draw). And on a kind box for
// the visually impaired in a udta of the moov, after the traks: FFmpeg
// gives it to the last track, so that it decodes the first. The same
// for such a kind box in the other places FFmpeg's box walk reads one
// (readKinds: in the mvex, tref, sinf, schi, wave, meta and ilst boxes,
// after the fields of a sample entry, a second one of the same type too,
// after the moov; ParseMP4 decoded the second track), and for those it
// does not read (in a meta before its hdlr, in a container after an mdat
// box, after a second sample entry of another type). And on the files
// FFmpeg refuses for a kind box of under 6 bytes, even before the first
// track, or for containers nested more than 10 deep (ParseMP4 read them).
// And on a kind box after the mdat of a file sidx boxes index whole,
// where FFmpeg stops its walk (ParseMP4 read it: a kind box of version 1
// or 2 bytes failed the file, one for the visually impaired picked the
// 64x48 track), and of one they do not (a byte short, another track ID);
// on the sidx boxes FFmpeg refuses, and on the tkhd and mdhd boxes it
// refuses in any track (a second one, an mdhd of version 2).
func TestMP4KindMatchesAV(t *testing.T) {
	orig := readVideo(t, "h264_2video_kind.mp4")
	kind := trakBox(t, orig, 0, "kind")
	size := int(be32(orig, kind))
	if !bytes.HasSuffix(orig[kind:kind+size], []byte("description\x00")) {
		t.Fatalf("kind box %q", orig[kind:kind+size])
	}
	for _, tc := range []struct {
		name string
		at   int // offset in the kind box
		b    byte
	}{{"version 1", 8, 1}, {"flags 1", 11, 1}, {"flags 0x800000", 9, 0x80}, {"value without NUL", size - 1, 'X'}} {
		data := bytes.Clone(orig)
		data[kind+tc.at] = tc.b
		v, err := ParseMP4(data)
		if !errors.Is(err, ErrBadMP4) || !strings.Contains(err.Error(), "kind box") {
			t.Errorf("%s: ParseMP4 gives %+v, %v; want ErrBadMP4 naming the kind box", tc.name, v, err)
		}
		if _, _, err := av.Packets(context.Background(), data, av.DefaultConfig()); err == nil {
			t.Errorf("%s: FFmpeg opens the file", tc.name)
		}
	}

	rate := readVideo(t, "h264_2video_rate.mp4")
	moov := topBox(t, rate, "moov")
	for _, version := range []uint8{0, 1} {
		udta := box("udta", fbox("kind", version, 0, []byte("urn:mpeg:dash:role:2011\x00description\x00")))
		data := grow(t, rate, moov+int(be32(rate, moov)), udta, moov)
		v, err := ParseMP4(data)
		if version == 1 {
			if !errors.Is(err, ErrBadMP4) || !strings.Contains(err.Error(), "kind box of version 1") {
				t.Errorf("moov kind box of version 1: ParseMP4 gives %+v, %v", v, err)
			}
			if _, _, err := av.Packets(context.Background(), data, av.DefaultConfig()); err == nil {
				t.Errorf("moov kind box of version 1: FFmpeg opens the file")
			}
			continue
		}
		if err != nil || v.Height != 48 {
			t.Errorf("moov kind box: ParseMP4 gives %+v, %v; want the 64x48 track", v, err)
			continue
		}
		sameAsAV(t, "moov kind box", data, v)
	}

	// In or after the second track, which FFmpeg decodes (160x120) when
	// it reads no kind box for the visually impaired; else the first.
	trak := trakBox(t, rate, 1, "")
	encl := []int{moov, trak}
	for _, typ := range []string{"mdia", "minf", "stbl", "stsd"} {
		encl = append(encl, trakBox(t, rate, 1, typ))
	}
	entry := encl[len(encl)-1] + 16
	encl = append(encl, entry)
	inTrak := func(b []byte) []byte { return grow(t, rate, trak+int(be32(rate, trak)), b, moov, trak) }
	inEntry := func(b []byte) []byte { return grow(t, rate, entry+int(be32(rate, entry)), b, encl...) }
	desc := fbox("kind", 0, 0, []byte("urn:mpeg:dash:role:2011\x00description\x00"))
	hdlr := fbox("hdlr", 0, 0, u32s(0), []byte("mdir"), make([]byte, 13))
	// secondEntry adds a copy of the sample entry, of type typ, with a
	// kind box after its fields: FFmpeg reads it when of the first's type.
	secondEntry := func(typ string) []byte {
		e := slices.Concat(rate[entry:entry+int(be32(rate, entry))], desc)
		binary.BigEndian.PutUint32(e, uint32(len(e)))
		copy(e[4:], typ)
		stsd := encl[len(encl)-2]
		d := grow(t, rate, entry+int(be32(rate, entry)), e, encl[:len(encl)-1]...)
		binary.BigEndian.PutUint32(d[stsd+12:], be32(d, stsd+12)+1)
		return d
	}
	moovEnd := topBox(t, moovFirst(t, rate), "mdat") // where indexedMP4 puts the first sidx
	indexed := func(v uint8, tail []byte, short int, mfra bool) []byte {
		return indexedMP4(t, rate, v, tail, short, mfra)
	}
	kind1 := fbox("kind", 1, 0, []byte("a\x00b\x00"))
	kind2 := box("kind", []byte{0, 0})
	sidxTimescale0 := indexed(1, desc, 0, true)
	copy(sidxTimescale0[moovEnd+16:], []byte{0, 0, 0, 0})
	sidxRef1 := indexed(1, desc, 0, true)
	sidxRef1[moovEnd+40] |= 0x80
	sidxOtherID := indexed(1, desc, 0, true)
	for _, at := range []int{moovEnd + 12, moovEnd + 52 + 12} { // the reference IDs of the two sidx boxes of 52 bytes
		binary.BigEndian.PutUint32(sidxOtherID[at:], 9)
	}
	mdhd := rate[trakBox(t, rate, 1, "mdhd"):]
	mdhd = mdhd[:be32(mdhd, 0)]
	tkhd := rate[trakBox(t, rate, 1, "tkhd"):]
	tkhd = tkhd[:be32(tkhd, 0)]
	// soun2 makes the first track audio, its mdhd of version 2.
	soun2 := func(version byte) []byte {
		d := bytes.Clone(rate)
		copy(d[trakBox(t, d, 0, "hdlr")+16:], "soun")
		d[trakBox(t, d, 0, "mdhd")+8] = version
		return d
	}
	nest := func(n int, b []byte) []byte {
		for range n {
			b = box("udta", b)
		}
		return b
	}
	for _, tc := range []struct {
		name   string
		data   []byte
		height int // of the track FFmpeg decodes; 0 when it refuses the file
	}{
		{"a kind box in the moov's mvex", grow(t, rate, moov+int(be32(rate, moov)), box("mvex", desc), moov), 48},
		{"a kind box in the trak's tref", inTrak(box("tref", desc)), 48},
		{"a kind box in the trak's sinf/schi", inTrak(box("sinf", box("schi", desc))), 48},
		{"a kind box in the trak's wave", inTrak(box("wave", desc)), 48},
		{"a kind box in the trak's udta/meta/ilst", inTrak(box("udta", fbox("meta", 0, 0, hdlr, box("ilst", desc)))), 48},
		{"a kind box after the sample entry's fields", inEntry(desc), 48},
		{"a kind box in a sinf after the sample entry's fields", inEntry(box("sinf", desc)), 48},
		{"a kind box after the fields of a second sample entry of the same type", secondEntry("avc1"), 48},
		{"a kind box after the fields of a second sample entry of another type", secondEntry("hvc1"), 120},
		{"a kind box at the top level after the moov", slices.Concat(rate, desc), 48},
		{"a kind box in a moof after the moov", slices.Concat(rate, box("moof", box("traf", desc))), 48},
		{"a kind box in a meta before its hdlr", inTrak(fbox("meta", 0, 0, desc, hdlr)), 120},
		{"a kind box in a udta after an mdat box", inTrak(box("udta", box("mdat"), desc)), 120},
		{"a kind box in a free box", inTrak(box("free", desc)), 120},
		{"a kind box of version 1 in the mvex", grow(t, rate, moov+int(be32(rate, moov)), box("mvex", fbox("kind", 1, 0, []byte("a\x00b\x00"))), moov), 0},
		{"a kind box of 2 bytes before the first trak", grow(t, rate, moov+8+int(be32(rate, moov+8)), box("kind", []byte{0, 0}), moov), 0},
		{"a kind box of 5 bytes in a udta before the first trak", grow(t, rate, moov+8+int(be32(rate, moov+8)), box("udta", fbox("kind", 0, 0, []byte{0})), moov), 0},
		{"a kind box of 2 bytes at the top level before the moov", slices.Concat(box("kind", []byte{0, 0}), rate), 0},
		{"a kind box in 8 nested udta boxes in the trak", inTrak(nest(8, desc)), 48},
		{"a kind box in 9 nested udta boxes in the trak", inTrak(nest(9, desc)), 0},
		{"9 nested empty udta boxes in the trak", inTrak(nest(9, nil)), 0},
		{"4 nested udta boxes after the sample entry's fields", inEntry(nest(4, nil)), 120},
		{"5 nested udta boxes after the sample entry's fields", inEntry(nest(5, nil)), 0},
		{"a kind box for the visually impaired after the mdat, sidx boxes indexing the file to its mfra", indexed(1, desc, 0, true), 120},
		{"a kind box of version 1 after the mdat, sidx boxes indexing the file to its mfra", indexed(1, kind1, 0, true), 120},
		{"a kind box of 2 bytes after the mdat, sidx boxes indexing the file to its mfra", indexed(1, kind2, 0, true), 120},
		{"a kind box after the mdat, sidx boxes of version 0 indexing the file to its end", indexed(0, desc, 0, false), 120},
		{"a kind box after the mdat, sidx boxes ending a byte before the mfra", indexed(1, desc, 1, true), 48},
		{"a kind box of version 1 after the mdat, sidx boxes ending a byte before the end", indexed(0, kind1, 1, false), 0},
		{"a kind box after the mdat, sidx boxes of another track ID", sidxOtherID, 48},
		{"a sidx box of timescale 0", sidxTimescale0, 0},
		{"a sidx box referring to a sidx box", sidxRef1, 0},
		{"a second mdhd box in the second trak", inTrak(mdhd), 0},
		{"an mdhd box in a udta of the moov, after the traks", grow(t, rate, moov+int(be32(rate, moov)), box("udta", mdhd), moov), 0},
		{"a second tkhd box in the second trak", inTrak(tkhd), 0},
		{"an audio track with an mdhd of version 0", soun2(0), 120},
		{"an audio track with an mdhd of version 2", soun2(2), 0},
	} {
		v, err := ParseMP4(tc.data)
		_, _, aerr := av.Packets(context.Background(), tc.data, av.DefaultConfig())
		if tc.height == 0 {
			if !errors.Is(err, ErrBadMP4) {
				t.Errorf("%s: ParseMP4 gives %+v, %v; want ErrBadMP4", tc.name, v, err)
			}
			if aerr == nil {
				t.Errorf("%s: FFmpeg opens the file", tc.name)
			}
			continue
		}
		if err != nil || v.Height != tc.height {
			t.Errorf("%s: ParseMP4 gives %+v, %v; want the track of height %d", tc.name, v, err, tc.height)
			continue
		}
		sameAsAV(t, tc.name, tc.data, v)
	}
}

// matchesAV checks ParseMP4 against package av on data: both refuse it
// (height 0), or both pick the video track of that height, ParseMP4 as
// av demuxes it.
func matchesAV(t *testing.T, name string, data []byte, height int) {
	t.Helper()
	v, err := ParseMP4(data)
	if height == 0 {
		if !errors.Is(err, ErrBadMP4) {
			t.Errorf("%s: ParseMP4 gives %+v, %v; want ErrBadMP4", name, v, err)
		}
		if _, _, aerr := av.Packets(context.Background(), data, av.DefaultConfig()); aerr == nil {
			t.Errorf("%s: FFmpeg opens the file", name)
		}
		return
	}
	if err != nil || v.Height != height {
		t.Errorf("%s: ParseMP4 gives %+v, %v; want the track of height %d", name, v, err, height)
		return
	}
	sameAsAV(t, name, data, v)
}

// TestMP4WalkMatchesAV checks ParseMP4 against package av where readKinds
// follows FFmpeg 5.1's box walk beyond kind boxes, in the clip whose
// second track (160x120) FFmpeg decodes unless a kind box for the visually
// impaired is in it: a box overrunning its container, which FFmpeg cuts
// to it (ParseMP4 ended the container's walk there); the 17th stream,
// which package av's max_streams refuses (ParseMP4 read it); the stsd
// boxes FFmpeg refuses in any track (a second one for a track, an entry
// count under 1, over 1024 or over the box's size over 8, an entry of
// under 8 bytes) and those it ignores (before the first trak); the codec
// tag I420 that a visual entry's compressor name sets, so that FFmpeg
// skips a second entry of the same type (ParseMP4 compared it with the
// first entry's type); and the wave boxes FFmpeg does not walk, those of
// a QDM2 or ALAC audio track (ParseMP4 walked them).
func TestMP4WalkMatchesAV(t *testing.T) {
	rate := readVideo(t, "h264_2video_rate.mp4")
	moov := topBox(t, rate, "moov")
	moovEnd := moov + int(be32(rate, moov))
	trak0, trak := trakBox(t, rate, 0, ""), trakBox(t, rate, 1, "")
	encl := []int{moov, trak}
	for _, typ := range []string{"mdia", "minf", "stbl", "stsd"} {
		encl = append(encl, trakBox(t, rate, 1, typ))
	}
	stsdOff := encl[len(encl)-1]
	entry := stsdOff + 16
	inTrak := func(d []byte, b []byte) []byte { return grow(t, d, trak+int(be32(d, trak)), b, moov, trak) }
	inTrak0 := func(d []byte, b []byte) []byte { return grow(t, d, trak0+int(be32(d, trak0)), b, moov, trak0) }
	desc := fbox("kind", 0, 0, []byte("urn:mpeg:dash:role:2011\x00description\x00"))
	kind1 := fbox("kind", 1, 0, []byte("a\x00b\x00"))
	over := bytes.Clone(desc)
	binary.BigEndian.PutUint32(over, uint32(len(desc)+4))
	overTrak := inTrak(rate, box("udta", over))
	// A second sample entry of the first's type, a kind box after its
	// fields, in a file d whose moov is laid out as rate's.
	secondEntry := func(d []byte) []byte {
		e := slices.Concat(d[entry:entry+int(be32(d, entry))], desc)
		binary.BigEndian.PutUint32(e, uint32(len(e)))
		d = grow(t, d, entry+int(be32(d, entry)), e, encl...)
		binary.BigEndian.PutUint32(d[stsdOff+12:], be32(d, stsdOff+12)+1)
		return d
	}
	i420 := bytes.Clone(rate)
	name := "Planar Y'CbCr 8-bit 4:2:0"
	i420[entry+50] = byte(len(name))
	copy(i420[entry+51:], name)
	stsd1 := rate[stsdOff : stsdOff+int(be32(rate, stsdOff))]
	// soun makes the first track audio, its sample entry of type typ.
	soun := func(typ string) []byte {
		d := bytes.Clone(rate)
		copy(d[trakBox(t, d, 0, "hdlr")+16:], "soun")
		copy(d[trakBox(t, d, 0, "stsd")+20:], typ)
		return d
	}
	stsd0 := func(at int, v uint32) []byte {
		d := soun("avc1")
		binary.BigEndian.PutUint32(d[trakBox(t, d, 0, "stsd")+at:], v)
		return d
	}
	frma := box("frma", []byte("alac"))
	for _, tc := range []struct {
		name   string
		data   []byte
		height int // of the track FFmpeg decodes; 0 when it refuses the file
	}{
		{"a kind box overrunning its udta by 4 bytes", overTrak, 48},
		{"a kind box overrunning its udta, the trak and the moov", func() []byte {
			d := inTrak(rate, box("udta", desc))
			binary.BigEndian.PutUint32(d[trak+int(be32(rate, trak))+8:], 1<<20)
			return d
		}(), 48},
		{"16 traks in the moov", grow(t, rate, moovEnd, bytes.Repeat(box("trak"), 14), moov), 120},
		{"17 traks in the moov", grow(t, rate, moovEnd, bytes.Repeat(box("trak"), 15), moov), 0},
		{"14 traks at the top level after the moov", slices.Concat(rate, bytes.Repeat(box("trak"), 14)), 120},
		{"15 traks at the top level after the moov", slices.Concat(rate, bytes.Repeat(box("trak"), 15)), 0},
		{"a second stsd in the second trak", inTrak(rate, stsd1), 0},
		{"an stsd in a udta of the moov, after the traks", grow(t, rate, moovEnd, box("udta", stsd1), moov), 0},
		{"an stsd in a udta of the moov, before the traks", grow(t, rate, trak0, box("udta", stsd1), moov), 120},
		{"an audio track's stsd of 0 entries", stsd0(12, 0), 0},
		{"an audio track's stsd of 2000 entries", stsd0(12, 2000), 0},
		{"an audio track's stsd of more entries than its size over 8", stsd0(12, be32(rate, trakBox(t, rate, 0, "stsd"))/8), 0},
		{"an audio track's stsd entry of 0 bytes", stsd0(16, 0), 0},
		{"an audio track's stsd entry of 7 bytes", stsd0(16, 7), 0},
		{"an audio track's stsd entry of 8 bytes", stsd0(16, 8), 120},
		{"a second entry of the first's type, the first named for I420", secondEntry(i420), 120},
		{"a second entry of the first's type", secondEntry(rate), 48},
		{"a kind box of version 1 in an audio track's wave", inTrak0(soun("avc1"), box("wave", kind1)), 0},
		{"a kind box of version 1 in a QDM2 track's wave", inTrak0(soun("QDM2"), box("wave", kind1)), 120},
		{"a kind box of version 1 in an ALAC track's wave", inTrak0(soun("alac"), box("wave", kind1, make([]byte, 8))), 120},
		{"a kind box of version 1 in an ALAC track's wave after a frma", inTrak0(soun("alac"), box("wave", frma, kind1)), 0},
	} {
		matchesAV(t, tc.name, tc.data, tc.height)
	}
}

// TestMP4WalkBounded checks that readKinds' walk does work linear in the
// file: it begins at most maxStreams streams, so that a sidx box looks
// its reference ID up in at most as many, and it reads no sidx reference
// past the end of the file (they read as zeros) and at most maxSidxRefs
// in all (ParseMP4 took 3.6 s for 100,000 traks and as many sidx boxes,
// 30 s for 100,000 sidx boxes of 32 bytes and 65535 references each).
func TestMP4WalkBounded(t *testing.T) {
	rate := readVideo(t, "h264_2video_rate.mp4")
	fast := moovFirst(t, rate)
	id := be32(rate, trakBox(t, rate, 0, "tkhd")+20)
	w, err := walkKinds(slices.Concat(fast, bytes.Repeat(box("trak"), 1000), bytes.Repeat(box("sidx"), 1000)))
	if !errors.Is(err, ErrBadMP4) || !strings.Contains(err.Error(), "max_streams") || len(w.streams) != maxStreams {
		t.Errorf("1000 traks: %d streams, err %v; want %d, ErrBadMP4 naming max_streams", len(w.streams), err, maxStreams)
	}
	tiny := fbox("sidx", 0, 0, u32s(id, 1, 0, 0, 0xFFFF)) // 65535 references in 32 bytes
	// Each reads the references in the boxes after it, up to the file's
	// end: at most 32*n/12+1 of them for the n boxes from it on.
	const n = 100
	w, err = walkKinds(slices.Concat(fast, bytes.Repeat(tiny, n)))
	if bound := n * (32*n/12 + 1); err != nil || w.sidxRefs > bound || w.sidxRefs < bound/4 {
		t.Errorf("%d sidx boxes of 32 bytes: %d references read, err %v; want about %d", n, w.sidxRefs, err, bound/2)
	}
	w, err = walkKinds(slices.Concat(fast, bytes.Repeat(tiny, 2000)))
	if !errors.Is(err, ErrBadMP4) || !strings.Contains(err.Error(), "references") || w.sidxRefs != maxSidxRefs+1 {
		t.Errorf("2000 sidx boxes of 32 bytes: %d references read, err %v; want ErrBadMP4 at %d", w.sidxRefs, err, maxSidxRefs+1)
	}
}

// TestMaxStreamsIsAV checks maxStreams against the max_streams option
// package av opens files with.
func TestMaxStreamsIsAV(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("av", "av.c"))
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf(`av_dict_set_int(&o, "max_streams", %d, 0);`, maxStreams); !bytes.Contains(src, []byte(want)) {
		t.Errorf("av/av.c does not set max_streams to maxStreams (%d): want %s", maxStreams, want)
	}
}

// BenchmarkParseMP4SidxRefs parses a file ending in 300 sidx boxes of 32
// bytes, each with 65535 references that run past the end of the file:
// FFmpeg reads them (as zeros), ParseMP4 stops at the end of the file.
func BenchmarkParseMP4SidxRefs(b *testing.B) {
	rate := readVideo(b, "h264_2video_rate.mp4")
	id := be32(rate, trakBox(b, rate, 0, "tkhd")+20)
	data := slices.Concat(moovFirst(b, rate), bytes.Repeat(fbox("sidx", 0, 0, u32s(id, 1, 0, 0, 0xFFFF)), 300))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseMP4(data); err != nil {
			b.Fatal(err)
		}
	}
}
