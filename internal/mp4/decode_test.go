package mp4_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/datahelix/datahelix/decode"
	"github.com/datahelix/datahelix/internal/av"
	"github.com/datahelix/datahelix/internal/decoding"
	"github.com/datahelix/datahelix/internal/mp4"
	"github.com/datahelix/datahelix/internal/video"
	"github.com/datahelix/datahelix/internal/video/videotest"
)

// These tests check the MP4/MOV parser through package decode: that the
// frames it lists are the ones FFmpeg decodes and shows, sampled and
// decoded. They are an external test package so that they may import
// decode, which imports mp4; export_test.go lends them the box builders.

// damageFrames samples more frames than any clip here has, so that every
// frame is decoded (decode's damage tests use the same count).
const damageFrames = 750

// decSample returns a sample of one member per extension, as decode's
// tests build them.
func decSample(key string, members map[string][]byte) *decode.Sample {
	s := &decode.Sample{Shard: "test.tar", Key: key}
	for _, e := range slices.Sorted(maps.Keys(members)) {
		s.Members = append(s.Members, decode.Member{Name: key + "." + e, Ext: e, Data: members[e]})
	}
	return s
}

// checkDecodeSampled decodes 8 sampled frames of a clip and checks that
// none is missed and each slot holds the frame FFmpeg outputs at the
// sampled frame's pts.
func checkDecodeSampled(t *testing.T, file string) {
	const size, n = 32, 8
	data := videotest.Read(t, file)
	s := decSample("clip", map[string][]byte{"mp4": data})
	rec, err := decoding.ParseRecord(s, decoding.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	out, err := decoding.NewDecoder(decoding.Options{Frames: n, Size: size}).Decode(context.Background(), s, rec)
	if err != nil {
		t.Fatal(err)
	}
	if out.MissedFrames != 0 {
		t.Errorf("%d of %d sampled frames missed: the record's times are not FFmpeg's", out.MissedFrames, n)
	}
	ref, byPTS := videotest.AllFrames(t, data, size)
	plane := size * size * 3
	for slot, f := range video.SampleFrames(rec.Video, n) {
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
// video.SampleFrames picks only frames FFmpeg shows.
func TestParseMP4EditTail(t *testing.T) {
	const file = "h264_elsttail.mp4"
	v, err := mp4.Parse(videotest.Read(t, file))
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Check(); err != nil {
		t.Fatal(err)
	}
	if v.Duration != 12800 || v.Frames != 25 || !slices.Equal(v.Keyframes, []int{0, 10, 20}) {
		t.Errorf("duration %d, %d frames, keyframes %v; want 12800, 25, [0 10 20]", v.Duration, v.Frames, v.Keyframes)
	}
	shown := slices.Sorted(slices.Values(v.FramePTS))
	for i, p := range shown {
		if want := 512 * int64(i); p != want {
			t.Fatalf("frame %d in presentation order has pts %d, want %d", i, p, want)
		}
	}
	for _, f := range video.SampleFrames(v, 8) {
		if p := v.FramePTS[f]; p < 0 || p >= v.Duration {
			t.Errorf("video.SampleFrames picked frame %d at pts %d, outside the edit [0, %d)", f, p, v.Duration)
		}
	}
	mp4.CompareProbePrefix(t, file, v, 41)
}

// TestDecodeEditHiddenFrame: the edit of h264_elsthidden.mp4 ends at 7
// frames (make_edits.sh), in decode order after the P-frame of pts 8
// frames and before the B-frames of pts 5 and 6 that refer to it. FFmpeg
// decodes that P-frame, discards it, and shows the 7 frames of
// `ffmpeg -threads 1 -i h264_elsthidden.mp4 -f framemd5 -` (hard-coded
// here). The record lists the P-frame in Discarded; it was an ordinary
// frame before, which video.SampleFrames picked as the 8th of 8 frames: FFmpeg
// never output it, and its slot repeated the frame of pts 6 (a miss).
func TestDecodeEditHiddenFrame(t *testing.T) {
	const file, size, n = "h264_elsthidden.mp4", 32, 8
	framemd5 := []string{
		"4532bbfbcb49755ea329de8917a48abb", "b4e582527116a41fcd007fea7d3d087e", "7f2590bda5538d3327c3ee521ed9db5c",
		"32e183f3f1806c4b3353dcc49ae4ec26", "5b5e9e753b5f91d9dc8a9c0d474d78a9", "9c2bb5c60426b63394362c2bdb80a2ff",
		"b84ed1a6f72cbb6011d2ba2626859489",
	}
	data := videotest.Read(t, file)
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

	v, err := mp4.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Check(); err != nil {
		t.Fatal(err)
	}
	if v.Frames != 8 || !slices.Equal(v.Discarded, []int{5}) || v.Duration != 3584 {
		t.Errorf("%d frames, discarded %v, duration %d; want 8, [5], 3584", v.Frames, v.Discarded, v.Duration)
	}
	mp4.CompareProbePrefix(t, file, v, 25)
	for _, m := range []int{n, damageFrames} {
		var got []int64
		for _, f := range video.SampleFrames(v, m) {
			got = append(got, v.FramePTS[f])
		}
		if !slices.Equal(got, shown) {
			t.Errorf("video.SampleFrames(%d) picks the frames of pts %v, FFmpeg shows %v", m, got, shown)
		}
	}

	// Decoding fills the 8 slots with the 7 frames, spread evenly.
	s := decSample("clip", map[string][]byte{"mp4": data})
	out, err := decoding.NewDecoder(decoding.Options{Frames: n, Size: size}).Decode(context.Background(), s, nil)
	if err != nil {
		t.Fatal(err)
	}
	if out.MissedFrames != 0 || out.Damaged != 0 {
		t.Errorf("%d sampled frames missed, %d damaged; want 0, 0", out.MissedFrames, out.Damaged)
	}
	ref, byPTS := videotest.AllFrames(t, data, size)
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
// mp4.ErrFormat so that callers treat it as before.
func TestParseMP4NoVideoTrack(t *testing.T) {
	_, err := mp4.Parse(mp4.Box("moov", mp4.FullBox("mvhd", 0, 0, mp4.U32s(0, 0, 1000, 0)), mp4.SoundTrak()))
	if !errors.Is(err, mp4.ErrFormat) || !strings.Contains(err.Error(), "no video track (its tracks: soun)") || strings.Contains(err.Error(), "invalid") {
		t.Errorf("audio-only: err %v, want mp4.ErrFormat saying no video track, not invalid", err)
	}
	// A forged handler type puts no control codes in the line.
	forged := mp4.Box("trak", mp4.Box("mdia", mp4.FullBox("hdlr", 0, 0, mp4.U32s(0), []byte("s\n\x1bn"), make([]byte, 13))))
	_, err = mp4.Parse(mp4.Box("moov", mp4.FullBox("mvhd", 0, 0, mp4.U32s(0, 0, 1000, 0)), forged))
	if err == nil || !strings.Contains(err.Error(), "(its tracks: s??n)") {
		t.Errorf("forged handler: err %v, want its control bytes shown as ?", err)
	}
	_, err = decoding.ParseRecord(&decoding.Sample{Shard: "a.mp4", Key: "a", Members: []decoding.Member{{Name: "a.mp4", Ext: "mp4",
		Data: mp4.Box("moov", mp4.SoundTrak())}}}, decoding.Limits{})
	if !errors.Is(err, mp4.ErrFormat) || !strings.Contains(err.Error(), "a.mp4") {
		t.Errorf("audio-only sample: err %v, want mp4.ErrFormat naming the file", err)
	}
}

// TestRepeatedEditList: h264_bf2.mp4 (25 fps, time base 1/12800, B-frames,
// its first frame at media time 1024) with its elst rewritten to an empty
// edit of 40 ms, then 80 ms of media from 1024, twice (movie timescale
// 1000). FFmpeg 5.1 shows 4 frames: the clip's first two, twice, at pts
// 512, 1024, 1536 and 2048; the record lists the frames of each edit
// from its keyframe, most of them discarded. video.SampleFrames must pick those
// 4 and no other: the code before decoding.VideoInfo.Discarded (e3fe287^) picked
// frames of pts up to 12800, which FFmpeg never shows (25 for 750 slots,
// 8 for 8, of which the decode missed 7). The hard-coded pts and MD5s were obtained by writing these bytes
// to a file and running `ffprobe -select_streams v:0 -show_entries
// frame=pts` and `ffmpeg -threads 1 -i FILE -map 0:v -f framemd5 -`
// (FFmpeg 5.1); the test compares with both tools again when ffmpeg is
// installed, and with FFmpeg's libraries (av.FrameMD5s) always.
func TestRepeatedEditList(t *testing.T) {
	orig := videotest.Read(t, "h264_bf2.mp4")
	elst := mp4.FullBox("elst", 0, 0, mp4.U32s(3, 40, 0xffffffff, 1<<16, 80, 1024, 1<<16, 80, 1024, 1<<16))
	data, ok := mp4.ReplaceBox(orig, elst, "moov", "trak", "edts", "elst")
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

	v, err := mp4.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Check(); err != nil {
		t.Fatal(err)
	}
	if v.Frames-len(v.Discarded) != len(wantPTS) {
		t.Errorf("%d frames, %d discarded: %d shown, want %d", v.Frames, len(v.Discarded), v.Frames-len(v.Discarded), len(wantPTS))
	}
	for _, n := range []int{len(wantPTS), decode.DefaultFrames, damageFrames} {
		var got []int64
		for _, f := range video.SampleFrames(v, n) {
			got = append(got, v.FramePTS[f])
		}
		if !slices.Equal(got, wantPTS) {
			t.Errorf("video.SampleFrames(%d) picks the frames of pts %v, want %v", n, got, wantPTS)
		}
	}

	// Decoding fills 8 slots with the 4 frames, two slots each: the
	// original clip's first frame, its second, and both again.
	const size, n = 32, 8
	out, err := decoding.NewDecoder(decoding.Options{Frames: n, Size: size}).Decode(context.Background(), decSample("clip", map[string][]byte{"mp4": data}), nil)
	if err != nil {
		t.Fatal(err)
	}
	if out.MissedFrames != 0 || out.Damaged != 0 {
		t.Errorf("%d sampled frames missed, %d damaged; want 0, 0", out.MissedFrames, out.Damaged)
	}
	ref, byPTS := videotest.AllFrames(t, orig, size)
	plane := size * size * 3
	for slot := range n {
		p := byPTS[int64(512*(slot/2%2))]
		if !bytes.Equal(out.Tensors[0].Data[slot*plane:(slot+1)*plane], ref[p*plane:(p+1)*plane]) {
			t.Errorf("slot %d: not the original clip's frame of pts %d", slot, 512*(slot/2%2))
		}
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

// TestParseMP4PicksFFmpegTrack checks that the record of a clip with two
// video tracks describes the one FFmpeg decodes: its packets as av.Packets
// and ffprobe list them (pts, sizes, keyframes), its picture size; that
// Decode finds every sampled frame, each the only frame FFmpeg outputs at
// its time; and that av.FrameMD5s, which decode --md5 prints, equals `ffmpeg -map 0:v:1 -f framemd5`.
func TestParseMP4PicksFFmpegTrack(t *testing.T) {
	for _, c := range mp4.TwoVideoClips {
		t.Run(c.File, func(t *testing.T) {
			data := videotest.Read(t, c.File)
			v, err := mp4.Parse(data)
			if err != nil {
				t.Fatal(err)
			}
			if err := v.Check(); err != nil {
				t.Fatal(err)
			}
			pk, si, err := av.Packets(context.Background(), data, av.DefaultConfig())
			if err != nil {
				t.Fatal(err)
			}
			if v.Width != c.Width || v.Height != c.Height || si.Width != c.Width || si.Height != c.Height {
				t.Errorf("record %dx%d, FFmpeg decodes %dx%d; want %dx%d", v.Width, v.Height, si.Width, si.Height, c.Width, c.Height)
			}
			if v.Frames != c.Frames || len(pk) != c.Frames {
				t.Fatalf("%d frames, FFmpeg reads %d packets; want %d", v.Frames, len(pk), c.Frames)
			}
			var keys []int
			for i, p := range pk {
				if p.Key {
					keys = append(keys, i)
				}
				if int(v.FrameBytes[i]) != p.Size || videotest.CompareTime(v.FramePTS[i], v.Timescale, p.PTS, si.TimeBase) != 0 {
					t.Errorf("frame %d: pts %d/%d s, %d bytes; FFmpeg's packet %d*%d/%d s, %d bytes", i,
						v.FramePTS[i], v.Timescale, v.FrameBytes[i], p.PTS, si.TimeBase.Num, si.TimeBase.Den, p.Size)
				}
			}
			if !slices.Equal(v.Keyframes, keys) {
				t.Errorf("keyframes %v, FFmpeg's %v", v.Keyframes, keys)
			}
			videotest.Compare(t, c.File, "v:1", v)

			s := decSample("clip", map[string][]byte{"mp4": data})
			rec, err := decoding.ParseRecord(s, decoding.Limits{})
			if err != nil {
				t.Fatal(err)
			}
			const n = 8
			out, err := decoding.NewDecoder(decoding.Options{Frames: n, Size: 16}).Decode(context.Background(), s, rec)
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
			for _, f := range video.SampleFrames(rec.Video, n) {
				matches := 0
				for _, h := range hs {
					if videotest.CompareTime(v.FramePTS[f], v.Timescale, h.PTS, st.TimeBase) == 0 {
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
			raw, err := exec.Command("ffmpeg", "-v", "error", "-threads", "1", "-i", filepath.Join(videotest.Dir, c.File),
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
			got := make([]string, len(hs))
			for i, h := range hs {
				got[i] = hex.EncodeToString(h.MD5[:])
			}
			if len(want) != c.Frames || !slices.Equal(got, want) {
				t.Errorf("av.FrameMD5s gives %d frames, ffmpeg -map 0:v:1 %d (want %d); they differ", len(got), len(want), c.Frames)
			}
		})
	}
}
