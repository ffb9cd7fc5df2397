package decode

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
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

// TestDecodeEditListCut decodes the cut clip: with the record's times off
// by half a frame every sampled frame was missed and five of eight slots
// held the frame before the intended one.
func TestDecodeEditListCut(t *testing.T) {
	const size, n = 32, 8
	data := readVideo(t, "h264_sscut.mp4")
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

// TestParseMP4NoVideoTrack: an audio-only file is valid; the error says
// it has no video track without calling it invalid, and still matches
// ErrBadMP4 so that callers treat it as before.
func TestParseMP4NoVideoTrack(t *testing.T) {
	_, err := ParseMP4(box("moov", fbox("mvhd", 0, 0, u32s(0, 0, 1000, 0)), soundTrak()))
	if !errors.Is(err, ErrBadMP4) || !strings.Contains(err.Error(), "no video track (its tracks: soun)") || strings.Contains(err.Error(), "invalid") {
		t.Errorf("audio-only: err %v, want ErrBadMP4 saying no video track, not invalid", err)
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
		name     string
		elst     []uint32 // count, then (duration, media time, rate) triples
		bytes    []uint32
		pts      []int64
		duration int64
	}{
		// Media time 350 lies between the frames at 300 and 400: the
		// timeline starts at the one at 400 (pts 0), not 50 ticks before
		// it; the frames before it are pre-roll with negative pts.
		{"mid-frame start", []uint32{1, 450, 350, 1 << 16}, seq(12),
			[]int64{-300, 0, -200, -100, 100, 400, 200, 300, 500, 800, 600, 700}, 450},
		// The edit ends at 400: the index stops at the second keyframe
		// after its end (B-frames after the first may still belong to it).
		{"early end", []uint32{1, 300, 100, 1 << 16}, seq(9),
			[]int64{0, 300, 100, 200, 400, 700, 500, 600, 800}, 300},
		// An empty edit, then media 400..600 twice: the frames are listed
		// once per edit, from the keyframe before each.
		{"repeated", []uint32{3, 100, 0xffffffff, 1 << 16, 200, 400, 1 << 16, 200, 400, 1 << 16}, append(seq(9), seq(9)...),
			[]int64{-200, 100, -100, 0, 200, 500, 300, 400, 600, 0, 300, 100, 200, 400, 700, 500, 600, 800}, 500},
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
	}
}
