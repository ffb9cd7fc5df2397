package decode

import (
	"bytes"
	"context"
	"testing"
)

// TestDamageIsCounted flips 16 bytes in the middle of an H.264 clip:
// FFmpeg conceals the damage and the clip decodes, which left no sign
// that the dataset is damaged. Decode must count it, whole or split into
// tasks; the intact clip has none.
func TestDamageIsCounted(t *testing.T) {
	clip := readVideo(t, "h264_30s.mp4")
	damaged := bytes.Clone(clip)
	for k := len(damaged) / 2; k < len(damaged)/2+16; k++ {
		damaged[k] ^= 0x5a
	}
	// Every frame, so that the damaged one is decoded whichever it is.
	d := NewDecoder(Options{Frames: 750, Size: 16})
	for _, tt := range []struct {
		name string
		data []byte
		want bool
	}{{"intact", clip, false}, {"damaged", damaged, true}} {
		out, err := d.Decode(context.Background(), decSample("k", map[string][]byte{"mp4": tt.data}), nil)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if got := out.Damaged > 0; got != tt.want {
			t.Errorf("%s: Damaged = %d, want damage %v", tt.name, out.Damaged, tt.want)
		}
		rec, err := ParseRecord(decSample("k", map[string][]byte{"mp4": tt.data}))
		if err != nil {
			t.Fatal(err)
		}
		total := 0
		tensor := d.NewVideoTensor()
		for _, task := range PlanVideoTasks(rec.Video, SampleFrames(rec.Video, 750), 4) {
			n, err := d.DecodeVideoTask(context.Background(), tt.data, rec.Video, task, tensor.Data)
			if err != nil {
				t.Fatalf("%s: task: %v", tt.name, err)
			}
			total += n
		}
		if got := total > 0; got != tt.want {
			t.Errorf("%s: tasks count %d damaged, want damage %v", tt.name, total, tt.want)
		}
	}
}
