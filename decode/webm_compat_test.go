package decode

import (
	"context"
	"fmt"
	"math"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/datahelix/datahelix/internal/av"
)

// webmClip is a clip of make_webm.sh with what FFmpeg 5.1 makes of it.
type webmClip struct {
	file   string
	frames int // packets FFmpeg reads from the stream it decodes
	// probe: ffprobe -select_streams v:0 lists that stream, every packet
	// timed, in a time base of 1/Timescale, so compareWithProbe applies.
	probe bool
	// ffmpeg is how `ffmpeg -threads 1 -i FILE ... -f framemd5 -` must be
	// run for FrameMD5s to equal its md5 column (README: -map 0:v).
	ffmpeg string
}

// webmClips are the clips make_webm.sh writes. Each comment says what the
// parser got wrong before it was matched to FFmpeg's matroska demuxer.
var webmClips = []webmClip{
	{"vp9_live.webm", 25, true, "-map 0:v"},
	{"vp9_cuesfront.webm", 25, true, "-map 0:v"},
	// ffprobe prints side data (BlockAdditions, the display matrix) on
	// lines compareWithProbe does not read. The Projection's roll of
	// vp9_roll90.webm was not read: its record said upright (inspect:
	// 96x64) while FFmpeg turns its frames to 64x96.
	{"vp9_alpha.webm", 25, false, "-map 0:v"},
	{"vp8_alpha.webm", 25, false, "-map 0:v"},
	{"vp8_altref.webm", 25, true, "-map 0:v"},
	{"vp9_opusfirst.webm", 25, true, "-map 0:v"},
	{"vp9_oneframe.webm", 1, true, "-map 0:v"},
	{"vp9_rec.webm", 25, true, "-map 0:v"},
	{"vp9_roll90.webm", 25, false, "-map 0:v"},
	{"h264_tcs100us.mkv", 25, true, "-map 0:v"},
	// The record described the first video track while FFmpeg decodes
	// the second, the one with FlagDefault (av_find_best_stream): 25
	// frames listed for 30 decoded, 6 of 8 sampled frames missed and
	// filled with others. ffprobe's v:0 and -map 0:v's first stream are
	// the first track; ffmpeg without -map picks the second, as datahelix.
	{"h264_2video.mkv", 30, false, "-map 0:v:1"},
	// CodecDelay on the video track: every pts 80 ms (2 frames) late, so
	// 7 of 8 sampled frames were the one 2 frames later, silently (the
	// 8th, past FFmpeg's last pts, was missed).
	{"vp9_codecdelay.webm", 25, true, "-map 0:v"},
	// Xiph and EBML lacing: sizes were the block's size split evenly,
	// lace header included.
	{"h264_lace_xiph.mkv", 25, true, "-map 0:v"},
	{"h264_lace_ebml.mkv", 25, true, "-map 0:v"},
	{"h264_lace_fixed.mkv", 25, true, "-map 0:v"},
	// Laced without DefaultDuration: FFmpeg gives the 2nd and 3rd frame
	// of each block no timestamp; the record gave them the first's, and
	// SampleFrames picked them, getting the block's first frame instead.
	// The ffmpeg CLI drops untimed frames unless told not to.
	{"h264_lace_nodur.mkv", 25, false, "-map 0:v -vsync passthrough"},
	// Laced BlockGroups of 4 frames with a BlockDuration of 100 ms: the
	// frames were timed 40 ms apart by DefaultDuration, not 25 ms, and 6
	// of 8 sampled frames were missed.
	{"h264_lacegroup.mkv", 25, true, "-map 0:v"},
	// A time base FFmpeg reduces to 333333/1000000000: ffprobe's pts are
	// in ticks, the record's in ns.
	{"h264_tcs333us.mkv", 25, false, "-map 0:v"},
	// Header stripping: every size was 2 bytes short.
	{"h264_headerstrip.mkv", 25, true, "-map 0:v"},
	// An open-GOP clip cut with -ss 1 -c copy: its 2nd and 3rd blocks,
	// leading pictures of the first keyframe, are timed before 0. FFmpeg
	// reads them without a pts (ffprobe prints N/A, which
	// compareWithProbe does not read) and shows 26 of the 28 frames.
	{"h264_opengop_cut.mkv", 28, false, "-map 0:v"},
	// An empty SimpleBlock, which FFmpeg skips, was a frame of 0 bytes.
	{"vp9_emptyblock.webm", 25, true, "-map 0:v"},
	// Damaged. Cut inside the 2nd cluster: its 6 whole blocks were
	// dropped.
	{"damaged/vp9_cut.webm", 18, true, "-map 0:v"},
	// Cut inside the 1st cluster: refused, though FFmpeg decodes 5 frames.
	{"damaged/vp9_cutfirst.webm", 5, true, "-map 0:v"},
	// A block of track 9, which Tracks does not list, in every cluster:
	// FFmpeg resyncs to the next cluster, dropping the rest of this one;
	// the record listed those 20 frames, and 7 of 8 sampled frames were
	// missed.
	{"damaged/vp9_badtrack.webm", 5, true, "-map 0:v"},
}

