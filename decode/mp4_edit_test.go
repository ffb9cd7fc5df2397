package decode

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/datahelix/datahelix/internal/av"
)

// TestParseMP4EditTiming checks clips whose timing FFmpeg derives from
// more than the composition times (testdata/video/make_edits.sh): a cut
// whose edit list starts between frames, and a fragmented file whose moov
// holds the first fragment. The values are ffprobe's (FFmpeg 5.1).
func TestParseMP4EditTiming(t *testing.T) {
	tests := []struct {
		file      string
		duration  int64 // ffprobe stream duration_ts
		frames    int   // packets
		shown     int   // frames decoded and output (pts >= 0)
		firstPTS  int64 // smallest pts of a shown frame
		keyframes []int
	}{
		// Edit media time 7424 (14.5 frames): FFmpeg starts the timeline
		// at the first frame shown (cts 7680), not at 7424, and keeps the
		// 13 frames before it as pre-roll with negative pts.
		{"h264_sscut.mp4", 19200, 50, 37, 0, []int{0}},
		// mdhd says 10240 (the moov's 20 frames); the fragments run to 25600.
		{"h264_fragmoov.mp4", 25600, 50, 50, 1024, []int{0, 20, 40}},
		// CMAF: the fragments' composition offsets go down to -1024 (trun
		// version 1), which FFmpeg adds back to every pts (its dts_shift):
		// the first frame shows at 1024, not 0.
		{"h264_cmaf.mp4", 25600, 50, 50, 1024, []int{0, 20, 40}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			v, err := ParseMP4(readVideo(t, tt.file))
			if err != nil {
				t.Fatal(err)
			}
			checkVideoInfo(t, v)
			var shown []int64
			for _, p := range v.FramePTS {
				if p >= 0 {
					shown = append(shown, p)
				}
			}
			slices.Sort(shown)
			if v.Duration != tt.duration || v.Frames != tt.frames || len(shown) != tt.shown || !slices.Equal(v.Keyframes, tt.keyframes) {
				t.Errorf("duration %d, %d frames, %d shown, keyframes %v; want %d, %d, %d, %v",
					v.Duration, v.Frames, len(shown), v.Keyframes, tt.duration, tt.frames, tt.shown, tt.keyframes)
			}
			for i, p := range shown {
				if want := tt.firstPTS + 512*int64(i); p != want {
					t.Fatalf("shown frame %d has pts %d, want %d (25 fps at 1/12800)", i, p, want)
				}
			}
			compareWithProbe(t, tt.file, v)
		})
	}
}

// TestDecodeEditListCut decodes clips whose timing comes from more than
// the composition times. In the cut clip, with the record's times off by
// half a frame every sampled frame was missed and five of eight slots
// held the frame before the intended one; in the clip whose edit ends
// early, 3 of 8 sampled frames lay past the edit's end, which FFmpeg
// reads but never outputs.
func TestDecodeEditListCut(t *testing.T) {
	for _, file := range []string{"h264_sscut.mp4", "h264_cmaf.mp4", "h264_elsttail.mp4"} {
		t.Run(file, func(t *testing.T) { checkDecodeSampled(t, file) })
	}
}

// checkDecodeSampled decodes 8 sampled frames of a clip and checks that
// none is missed and each slot holds the frame FFmpeg outputs at the
// sampled frame's pts.
func checkDecodeSampled(t *testing.T, file string) {
	const size, n = 32, 8
	data := readVideo(t, file)
	s := decSample("clip", map[string][]byte{"mp4": data})
	rec, err := ParseRecord(s)
	if err != nil {
		t.Fatal(err)
	}
	out, err := NewDecoder(Options{Frames: n, Size: size}).Decode(context.Background(), s, rec)
	if err != nil {
		t.Fatal(err)
	}
	if out.MissedFrames != 0 {
		t.Errorf("%d of %d sampled frames missed: the record's times are not FFmpeg's", out.MissedFrames, n)
	}
	ref, byPTS := allFrames(t, data, size)
	plane := size * size * 3
	for slot, f := range SampleFrames(rec.Video, n) {
		p, ok := byPTS[rec.Video.FramePTS[f]]
		if !ok {
			t.Fatalf("slot %d: frame %d has pts %d, which FFmpeg does not report", slot, f, rec.Video.FramePTS[f])
		}
		if !bytes.Equal(out.Tensors[0].Data[slot*plane:(slot+1)*plane], ref[p*plane:(p+1)*plane]) {
			t.Errorf("slot %d (frame %d, pts %d): differs from the sequential decode", slot, f, rec.Video.FramePTS[f])
		}
	}
}

