package decode

import (
	"archive/tar"
	"context"
	"errors"
	"strings"
	"testing"
)

func TestInspect(t *testing.T) {
	dir := t.TempDir()
	files := []tarFile{
		{name: "000001.mp4", data: string(readVideo(t, "h264_bf2.mp4"))},
		{name: "000001.txt", data: "a clip"},
		{name: "000002.webm", data: string(readVideo(t, "vp9.webm"))},
		{name: "000003.jpg", data: string(readImage(t, "y420.jpg"))},
		{name: "000003.txt", data: "a caption"},
		{name: "000004.0.png", data: string(readImage(t, "rgb.png"))},
		{name: "000004.1.webp", data: string(readImage(t, "lossy.webp"))},
		{name: "000004.txt", data: "doc"},
		{name: "000005.bin", data: "junk"},
		{name: "000006.json", data: `{"caption": "text only"}`},
	}
	writeFile(t, dir, "a.tar", writeTar(t, tar.FormatPAX, files))
	var got []RecordSummary
	err := Inspect(context.Background(), []string{dir}, t.TempDir(), NewCostModel(nil), func(s RecordSummary) error {
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
	if err := Inspect(context.Background(), []string{dir + "/missing"}, "", nil, func(RecordSummary) error { return nil }); !errors.Is(err, ErrNoShards) {
		t.Errorf("missing path: err %v, want ErrNoShards", err)
	}
}
