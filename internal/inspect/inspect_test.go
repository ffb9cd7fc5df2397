package inspect

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/datahelix/datahelix/internal/tartest"

	"github.com/datahelix/datahelix/decode"
	"github.com/datahelix/datahelix/internal/costmodel"
	"github.com/datahelix/datahelix/internal/decoding"
	"github.com/datahelix/datahelix/internal/video/videotest"
)

func TestInspect(t *testing.T) {
	dir := t.TempDir()
	files := []tartest.File{
		{Name: "000001.mp4", Data: string(videotest.Read(t, "h264_bf2.mp4"))},
		{Name: "000001.txt", Data: "a clip"},
		{Name: "000002.webm", Data: string(videotest.Read(t, "vp9.webm"))},
		{Name: "000003.jpg", Data: string(readImage(t, "y420.jpg"))},
		{Name: "000003.txt", Data: "a caption"},
		{Name: "000004.0.png", Data: string(readImage(t, "rgb.png"))},
		{Name: "000004.1.webp", Data: string(readImage(t, "lossy.webp"))},
		{Name: "000004.txt", Data: "doc"},
		{Name: "000005.bin", Data: "junk"},
		{Name: "000006.json", Data: `{"caption": "text only"}`},
	}
	tartest.WriteFile(t, dir, "a.tar", tartest.Write(t, tar.FormatPAX, files))
	var got []RecordSummary
	err := Inspect(context.Background(), []string{dir}, t.TempDir(), costmodel.New(nil), func(s RecordSummary) error {
		got = append(got, s)
		return nil
	})
	if !errors.Is(err, ErrSamplesFailed) || !strings.Contains(err.Error(), "1 of 6") {
		t.Errorf("Inspect error %v, want ErrSamplesFailed for 1 of 6", err)
	}
	want := []struct {
		key, modality, codec string
		width, frames, keys  int
		duration             float64
	}{
		{"000001", "video", "h264", 128, 50, 5, 2},
		{"000002", "video", "vp9", 128, 50, 5, 2},
		{"000003", "image", "jpeg", 96, 1, 0, 0},
		{"000004", "document", "png", 96, 2, 0, 0},
		{"000005", "error", "", 0, 0, 0, 0},
		{"000006", "text", "", 0, 0, 0, 0},
	}
	if len(got) != len(want) {
		t.Fatalf("%d summaries, want %d", len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.Key != w.key || g.Modality != w.modality || g.Codec != w.codec || g.Width != w.width || g.Frames != w.frames || g.Keyframes != w.keys || g.DurationS != w.duration {
			t.Errorf("summary %d = %+v, want %+v", i, g, w)
		}
		if (g.Error != "") != (w.modality == "error") {
			t.Errorf("summary %d: error %q", i, g.Error)
		}
		if w.modality != "error" && g.EstCostUS <= 0 {
			t.Errorf("summary %d: est_cost_us %d", i, g.EstCostUS)
		}
	}
	if !strings.Contains(got[4].Error, "000005") {
		t.Errorf("error summary does not name the sample: %q", got[4].Error)
	}
	// An error row counts bytes as the others do: its members' bytes.
	if got[4].Bytes != int64(len("junk")) || got[0].Bytes != int64(len(videotest.Read(t, "h264_bf2.mp4"))+len("a clip")) {
		t.Errorf("bytes %d (error row) and %d, want %d and the clip's and caption's", got[4].Bytes, got[0].Bytes, len("junk"))
	}
	if err := Inspect(context.Background(), []string{dir + "/missing"}, "", nil, func(RecordSummary) error { return nil }); !errors.Is(err, decode.ErrNoShards) {
		t.Errorf("missing path: err %v, want decode.ErrNoShards", err)
	}
}

// TestInspectShownFramesAndRotation checks the summaries of clips an edit
// list cuts and of clips a display matrix turns against ffprobe (FFmpeg
// 5.1; the figures are hard-coded, and compared with ffprobe when it is
// installed): FramesShown is ffprobe -count_frames' nb_read_frames, not
// the frames the record lists (the 13 pre-roll frames of the cut, the
// P-frame past the edit's end that the shown B-frames refer to),
// DurationS the stream duration, Rotation the side data's rotation and
// the displayed size the one the ffmpeg CLI shows.
func TestInspectShownFramesAndRotation(t *testing.T) {
	tests := []struct {
		file                   string
		frames, shown          int
		duration               float64
		rotation, dispW, dispH int
	}{
		{"h264_sscut.mp4", 50, 37, 1.5, 0, 128, 96},
		{"h264_elsthidden.mp4", 8, 7, 0.28, 0, 128, 96},
		{"h264_elsttail.mp4", 25, 25, 1, 0, 128, 96},
		{"h264_bf2.mp4", 50, 50, 2, 0, 128, 72},
		{"rot90_420.mp4", 10, 10, 0.4, 90, 48, 64},
		{"rot270_420p10.mp4", 10, 10, 0.4, -90, 48, 64},
		{"rot180_444.mp4", 10, 10, 0.4, -180, 64, 48},
		{"upright90.mp4", 3, 3, 0.12, 90, 64, 48},
	}
	var files []tartest.File
	for _, tt := range tests {
		files = append(files, tartest.File{Name: tt.file, Data: string(videotest.Read(t, tt.file))})
	}
	dir := t.TempDir()
	tartest.WriteFile(t, dir, "v.tar", tartest.Write(t, tar.FormatPAX, files))
	got := map[string]RecordSummary{}
	err := Inspect(context.Background(), []string{dir}, t.TempDir(), nil, func(s RecordSummary) error {
		got[s.Key+".mp4"] = s
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	_, probe := exec.LookPath("ffprobe")
	for _, tt := range tests {
		g := got[tt.file]
		if g.Frames != tt.frames || g.FramesShown != tt.shown || g.DurationS != tt.duration || g.Rotation != tt.rotation ||
			g.DisplayWidth != tt.dispW || g.DisplayHeight != tt.dispH {
			t.Errorf("%s: %d frames, %d shown, %.3f s, rotation %d, shown %dx%d; want %d, %d, %.3f, %d, %dx%d", tt.file,
				g.Frames, g.FramesShown, g.DurationS, g.Rotation, g.DisplayWidth, g.DisplayHeight,
				tt.frames, tt.shown, tt.duration, tt.rotation, tt.dispW, tt.dispH)
		}
		if probe != nil {
			continue
		}
		out, err := exec.Command("ffprobe", "-v", "error", "-count_frames", "-select_streams", "v:0", "-show_entries",
			"stream=width,height,nb_read_frames,duration:stream_side_data=rotation", "-of", "default=nw=1",
			filepath.Join(videotest.Dir, tt.file)).Output()
		if err != nil {
			t.Fatalf("ffprobe %s: %v", tt.file, err)
		}
		p := map[string]string{"rotation": "0"}
		for _, line := range strings.Fields(string(out)) {
			if k, v, ok := strings.Cut(line, "="); ok {
				p[k] = v
			}
		}
		if want := fmt.Sprintf("%d %.6f %d %d %d", g.FramesShown, g.DurationS, g.Rotation, g.Width, g.Height); want !=
			strings.Join([]string{p["nb_read_frames"], p["duration"], p["rotation"], p["width"], p["height"]}, " ") {
			t.Errorf("%s: frames shown, duration, rotation, stored size %s; ffprobe says %v", tt.file, want, p)
		}
	}
}

// TestInspectMediaFiles checks that Inspect takes a clip or a picture
// given alone as the one-member sample decode makes of it, in argument
// order among shards, a refused one as an error row naming the file; and
// which paths decoding.IsMediaFile takes: not a shard, a directory or a file that
// does not exist.
func TestInspectMediaFiles(t *testing.T) {
	dir := t.TempDir()
	clip := tartest.WriteFile(t, dir, "clip.MP4", videotest.Read(t, "h264_bf2.mp4"))
	pic := tartest.WriteFile(t, dir, "pic.jpg", readImage(t, "y420.jpg"))
	old := tartest.WriteFile(t, dir, "old.mp4", videotest.Read(t, "refused/mpeg2_mp4v.mp4"))
	shard := tartest.WriteFile(t, dir, "s.tar", tartest.Write(t, tar.FormatPAX, []tartest.File{{Name: "k.txt", Data: "text"}}))
	var got []RecordSummary
	err := Inspect(context.Background(), []string{clip, shard, pic, old}, t.TempDir(), costmodel.New(nil), func(s RecordSummary) error {
		got = append(got, s)
		return nil
	})
	if !errors.Is(err, ErrSamplesFailed) || !strings.Contains(err.Error(), "1 of 4") {
		t.Errorf("Inspect error %v, want ErrSamplesFailed for 1 of 4", err)
	}
	want := []struct{ key, shard, modality, codec string }{
		{"clip", clip, "video", "h264"},
		{"k", shard, "text", ""},
		{"pic", pic, "image", "jpeg"},
		{"old", old, "error", ""},
	}
	if len(got) != len(want) {
		t.Fatalf("%d summaries, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		if g := got[i]; g.Key != w.key || g.Shard != w.shard || g.Modality != w.modality || g.Codec != w.codec {
			t.Errorf("summary %d = %+v, want %+v", i, g, w)
		}
	}
	if e := got[3].Error; !strings.Contains(e, "file "+old) || !strings.Contains(e, "video codec mpeg2video") {
		t.Errorf("refused file's error %q, want it to name the file and the codec", e)
	}
	// A glob matching media files takes each alone, and its shards as
	// shards, in name order; a glob of shards alone is a dataset.
	for glob, want := range map[string]string{"*": "clip old pic k", "[cop]*": "clip old pic", "*.tar": "k"} {
		var keys []string
		Inspect(context.Background(), []string{filepath.Join(dir, glob)}, t.TempDir(), costmodel.New(nil), func(s RecordSummary) error {
			keys = append(keys, s.Key)
			return nil
		})
		if strings.Join(keys, " ") != want {
			t.Errorf("Inspect(%s): keys %q, want %q", glob, keys, want)
		}
	}
	for path, want := range map[string]bool{clip: true, pic: true, shard: false, dir: false, filepath.Join(dir, "none.mp4"): false, tartest.WriteFile(t, dir, "notes.txt", []byte("x")): false} {
		if decoding.IsMediaFile(path) != want {
			t.Errorf("IsMediaFile(%s) = %v, want %v", path, !want, want)
		}
	}
}