// TestParseMP4EditTail: the edit of h264_elsttail.mp4 shows 1 s of 2 s of
// media (make_edits.sh). FFmpeg reads 41 packets up to the second
// keyframe after the edit's end but discards the 16 past it and outputs
// 25 frames; the record lists those 25, the first 25 packets, so that
// SampleFrames picks only frames FFmpeg shows.
func TestParseMP4EditTail(t *testing.T) {
	const file = "h264_elsttail.mp4"
	v, err := ParseMP4(readVideo(t, file))
	if err != nil {
		t.Fatal(err)
	}
	checkVideoInfo(t, v)
	if v.Duration != 12800 || v.Frames != 25 || !slices.Equal(v.Keyframes, []int{0, 10, 20}) {
		t.Errorf("duration %d, %d frames, keyframes %v; want 12800, 25, [0 10 20]", v.Duration, v.Frames, v.Keyframes)
	}
	shown := slices.Sorted(slices.Values(v.FramePTS))
	for i, p := range shown {
		if want := 512 * int64(i); p != want {
			t.Fatalf("frame %d in presentation order has pts %d, want %d", i, p, want)
		}
	}
	for _, f := range SampleFrames(v, 8) {
		if p := v.FramePTS[f]; p < 0 || p >= v.Duration {
			t.Errorf("SampleFrames picked frame %d at pts %d, outside the edit [0, %d)", f, p, v.Duration)
		}
	}
	compareProbePrefix(t, file, v, 41)
}

// compareProbePrefix checks a clip of which FFmpeg reads packets packets,
// the record listing the first v.Frames: their pts, sizes and discard
// flags must be ffprobe's.
func compareProbePrefix(t *testing.T, file string, v *VideoInfo, packets int) {
	t.Helper()
	ps := ffprobe(t, filepath.Join("testdata", "video", file))
	if len(ps.packets) != packets || v.Frames > packets {
		t.Fatalf("ffprobe counts %d packets, want %d (has the clip changed?); the record lists %d", len(ps.packets), packets, v.Frames)
	}
	for i, p := range ps.packets[:v.Frames] {
		_, discarded := slices.BinarySearch(v.Discarded, i)
		if v.FramePTS[i] != p.pts || v.FrameBytes[i] != p.size || discarded != p.discard {
			t.Errorf("frame %d: pts %d size %d discarded %v, ffprobe says pts %d size %d discarded %v",
				i, v.FramePTS[i], v.FrameBytes[i], discarded, p.pts, p.size, p.discard)
		}
	}
}

