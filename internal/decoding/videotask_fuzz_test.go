package decoding

import (
	"bytes"
	"context"
	"slices"
	"testing"
	"time"

	"github.com/datahelix/datahelix/internal/transform"
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

// FuzzDecodeClipTransformed decodes mutated clips the parser accepts
// with a transform (a random crop and flip, a short-side crop, native
// aspect with padding; uniform, segment or fps frames) chosen by the
// input, the crop chosen from the record's size, which a mutated clip's
// frames need not have: FFmpeg's crop must stay inside the frame
// whatever the two sizes, and the tensor must have the shape ClipShape
// announced, within the deadline.
func FuzzDecodeClipTransformed(f *testing.F) {
	for i, name := range []string{"h264_30s.mp4", "h264_frag.mp4", "h264_bf2.mp4", "vp9.webm", "h264.mkv"} {
		f.Add(videotest.Read(f, name), uint8(i), uint16(i))
	}
	exts := []string{"mp4", "mp4", "mp4", "webm", "mkv"}
	lim := Limits{MaxPixels: 1 << 20, MaxImagePixels: 1 << 22, MaxFramesDecoded: 600, SampleDeadline: time.Second}
	specs := []transform.Spec{
		{Resize: transform.RandomCrop, HFlip: 0.5, Scale: [2]float64{0.01, 0.3}, Temporal: transform.Segment, Stride: 3},
		{Resize: transform.ShortSide, HFlip: 1, Temporal: transform.Rate, FPS: 7},
		{Resize: transform.Native, Bucket: 4, HFlip: 0.5},
	}
	var decs []*Decoder
	for _, sp := range specs {
		decs = append(decs, NewDecoder(Options{Frames: 5, Size: 16, Limits: lim, Transform: sp}))
	}
	f.Fuzz(func(t *testing.T, data []byte, kind uint8, epoch uint16) {
		s := decSample("k", map[string][]byte{exts[int(kind)%len(exts)]: data})
		s.Epoch = int(epoch)
		rec, err := ParseRecord(s, Limits{})
		if err != nil || rec.Video == nil {
			return
		}
		d := decs[int(epoch)%len(decs)]
		start := time.Now()
		out, err := d.Decode(context.Background(), s, rec)
		if took := time.Since(start); took > 3*time.Second {
			t.Fatalf("decode took %v", took)
		}
		if err != nil {
			return
		}
		want := d.ClipShape(rec.Video, len(d.ClipTargets(s, rec.Video)))
		if got := out.Tensors[0]; !slices.Equal(got.Shape, want) || len(got.Data) != want[0]*want[1]*want[2]*3 {
			t.Fatalf("tensor %v of %d bytes, ClipShape says %v", got.Shape, len(got.Data), want)
		}
	})
}
