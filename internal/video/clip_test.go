package video_test

import (
	"reflect"
	"testing"

	"github.com/datahelix/datahelix/internal/mp4"
	"github.com/datahelix/datahelix/internal/video"
	"github.com/datahelix/datahelix/internal/video/videotest"
)

// TestSampleFramesClip checks SampleFrames on the real B-frame clip,
// whose decode order differs from its presentation order, against the
// reference. It parses the clip with internal/mp4, which imports this
// package, so it is in video_test.
func TestSampleFramesClip(t *testing.T) {
	v, err := mp4.Parse(videotest.Read(t, "h264_bf2.mp4"))
	if err != nil {
		t.Fatal(err)
	}
	got := video.SampleFrames(v, 8)
	if want := video.SampleFramesReference(v, 8); !reflect.DeepEqual(got, want) {
		t.Errorf("h264_bf2.mp4: got %v, want %v", got, want)
	}
	if len(got) != 8 {
		t.Errorf("h264_bf2.mp4: %d frames, want 8", len(got))
	}
}

// BenchmarkPlanTasks plans 8 frames of the 30 s clip into 4 tasks.
func BenchmarkPlanTasks(b *testing.B) {
	v, err := mp4.Parse(videotest.Read(b, "h264_30s.mp4"))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		video.PlanTasks(v, video.SampleFrames(v, 8), 4)
	}
}
