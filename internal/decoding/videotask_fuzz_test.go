package decoding

import (
	"bytes"
	"context"
	"slices"
	"testing"
	"time"

	"github.com/datahelix/datahelix/internal/video"
	"github.com/datahelix/datahelix/internal/video/videotest"
)

// FuzzDecodeVideoTasks splits mutated clips the parser accepts into
// keyframe-aligned tasks, as the planned loaders do, and decodes each
// task on its own into a fresh tensor: it must succeed or fail within the
// deadline, and write no frame outside its own slots (the other tasks of
// the sample fill those at the same time).
func FuzzDecodeVideoTasks(f *testing.F) {
	for i, name := range []string{"h264_30s.mp4", "h264_frag.mp4", "h264_bf2.mp4", "vp9.webm", "h264.mkv"} {
		f.Add(videotest.Read(f, name), uint8(i))
	}
	const frames, size = 6, 8
	d := NewDecoder(Options{Frames: frames, Size: size, Limits: Limits{
		MaxPixels: 1 << 20, MaxImagePixels: 1 << 22, MaxFramesDecoded: 600, SampleDeadline: time.Second,
	}})
	exts := []string{"mp4", "mp4", "mp4", "webm", "mkv"}
	// The long clip's keyframes give several tasks, which is the point.
	if rec, err := ParseRecord(decSample("k", map[string][]byte{"mp4": videotest.Read(f, "h264_30s.mp4")}), Limits{}); err != nil {
		f.Fatal(err)
	} else if n := len(video.PlanTasks(rec.Video, video.SampleFrames(rec.Video, frames), 4)); n < 2 {
		f.Fatalf("h264_30s.mp4 splits into %d task, want several", n)
	}
	frameBytes := size * size * 3
	f.Fuzz(func(t *testing.T, data []byte, kind uint8) {
		rec, err := ParseRecord(decSample("k", map[string][]byte{exts[int(kind)%len(exts)]: data}), Limits{})
		if err != nil || rec.Video == nil || rec.Video.FrameCountEstimated {
			return
		}
		v := rec.Video
		tasks := video.PlanTasks(v, video.SampleFrames(v, frames), 4)
		for _, task := range tasks {
			dst := bytes.Repeat([]byte{0xAB}, frames*frameBytes)
			start := time.Now()
			_, err := d.DecodeVideoTask(context.Background(), data, v, task, dst)
			if took := time.Since(start); took > 3*time.Second {
				t.Fatalf("task %+v took %v", task, took)
			}
			if err != nil {
				continue
			}
			for slot := range frames {
				if slices.Contains(task.Slots, slot) {
					continue
				}
				if frame := dst[slot*frameBytes : (slot+1)*frameBytes]; !bytes.Equal(frame, bytes.Repeat([]byte{0xAB}, frameBytes)) {
					t.Fatalf("task %+v wrote slot %d, not one of its own", task, slot)
				}
			}
		}
	})
}