// TestParseWebMMatchesFFmpeg compares the record of each clip with the
// packets FFmpeg's demuxer gives for the stream the decoder decodes
// (av.Packets): count, pts (as times, since the time bases may differ),
// sizes, keyframes and the turn of the frames; a packet FFmpeg leaves without a pts must be one
// SampleFrames never picks. Where ffprobe shows the same stream, it is
// compared with ffprobe too.
func TestParseWebMMatchesFFmpeg(t *testing.T) {
	for _, c := range webmClips {
		t.Run(c.file, func(t *testing.T) {
			data := readVideo(t, c.file)
			v, err := ParseWebM(data)
			if err != nil {
				t.Fatal(err)
			}
			checkVideoInfo(t, v)
			pk, si, err := av.Packets(context.Background(), data, av.DefaultConfig())
			if err != nil {
				t.Fatal(err)
			}
			if len(pk) != c.frames || v.Frames != len(pk) {
				t.Fatalf("%d frames, FFmpeg reads %d packets, want %d", v.Frames, len(pk), c.frames)
			}
			var keys []int
			for i, p := range pk {
				if p.Key {
					keys = append(keys, i)
				}
				if int(v.FrameBytes[i]) != p.Size {
					t.Errorf("frame %d: %d bytes, FFmpeg's packet %d", i, v.FrameBytes[i], p.Size)
				}
				if p.PTS == math.MinInt64 {
					if !v.hidden(i) {
						t.Errorf("frame %d: FFmpeg gives it no pts, but SampleFrames may pick it (pts %d)", i, v.FramePTS[i])
					}
				} else if cmpTime(v.FramePTS[i], v.Timescale, p.PTS, si.TimeBase) != 0 {
					t.Errorf("frame %d: pts %d/%d s, FFmpeg's %d*%d/%d s", i, v.FramePTS[i], v.Timescale, p.PTS, si.TimeBase.Num, si.TimeBase.Den)
				}
			}
			if !slices.Equal(v.Keyframes, keys) {
				t.Errorf("keyframes %v, FFmpeg's %v", v.Keyframes, keys)
			}
			if v.Turn() != si.Rotation {
				t.Errorf("rotation %v, turn %d; FFmpeg turns the frames by %d", v.Rotation, v.Turn(), si.Rotation)
			}
			if c.probe {
				compareWithProbe(t, c.file, v)
			}
		})
	}
}

// TestDecodeWebMSampledFrames decodes 8 sampled frames of each clip
// through Decode: none may be missed, and each sampled frame's pts must
// be that of exactly one frame FFmpeg outputs, so that the frame decoded
// at it is the frame the record names.
func TestDecodeWebMSampledFrames(t *testing.T) {
	for _, c := range webmClips {
		// 8 frames, and every frame (vp9_codecdelay.webm's first two
		// have negative times: FFmpeg shows them, TestSampleMatroskaNegativePTS).
		for _, n := range []int{8, c.frames} {
			testDecodeWebMSampled(t, c, n)
		}
	}
}

// testDecodeWebMSampled decodes n frames of clip c and checks that each
// sampled frame is one FFmpeg outputs.
func testDecodeWebMSampled(t *testing.T, c webmClip, n int) {
	d := NewDecoder(Options{Frames: n, Size: 16})
	t.Run(fmt.Sprintf("%s/%d", c.file, n), func(t *testing.T) {
		data := readVideo(t, c.file)
		s := &Sample{Shard: "test.tar", Key: "clip", Members: []Member{{Name: "clip.webm", Ext: "webm", Data: data}}}
		rec, err := ParseRecord(s)
		if err != nil {
			t.Fatal(err)
		}
		out, err := d.Decode(context.Background(), s, rec)
		if err != nil {
			t.Fatal(err)
		}
		if out.MissedFrames != 0 {
			t.Errorf("%d sampled frames missed: the record's times are not FFmpeg's", out.MissedFrames)
		}
		hs, st, err := av.FrameMD5s(context.Background(), data, av.DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		v := rec.Video
		picked := SampleFrames(v, n)
		for _, f := range picked {
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
	})
}

// TestWebMFrameMD5sMatchFFmpeg checks FrameMD5s, what `decode --md5`
// prints, against the md5 column of the ffmpeg CLI's framemd5 for each
// clip (skipped without ffmpeg).
func TestWebMFrameMD5sMatchFFmpeg(t *testing.T) {
	if _, err := exec.LookPath("ffmpeg"); err != nil {
		t.Skip("ffmpeg not installed")
	}
	for _, c := range webmClips {
		t.Run(c.file, func(t *testing.T) {
			path := filepath.Join("testdata", "video", c.file)
			args := append([]string{"-v", "error", "-threads", "1", "-i", path}, strings.Fields(c.ffmpeg)...)
			raw, err := exec.Command("ffmpeg", append(args, "-f", "framemd5", "-")...).Output()
			if err != nil {
				t.Fatalf("ffmpeg %v: %v", args, err)
			}
			var want []string
			for _, line := range strings.Split(string(raw), "\n") {
				if f := strings.Split(line, ","); len(f) == 6 && !strings.HasPrefix(line, "#") {
					want = append(want, strings.TrimSpace(f[5]))
				}
			}
			got, err := FrameMD5s(context.Background(), readVideo(t, c.file), Limits{})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Errorf("FrameMD5s gives %d frames, ffmpeg %s %d; they differ", len(got), c.ffmpeg, len(want))
			}
		})
	}
}

// TestSampleMatroskaNegativePTS checks that sampling may pick a Matroska
// frame with a negative time: CodecDelay gives vp9_codecdelay.webm's
// first two frames pts -80 and -40 ms, which FFmpeg shows (unlike an MP4
// pre-roll); sampling every frame skipped them.
func TestSampleMatroskaNegativePTS(t *testing.T) {
	v, err := ParseWebM(readVideo(t, "vp9_codecdelay.webm"))
	if err != nil {
		t.Fatal(err)
	}
	picked := SampleFrames(v, v.Frames)
	if len(picked) != 25 || v.FramePTS[picked[0]] != -80 {
		t.Errorf("sampling all %d frames picks %d, the first at pts %d; want 25 from -80", v.Frames, len(picked), v.FramePTS[picked[0]])
	}
}
