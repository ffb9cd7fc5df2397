// Package videotest holds what the tests of the container parsers and of
// package decode share: the committed test clips (Dir, Read) and ffprobe's
// view of them (Probe, Compare), the reference a parsed track is checked
// against.
package videotest

import (
	"context"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/datahelix/datahelix/internal/av"
	"github.com/datahelix/datahelix/internal/video"
)

// Dir is the directory of the committed test clips, decode/testdata/video
// (see its make*.sh scripts).
var Dir = func() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "decode", "testdata", "video")
}()

// Packet is one video packet as ffprobe reports it.
type Packet struct {
	PTS     int64
	Size    uint32
	Key     bool
	Discard bool // flags "_D": FFmpeg decodes the packet but drops its frame
}

// Stream is what ffprobe reports of a video stream.
type Stream struct {
	Codec         string
	Width, Height int
	TimeBase      string // "1/12800"
	Packets       []Packet
}

// Probe runs the ffprobe CLI on the file at path for the stream that the
// stream specifier spec ("v:0", "v:1") selects; the test is skipped when
// the tool is missing.
func Probe(t *testing.T, path, spec string) Stream {
	t.Helper()
	if _, err := exec.LookPath("ffprobe"); err != nil {
		t.Skip("ffprobe not installed")
	}
	out, err := exec.Command("ffprobe", "-v", "error", "-select_streams", spec,
		"-show_entries", "stream=codec_name,width,height,time_base:packet=pts,size,flags", "-of", "csv", path).Output()
	if err != nil {
		t.Fatalf("ffprobe %s: %v", path, err)
	}
	var ps Stream
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, ",")
		switch {
		case f[0] == "stream" && len(f) >= 5: // stream side data (MPEG-2's CPB properties) may follow
			ps.Codec, ps.TimeBase = f[1], f[4]
			ps.Width, _ = strconv.Atoi(f[2])
			ps.Height, _ = strconv.Atoi(f[3])
		case f[0] == "packet" && len(f) >= 4:
			pts, err1 := strconv.ParseInt(f[1], 10, 64)
			size, err2 := strconv.ParseUint(f[2], 10, 32)
			if err1 != nil || err2 != nil {
				t.Fatalf("ffprobe packet line %q", line)
			}
			ps.Packets = append(ps.Packets, Packet{PTS: pts, Size: uint32(size), Key: strings.HasPrefix(f[3], "K"),
				Discard: len(f[3]) > 1 && f[3][1] == 'D'})
		default:
			t.Fatalf("unexpected ffprobe line %q", line)
		}
	}
	return ps
}

