package decode

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// probePacket is one video packet as ffprobe reports it.
type probePacket struct {
	pts     int64
	size    uint32
	key     bool
	discard bool // flags "_D": FFmpeg decodes the packet but drops its frame
}

// probeStream is what ffprobe reports of a video stream.
type probeStream struct {
	codec         string
	width, height int
	timeBase      string // "1/12800"
	packets       []probePacket
}

// ffprobe runs the ffprobe CLI on a file for its first video stream; the
// test is skipped when the tool is missing.
func ffprobe(t *testing.T, path string) probeStream {
	t.Helper()
	return ffprobeStream(t, path, "v:0")
}

// ffprobeStream runs the ffprobe CLI on a file for the stream that the
// stream specifier spec ("v:1") selects.
func ffprobeStream(t *testing.T, path, spec string) probeStream {
	t.Helper()
	if _, err := exec.LookPath("ffprobe"); err != nil {
		t.Skip("ffprobe not installed")
	}
	out, err := exec.Command("ffprobe", "-v", "error", "-select_streams", spec,
		"-show_entries", "stream=codec_name,width,height,time_base:packet=pts,size,flags", "-of", "csv", path).Output()
	if err != nil {
		t.Fatalf("ffprobe %s: %v", path, err)
	}
	var ps probeStream
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, ",")
		switch {
		case f[0] == "stream" && len(f) >= 5: // stream side data (MPEG-2's CPB properties) may follow
			ps.codec, ps.timeBase = f[1], f[4]
			ps.width, _ = strconv.Atoi(f[2])
			ps.height, _ = strconv.Atoi(f[3])
		case f[0] == "packet" && len(f) >= 4:
			pts, err1 := strconv.ParseInt(f[1], 10, 64)
			size, err2 := strconv.ParseUint(f[2], 10, 32)
			if err1 != nil || err2 != nil {
				t.Fatalf("ffprobe packet line %q", line)
			}
			ps.packets = append(ps.packets, probePacket{pts: pts, size: uint32(size), key: strings.HasPrefix(f[3], "K"),
				discard: len(f[3]) > 1 && f[3][1] == 'D'})
		default:
			t.Fatalf("unexpected ffprobe line %q", line)
		}
	}
	return ps
}

// readVideo reads a committed test clip.
func readVideo(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "video", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// compareWithProbe checks a parsed clip against ffprobe's view of the same
// file: codec, dimensions, time base and every packet's pts, size, key
// and discard flags in decode order, for its first video stream.
func compareWithProbe(t *testing.T, name string, v *VideoInfo) {
	t.Helper()
	compareWithProbeStream(t, name, "v:0", v)
}

// compareWithProbeStream is compareWithProbe for the stream that the
// stream specifier spec selects (ffprobe -select_streams), in a file with
// several video streams.
func compareWithProbeStream(t *testing.T, name, spec string, v *VideoInfo) {
	t.Helper()
	ps := ffprobeStream(t, filepath.Join("testdata", "video", name), spec)
	if v.Codec != ps.codec || v.Width != ps.width || v.Height != ps.height {
		t.Errorf("codec %s %dx%d, ffprobe says %s %dx%d", v.Codec, v.Width, v.Height, ps.codec, ps.width, ps.height)
	}
	if tb := "1/" + strconv.Itoa(int(v.Timescale)); tb != ps.timeBase {
		t.Errorf("time base %s, ffprobe says %s", tb, ps.timeBase)
	}
	if v.Frames != len(ps.packets) || len(v.FramePTS) != len(ps.packets) || len(v.FrameBytes) != len(ps.packets) {
		t.Fatalf("%d frames (%d pts, %d sizes), ffprobe counts %d packets", v.Frames, len(v.FramePTS), len(v.FrameBytes), len(ps.packets))
	}
	var wantKeys, wantDiscarded []int
	for i, p := range ps.packets {
		if v.FramePTS[i] != p.pts || v.FrameBytes[i] != p.size {
			t.Errorf("frame %d: pts %d size %d, ffprobe says pts %d size %d", i, v.FramePTS[i], v.FrameBytes[i], p.pts, p.size)
		}
		if p.key {
			wantKeys = append(wantKeys, i)
		}
		if p.discard {
			wantDiscarded = append(wantDiscarded, i)
		}
	}
	if !equalInts(v.Keyframes, wantKeys) {
		t.Errorf("keyframes %v, ffprobe says %v", v.Keyframes, wantKeys)
	}
	if !equalInts(v.Discarded, wantDiscarded) {
		t.Errorf("discarded frames %v, ffprobe flags %v", v.Discarded, wantDiscarded)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
