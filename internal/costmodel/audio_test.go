package costmodel

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/datahelix/datahelix/internal/decoding"
)

// TestAudioCost: an audio sample is priced by its codec's audio model
// (per call plus per second), a clip's audio track adds its codec's
// price to the clip's when the audio output is on, and not when off.
func TestAudioCost(t *testing.T) {
	m := New(nil)
	m.SetOptions(Options{Frames: 8, Size: 224, AudioRate: 16000})
	for _, tc := range []struct {
		codec string
		want  float64 // µs of 30 s from the start
	}{
		{"mp3", 605 + 806*30},
		{"opus", 1310 + 1552*30},
		{"alac", 405 + 615*30}, // no model of its own: AAC's
	} {
		rec := &decoding.Record{Modality: decoding.ModalityAudio, Audio: &decoding.AudioInfo{Codec: tc.codec, Timescale: 1000, Duration: 30000}}
		if got := float64(m.Estimate(rec)); math.Abs(got-tc.want) > 0.01*tc.want {
			t.Errorf("%s: estimate %v µs, want %v", tc.codec, got, tc.want)
		}
	}
	clip := syntheticVideo(rand.New(rand.NewPCG(1, 2)), "h264")
	silent := m.Estimate(clip)
	clip.Audio = &decoding.AudioInfo{Codec: "aac", Timescale: 1000, Duration: clip.Video.Duration * 1000 / 12800}
	loud := m.Estimate(clip)
	_, x := costFeatures(clip, m.Options())
	if x[7] <= 0 || math.Abs(float64(loud-silent)-1000*x[7]) > 2 {
		t.Errorf("clip with audio: %d µs, without %d, audio feature %v ms: want the difference to be the audio's price", loud, silent, x[7])
	}
	// The span of 8 frames of a clip at least 2 s long, from its start.
	if secs := (x[7]*1000 - 405) / 615; secs < 1 {
		t.Errorf("the audio feature prices %.2f s of audio", secs)
	}
	off := New(nil)
	off.SetOptions(Options{Frames: 8, Size: 224})
	if got := off.Estimate(clip); got != silent {
		t.Errorf("audio off: estimate %d, want the clip's %d", got, silent)
	}
}
