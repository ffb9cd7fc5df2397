package decode

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
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
		"rot90_420.mp4", "upright180.mp4", "h264_2video_kind.mp4"} {
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
				box("minf", box("stbl", videoEntry("avc1", 16, uint16(id)),
					fbox("stts", 0, 0, u32s(1, 2, 100)), fbox("stsz", 0, 0, u32s(0, 2, a, b))))))
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
	// A video track that cannot be read fails the file, whichever FFmpeg
	// would decode.
	broken := box("trak", fbox("tkhd", 0, 3, u32s(0, 0, 2, 0, 200)), box("mdia",
		fbox("mdhd", 0, 0, u32s(0, 0, 1000, 200, 0)),
		fbox("hdlr", 0, 0, u32s(0), []byte("vide"), make([]byte, 13)),
		box("minf", box("stbl", videoEntry("avc1", 16, 2), fbox("stts", 0, 0, u32s(1, 2, 100)), fbox("stsz", 0, 0, u32s(0, 1000, 1))))))
	if v, err := ParseMP4(box("moov", track(1, 3, 200, 10, 10), broken)); !errors.Is(err, ErrBadMP4) {
		t.Errorf("broken second track: %+v, %v; want ErrBadMP4", v, err)
	}
}

// TestMP4CodecNames checks the codec names ParseMP4 gives sample entries
// against FFmpeg 5.1's: an MPEG-4 visual entry (mp4v) takes its codec from
// its esds, which may name MPEG-1/2 video, JPEG or PNG (it said mpeg4);
// QuickTime's MPEG-1/2 tags and others FFmpeg knows (it said unknown).
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
		{entry("mp4v", esds(0, 0x40, false)), "mpeg4"}, // an audio type: kept
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