// TestDecodeEditHiddenFrame: the edit of h264_elsthidden.mp4 ends at 7
// frames (make_edits.sh), in decode order after the P-frame of pts 8
// frames and before the B-frames of pts 5 and 6 that refer to it. FFmpeg
// decodes that P-frame, discards it, and shows the 7 frames of
// `ffmpeg -threads 1 -i h264_elsthidden.mp4 -f framemd5 -` (hard-coded
// here). The record lists the P-frame in Discarded; it was an ordinary
// frame before, which SampleFrames picked as the 8th of 8 frames: FFmpeg
// never output it, and its slot repeated the frame of pts 6 (a miss).
func TestDecodeEditHiddenFrame(t *testing.T) {
	const file, size, n = "h264_elsthidden.mp4", 32, 8
	framemd5 := []string{
		"4532bbfbcb49755ea329de8917a48abb", "b4e582527116a41fcd007fea7d3d087e", "7f2590bda5538d3327c3ee521ed9db5c",
		"32e183f3f1806c4b3353dcc49ae4ec26", "5b5e9e753b5f91d9dc8a9c0d474d78a9", "9c2bb5c60426b63394362c2bdb80a2ff",
		"b84ed1a6f72cbb6011d2ba2626859489",
	}
	data := readVideo(t, file)
	hs, _, err := av.FrameMD5s(context.Background(), data, av.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if len(hs) != len(framemd5) {
		t.Fatalf("FFmpeg outputs %d frames, framemd5 lists %d", len(hs), len(framemd5))
	}
	var shown []int64 // pts of the frames FFmpeg outputs
	for i, h := range hs {
		if got := hex.EncodeToString(h.MD5[:]); got != framemd5[i] {
			t.Errorf("frame %d: MD5 %s, framemd5 says %s", i, got, framemd5[i])
		}
		shown = append(shown, h.PTS)
	}

	v, err := ParseMP4(data)
	if err != nil {
		t.Fatal(err)
	}
	checkVideoInfo(t, v)
	if v.Frames != 8 || !slices.Equal(v.Discarded, []int{5}) || v.Duration != 3584 {
		t.Errorf("%d frames, discarded %v, duration %d; want 8, [5], 3584", v.Frames, v.Discarded, v.Duration)
	}
	compareProbePrefix(t, file, v, 25)
	for _, m := range []int{n, damageFrames} {
		var got []int64
		for _, f := range SampleFrames(v, m) {
			got = append(got, v.FramePTS[f])
		}
		if !slices.Equal(got, shown) {
			t.Errorf("SampleFrames(%d) picks the frames of pts %v, FFmpeg shows %v", m, got, shown)
		}
	}

	// Decoding fills the 8 slots with the 7 frames, spread evenly.
	s := decSample("clip", map[string][]byte{"mp4": data})
	out, err := NewDecoder(Options{Frames: n, Size: size}).Decode(context.Background(), s, nil)
	if err != nil {
		t.Fatal(err)
	}
	if out.MissedFrames != 0 || out.Damaged != 0 {
		t.Errorf("%d sampled frames missed, %d damaged; want 0, 0", out.MissedFrames, out.Damaged)
	}
	ref, byPTS := allFrames(t, data, size)
	plane := size * size * 3
	for slot := 0; slot < n; slot++ {
		p := byPTS[shown[slot*len(shown)/n]]
		if !bytes.Equal(out.Tensors[0].Data[slot*plane:(slot+1)*plane], ref[p*plane:(p+1)*plane]) {
			t.Errorf("slot %d: not the frame of pts %d FFmpeg shows", slot, shown[slot*len(shown)/n])
		}
	}
}

// TestParseMP4NoVideoTrack: an audio-only file is valid; the error says
// it has no video track without calling it invalid, and still matches
// ErrBadMP4 so that callers treat it as before.
func TestParseMP4NoVideoTrack(t *testing.T) {
	_, err := ParseMP4(box("moov", fbox("mvhd", 0, 0, u32s(0, 0, 1000, 0)), soundTrak()))
	if !errors.Is(err, ErrBadMP4) || !strings.Contains(err.Error(), "no video track (its tracks: soun)") || strings.Contains(err.Error(), "invalid") {
		t.Errorf("audio-only: err %v, want ErrBadMP4 saying no video track, not invalid", err)
	}
	// A forged handler type puts no control codes in the line.
	forged := box("trak", box("mdia", fbox("hdlr", 0, 0, u32s(0), []byte("s\n\x1bn"), make([]byte, 13))))
	_, err = ParseMP4(box("moov", fbox("mvhd", 0, 0, u32s(0, 0, 1000, 0)), forged))
	if err == nil || !strings.Contains(err.Error(), "(its tracks: s??n)") {
		t.Errorf("forged handler: err %v, want its control bytes shown as ?", err)
	}
	_, err = ParseRecord(&Sample{Shard: "a.mp4", Key: "a", Members: []Member{{Name: "a.mp4", Ext: "mp4",
		Data: box("moov", soundTrak())}}})
	if !errors.Is(err, ErrBadMP4) || !strings.Contains(err.Error(), "a.mp4") {
		t.Errorf("audio-only sample: err %v, want ErrBadMP4 naming the file", err)
	}
}

// TestParseMP4EditIndex checks the edit-list rules on a hand-made track
// of 1/100 s frames in three GOPs of I P B B (decode order), composition
// times 100 400 200 300 | 500 800 600 700 | 900 1200 1000 1100. The
// expected values follow FFmpeg 5.1's mov_fix_index by hand.
func TestParseMP4EditIndex(t *testing.T) {
	stbl := [][]byte{
		videoEntry("avc1", 16, 16),
		fbox("stts", 0, 0, u32s(1, 12, 100)),
		fbox("ctts", 0, 0, u32s(9, 1, 100, 1, 300, 2, 0, 1, 100, 1, 300, 2, 0, 1, 100, 1, 300, 2, 0)),
		fbox("stsz", 0, 0, u32s(0, 12, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12)),
		fbox("stss", 0, 0, u32s(3, 1, 5, 9)),
	}
	mvhd := fbox("mvhd", 0, 0, u32s(0, 0, 100, 0))
	seq := func(n uint32) []uint32 {
		var s []uint32
		for i := uint32(1); i <= n; i++ {
			s = append(s, i)
		}
		return s
	}
	tests := []struct {
		name      string
		elst      []uint32 // count, then (duration, media time, rate) triples
		bytes     []uint32
		pts       []int64
		discarded []int // outside the edit: FFmpeg decodes them, shows none
		duration  int64
	}{
		// Media time 350 lies between the frames at 300 and 400: the
		// timeline starts at the one at 400 (pts 0), not 50 ticks before
		// it; the frames before it are pre-roll with negative pts. FFmpeg
		// also reads the last GOP (composition 900..1200, past the edit's
		// end at 800) and discards it: it is not listed. The frame of
		// composition 800, at the edit's end, is discarded but listed:
		// frames shown after it are decoded after it.
		{"mid-frame start", []uint32{1, 450, 350, 1 << 16}, seq(8),
			[]int64{-300, 0, -200, -100, 100, 400, 200, 300}, []int{0, 2, 3, 5}, 450},
		// The edit ends at 400: FFmpeg's index runs to the second keyframe
		// after its end (B-frames after the first may still belong to it),
		// but only frames up to the last one shown are listed. The second
		// (composition 400) is discarded too but stays: the third and
		// fourth, shown, are decoded after it.
		{"early end", []uint32{1, 300, 100, 1 << 16}, seq(4),
			[]int64{0, 300, 100, 200}, []int{1}, 300},
		// An empty edit, then media 400..600 twice: the frames are listed
		// once per edit, from the keyframe before each, the second time up
		// to the last frame it shows. Each shows two frames, of
		// composition 400 and 500.
		{"repeated", []uint32{3, 100, 0xffffffff, 1 << 16, 200, 400, 1 << 16, 200, 400, 1 << 16}, append(seq(9), seq(5)...),
			[]int64{-200, 100, -100, 0, 200, 500, 300, 400, 600, 0, 300, 100, 200, 400}, []int{0, 2, 3, 5, 6, 7, 8, 9, 11, 12}, 500},
	}
	for _, tt := range tests {
		v, err := ParseMP4(box("moov", mvhd, trak(1, 100, 1200, fbox("elst", 0, 0, u32s(tt.elst...)), stbl...)))
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		checkVideoInfo(t, v)
		if !slices.Equal(v.FrameBytes, tt.bytes) || !slices.Equal(v.FramePTS, tt.pts) || v.Duration != tt.duration {
			t.Errorf("%s: frames %v pts %v duration %d, want %v %v %d", tt.name, v.FrameBytes, v.FramePTS, v.Duration, tt.bytes, tt.pts, tt.duration)
		}
		if !slices.Equal(v.Discarded, tt.discarded) {
			t.Errorf("%s: discarded %v, want %v", tt.name, v.Discarded, tt.discarded)
		}
	}
}

// replaceBox returns data with the box at path (a box type per level, the
// first box of each type that holds the rest of the path) replaced by
// repl, its parents' sizes adjusted; ok is false when there is no such
// box. A box after the replaced one moves: this suits a file whose moov
// follows its mdat, as ffmpeg writes it without +faststart.
func replaceBox(data, repl []byte, path ...string) (out []byte, ok bool) {
	it := boxIter{b: data}
	for {
		start := it.off
		typ, body, more := it.next()
		if !more {
			return out, ok && it.err == nil
		}
		raw := data[start:it.off]
		if !ok && string(typ[:]) == path[0] {
			if len(path) == 1 {
				raw, ok = repl, true
			} else if inner, found := replaceBox(body, repl, path[1:]...); found {
				raw, ok = box(path[0], inner), true
			}
		}
		out = append(out, raw...)
	}
}

// TestRepeatedEditList: h264_bf2.mp4 (25 fps, time base 1/12800, B-frames,
// its first frame at media time 1024) with its elst rewritten to an empty
// edit of 40 ms, then 80 ms of media from 1024, twice (movie timescale
// 1000). FFmpeg 5.1 shows 4 frames: the clip's first two, twice, at pts
// 512, 1024, 1536 and 2048; the record lists the frames of each edit
// from its keyframe, most of them discarded. SampleFrames must pick those
// 4 and no other: the code before VideoInfo.Discarded (e3fe287^) picked
// frames of pts up to 12800, which FFmpeg never shows (25 for 750 slots,
// 8 for 8, of which the decode missed 7). The hard-coded pts and MD5s were obtained by writing these bytes
// to a file and running `ffprobe -select_streams v:0 -show_entries
// frame=pts` and `ffmpeg -threads 1 -i FILE -map 0:v -f framemd5 -`
// (FFmpeg 5.1); the test compares with both tools again when ffmpeg is
// installed, and with FFmpeg's libraries (av.FrameMD5s) always.
func TestRepeatedEditList(t *testing.T) {
	orig := readVideo(t, "h264_bf2.mp4")
	elst := fbox("elst", 0, 0, u32s(3, 40, 0xffffffff, 1<<16, 80, 1024, 1<<16, 80, 1024, 1<<16))
	data, ok := replaceBox(orig, elst, "moov", "trak", "edts", "elst")
	if !ok {
		t.Fatal("h264_bf2.mp4: no moov/trak/edts/elst box")
	}
	wantPTS := []int64{512, 1024, 1536, 2048}
	framemd5 := []string{
		"397774fd8b1da81ac2b0fff7f8cb80d4", "fca528d1e2b9a9b56f948523549ece5e",
		"397774fd8b1da81ac2b0fff7f8cb80d4", "fca528d1e2b9a9b56f948523549ece5e",
	}
	hs, _, err := av.FrameMD5s(context.Background(), data, av.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	var pts []int64
	var sums []string
	for _, h := range hs {
		pts = append(pts, h.PTS)
		sums = append(sums, hex.EncodeToString(h.MD5[:]))
	}
	if !slices.Equal(pts, wantPTS) || !slices.Equal(sums, framemd5) {
		t.Fatalf("FFmpeg's libraries show the frames of pts %v, MD5s %v; want %v, %v", pts, sums, wantPTS, framemd5)
	}
	if ff, err := exec.LookPath("ffmpeg"); err != nil {
		t.Log("ffmpeg not installed: checked against the hard-coded framemd5 only")
	} else {
		file := filepath.Join(t.TempDir(), "repeated.mp4")
		if err := os.WriteFile(file, data, 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(ff, "-nostdin", "-v", "error", "-threads", "1", "-i", file, "-map", "0:v", "-f", "framemd5", "-").Output()
		if err != nil {
			t.Fatalf("ffmpeg: %v", err)
		}
		var cli []string
		for _, line := range strings.Split(string(out), "\n") {
			if f := strings.Split(line, ","); len(f) == 6 && !strings.HasPrefix(line, "#") {
				cli = append(cli, strings.TrimSpace(f[5]))
			}
		}
		if !slices.Equal(cli, framemd5) {
			t.Errorf("ffmpeg -f framemd5 lists %v, want %v", cli, framemd5)
		}
		// framemd5 gives pts from 0 in 1/25 s; ffprobe gives the stream's.
		if out, err = exec.Command(filepath.Join(filepath.Dir(ff), "ffprobe"), "-v", "error", "-select_streams", "v:0",
			"-show_entries", "frame=pts", "-of", "csv=p=0", file).Output(); err != nil {
			t.Fatalf("ffprobe: %v", err)
		}
		var probed []int64
		for _, f := range strings.Fields(string(out)) {
			p, err := strconv.ParseInt(strings.TrimSuffix(f, ","), 10, 64)
			if err != nil {
				t.Fatalf("ffprobe frame line %q", f)
			}
			probed = append(probed, p)
		}
		if !slices.Equal(probed, wantPTS) {
			t.Errorf("ffprobe shows frames of pts %v, want %v", probed, wantPTS)
		}
	}

	v, err := ParseMP4(data)
	if err != nil {
		t.Fatal(err)
	}
	checkVideoInfo(t, v)
	if v.Frames-len(v.Discarded) != len(wantPTS) {
		t.Errorf("%d frames, %d discarded: %d shown, want %d", v.Frames, len(v.Discarded), v.Frames-len(v.Discarded), len(wantPTS))
	}
	for _, n := range []int{len(wantPTS), DefaultFrames, damageFrames} {
		var got []int64
		for _, f := range SampleFrames(v, n) {
			got = append(got, v.FramePTS[f])
		}
		if !slices.Equal(got, wantPTS) {
			t.Errorf("SampleFrames(%d) picks the frames of pts %v, want %v", n, got, wantPTS)
		}
	}

	// Decoding fills 8 slots with the 4 frames, two slots each: the
	// original clip's first frame, its second, and both again.
	const size, n = 32, 8
	out, err := NewDecoder(Options{Frames: n, Size: size}).Decode(context.Background(), decSample("clip", map[string][]byte{"mp4": data}), nil)
	if err != nil {
		t.Fatal(err)
	}
	if out.MissedFrames != 0 || out.Damaged != 0 {
		t.Errorf("%d sampled frames missed, %d damaged; want 0, 0", out.MissedFrames, out.Damaged)
	}
	ref, byPTS := allFrames(t, orig, size)
	plane := size * size * 3
	for slot := range n {
		p := byPTS[int64(512*(slot/2%2))]
		if !bytes.Equal(out.Tensors[0].Data[slot*plane:(slot+1)*plane], ref[p*plane:(p+1)*plane]) {
			t.Errorf("slot %d: not the original clip's frame of pts %d", slot, 512*(slot/2%2))
		}
	}
}
