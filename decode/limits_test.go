package decode

import (
	"errors"
	"testing"
)

func TestCheckShape(t *testing.T) {
	tests := []struct {
		frames, size int
		bound        string // "" for a shape in bounds
		msg          string // Message("--frames", "--size")
	}{
		{1, MinSize, "", ""},
		{DefaultFrames, DefaultSize, "", ""},
		{MaxFrames, 591, "", ""}, // 1024 x 591 x 591 x 3 = 1,073,007,616 bytes
		{21, MaxSize, "", ""},    // 21 x 4096 x 4096 x 3 = 1,056,964,608 bytes
		{0, 224, BoundFrames, "--frames 0: want 1..1024"},
		{-3, 224, BoundFrames, "--frames -3: want 1..1024"},
		{MaxFrames + 1, 224, BoundFrames, "--frames 1025: want 1..1024"},
		{MaxFrames + 1, 0, BoundFrames, "--frames 1025: want 1..1024"}, // frames first
		{8, MinSize - 1, BoundSize, "--size 7: want 8..4096"},
		{8, MaxSize + 1, BoundSize, "--size 4097: want 8..4096"},
		{8, -1 << 40, BoundSize, "--size -1099511627776: want 8..4096"},
		{MaxFrames, 592, BoundBytes, "--frames 1024 --size 592: one decoded clip would be 1.0 GiB (F x S x S x 3 bytes), want at most 1 GiB"},
		{22, MaxSize, BoundBytes, "--frames 22 --size 4096: one decoded clip would be 1.0 GiB (F x S x S x 3 bytes), want at most 1 GiB"},
		{MaxFrames, MaxSize, BoundBytes, "--frames 1024 --size 4096: one decoded clip would be 48.0 GiB (F x S x S x 3 bytes), want at most 1 GiB"},
	}
	for _, tc := range tests {
		err := CheckShape(tc.frames, tc.size)
		if tc.bound == "" {
			if err != nil {
				t.Errorf("CheckShape(%d, %d): got %v, want nil", tc.frames, tc.size, err)
			}
			if b := clipBytes(tc.frames, tc.size); b > MaxClipBytes {
				t.Errorf("CheckShape(%d, %d) accepted %d bytes, over %d", tc.frames, tc.size, b, MaxClipBytes)
			}
			continue
		}
		var se *ShapeError
		if !errors.Is(err, ErrShape) || !errors.As(err, &se) {
			t.Errorf("CheckShape(%d, %d): got %v, want a *ShapeError wrapping ErrShape", tc.frames, tc.size, err)
			continue
		}
		if se.Bound != tc.bound || se.Frames != tc.frames || se.Size != tc.size {
			t.Errorf("CheckShape(%d, %d): got bound %q frames %d size %d, want %q %d %d", tc.frames, tc.size, se.Bound, se.Frames, se.Size, tc.bound, tc.frames, tc.size)
		}
		if got := se.Message("--frames", "--size"); got != tc.msg {
			t.Errorf("CheckShape(%d, %d): got message %q, want %q", tc.frames, tc.size, got, tc.msg)
		}
		if got, want := err.Error(), "decode: "+se.Message("frames", "size"); got != want {
			t.Errorf("CheckShape(%d, %d): got %q, want %q", tc.frames, tc.size, got, want)
		}
	}
}
