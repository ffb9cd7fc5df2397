package mp4

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/datahelix/datahelix/internal/video"
	"github.com/datahelix/datahelix/internal/video/videotest"
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
			v, err := Parse(videotest.Read(t, tt.file))
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
			videotest.Compare(t, tt.file, "v:0", v)
		})
	}
}

// compareProbePrefix checks a clip of which FFmpeg reads packets packets,
// the record listing the first v.Frames: their pts, sizes and discard
// flags must be ffprobe's.
func compareProbePrefix(t *testing.T, file string, v *video.Track, packets int) {
	t.Helper()
	ps := videotest.Probe(t, filepath.Join(videoDir, file), "v:0")
	if len(ps.Packets) != packets || v.Frames > packets {
		t.Fatalf("ffprobe counts %d packets, want %d (has the clip changed?); the record lists %d", len(ps.Packets), packets, v.Frames)
	}
	for i, p := range ps.Packets[:v.Frames] {
		_, discarded := slices.BinarySearch(v.Discarded, i)
		if v.FramePTS[i] != p.PTS || v.FrameBytes[i] != p.Size || discarded != p.Discard {
			t.Errorf("frame %d: pts %d size %d discarded %v, ffprobe says pts %d size %d discarded %v",
				i, v.FramePTS[i], v.FrameBytes[i], discarded, p.PTS, p.Size, p.Discard)
		}
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
		v, err := Parse(box("moov", mvhd, trak(1, 100, 1200, fbox("elst", 0, 0, u32s(tt.elst...)), stbl...)))
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