// Read reads the committed test clip name.
func Read(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(Dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// Compare checks a parsed track against ffprobe's view of the same test
// clip: codec, dimensions, time base and every packet's pts, size, key and
// discard flags in decode order, for the stream that the stream specifier
// spec ("v:0") selects.
func Compare(t *testing.T, name, spec string, v *video.Track) {
	t.Helper()
	ps := Probe(t, filepath.Join(Dir, name), spec)
	if v.Codec != ps.Codec || v.Width != ps.Width || v.Height != ps.Height {
		t.Errorf("codec %s %dx%d, ffprobe says %s %dx%d", v.Codec, v.Width, v.Height, ps.Codec, ps.Width, ps.Height)
	}
	if tb := "1/" + strconv.Itoa(int(v.Timescale)); tb != ps.TimeBase {
		t.Errorf("time base %s, ffprobe says %s", tb, ps.TimeBase)
	}
	if v.Frames != len(ps.Packets) || len(v.FramePTS) != len(ps.Packets) || len(v.FrameBytes) != len(ps.Packets) {
		t.Fatalf("%d frames (%d pts, %d sizes), ffprobe counts %d packets", v.Frames, len(v.FramePTS), len(v.FrameBytes), len(ps.Packets))
	}
	var wantKeys, wantDiscarded []int
	for i, p := range ps.Packets {
		if v.FramePTS[i] != p.PTS || v.FrameBytes[i] != p.Size {
			t.Errorf("frame %d: pts %d size %d, ffprobe says pts %d size %d", i, v.FramePTS[i], v.FrameBytes[i], p.PTS, p.Size)
		}
		if p.Key {
			wantKeys = append(wantKeys, i)
		}
		if p.Discard {
			wantDiscarded = append(wantDiscarded, i)
		}
	}
	if !slices.Equal(v.Keyframes, wantKeys) {
		t.Errorf("keyframes %v, ffprobe says %v", v.Keyframes, wantKeys)
	}
	if !slices.Equal(v.Discarded, wantDiscarded) {
		t.Errorf("discarded frames %v, ffprobe flags %v", v.Discarded, wantDiscarded)
	}
}

// SameAsAV checks that v, parsed from data, is the video stream package av
// demuxes from it: picture size, and each packet's size and pts.
func SameAsAV(t *testing.T, name string, data []byte, v *video.Track) {
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
		if int(v.FrameBytes[i]) != p.Size || CompareTime(v.FramePTS[i], v.Timescale, p.PTS, si.TimeBase) != 0 {
			t.Errorf("%s: frame %d: pts %d/%d s, %d bytes; FFmpeg's packet %d*%d/%d s, %d bytes", name, i,
				v.FramePTS[i], v.Timescale, v.FrameBytes[i], p.PTS, si.TimeBase.Num, si.TimeBase.Den, p.Size)
			return
		}
	}
}

// CompareTime compares pts in 1/timescale ticks with got in the time
// base tb exactly: -1, 0 or +1 as pts is before, at or after got.
func CompareTime(pts int64, timescale uint32, got int64, tb av.Rational) int {
	a := new(big.Int).Mul(big.NewInt(pts), big.NewInt(int64(tb.Den)))
	b := new(big.Int).Mul(big.NewInt(got), big.NewInt(int64(tb.Num)*int64(timescale)))
	return a.Cmp(b)
}

// WebMClip is a clip of make_webm.sh with what FFmpeg 5.1 makes of it.
type WebMClip struct {
	File   string
	Frames int // packets FFmpeg reads from the stream it decodes
	// Probe: ffprobe -select_streams v:0 lists that stream, every packet
	// timed, in a time base of 1/Timescale, so Compare applies.
	Probe bool
	// FFmpeg is how `ffmpeg -threads 1 -i FILE ... -f framemd5 -` must be
	// run for FrameMD5s to equal its md5 column (README: -map 0:v).
	FFmpeg string
}

// WebMClips are the clips make_webm.sh writes. Each comment says what the
// parser got wrong before it was matched to FFmpeg's matroska demuxer.
var WebMClips = []WebMClip{
	{"vp9_live.webm", 25, true, "-map 0:v"},
	{"vp9_cuesfront.webm", 25, true, "-map 0:v"},
	// ffprobe prints side data (BlockAdditions, the display matrix) on
	// lines Compare does not read. The Projection's roll of
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
	// Compare does not read) and shows 26 of the 28 frames.
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

// AllFrames decodes every frame of a clip sequentially at size x size, in
// presentation order, and returns them with the decode-order index of
// each presentation position.
func AllFrames(t testing.TB, data []byte, size int) (frames []byte, byPTS map[int64]int) {
	t.Helper()
	pk, _, err := av.Packets(context.Background(), data, av.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	pts := make([]int64, len(pk))
	for i, p := range pk {
		pts[i] = p.PTS
	}
	sort.Slice(pts, func(a, b int) bool { return pts[a] < pts[b] })
	targets := make([]av.Target, len(pts))
	byPTS = map[int64]int{}
	for i, p := range pts {
		targets[i] = av.Target{PTS: p, Slot: i}
		byPTS[p] = i
	}
	cfg := av.DefaultConfig()
	cfg.Width, cfg.Height = size, size
	frames = make([]byte, len(pts)*size*size*3)
	if _, err := av.DecodeTargets(context.Background(), data, cfg, av.Rational{}, targets, frames); err != nil {
		t.Fatal(err)
	}
	return frames, byPTS
}
