package inspect

import (
	"archive/tar"
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/datahelix/datahelix/internal/tartest"

	"github.com/datahelix/datahelix/decode"
	"github.com/datahelix/datahelix/internal/costmodel"
	"github.com/datahelix/datahelix/internal/decoding"
	"github.com/datahelix/datahelix/internal/video/videotest"
)

func TestEvaluateCostModel(t *testing.T) {
	dir := t.TempDir()
	clips := []string{"h264_bf2.mp4", "hevc.mp4", "vp9.webm", "av1.mp4"}
	for s := 0; s < 2; s++ {
		var files []tartest.File
		for i, c := range clips {
			files = append(files, tartest.File{Name: fmt.Sprintf("%d%02d.mp4", s, i), Data: string(videotest.Read(t, c))})
			files = append(files, tartest.File{Name: fmt.Sprintf("%d%02d.jpg", s, i+10), Data: string(readImage(t, "y420.jpg"))})
		}
		if s == 1 {
			files = append(files, tartest.File{Name: "199.mp4", Data: "not a video"})
		}
		tartest.WriteFile(t, dir, fmt.Sprintf("s%d.tar", s), tartest.Write(t, tar.FormatPAX, files))
	}
	ds, err := decode.OpenDataset(dir, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	m := costmodel.New(nil)
	m.SetOptions(costmodel.Options{Frames: 4, Size: 64})
	calls := 0
	rep, err := EvaluateCostModel(context.Background(), ds, decoding.NewDecoder(decoding.Options{Frames: 4, Size: 64}), m, CostEvalOptions{Warmup: 10}, func(done, total int) {
		calls++
		if total != 17 {
			t.Errorf("progress total %d, want 17", total)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Warmup != 10 || rep.HeldOut != 6 || len(rep.Failed) != 1 || len(rep.Observations) != 16 || calls != 16 {
		t.Errorf("warm-up %d, held out %d, failed %v, %d observations, %d progress calls; want 10, 6, 1, 16, 16",
			rep.Warmup, rep.HeldOut, rep.Failed, len(rep.Observations), calls)
	}
	all := rep.Rows[len(rep.Rows)-1]
	if all.Key != "all" || all.Count != 6 || !(all.MAPE >= 0) || !(all.OnlineMAPE >= 0) || all.MeanMeasured <= 0 {
		t.Errorf("overall row %+v", all)
	}
	sum := 0
	for _, r := range rep.Rows[:len(rep.Rows)-1] {
		sum += r.Count
	}
	if sum != 6 {
		t.Errorf("per-key rows count %d held-out samples, want 6", sum)
	}
	// The caller's model learned from every sample (online), the frozen
	// copy behind MAPE only from the warm-up.
	var state struct {
		Observed int `json:"observed"`
	}
	if data, err := m.MarshalJSON(); err != nil || json.Unmarshal(data, &state) != nil || state.Observed != 16 {
		t.Errorf("model observed %d samples (%v), want 16", state.Observed, err)
	}
	// Round-robin: the first two samples come from different shards.
	if rep.Observations[0].Record.Shard == rep.Observations[1].Record.Shard {
		t.Errorf("samples not taken round-robin over shards")
	}
}
