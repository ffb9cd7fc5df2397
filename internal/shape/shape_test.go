package shape

import (
	"errors"
	"testing"

	"github.com/datahelix/datahelix/decode"
)

func TestCheck(t *testing.T) {
	tests := []struct {
		frames, size int
		msg          string // "" for a shape in bounds
	}{
		{1, MinSize, ""},
		{decode.DefaultFrames, decode.DefaultSize, ""}, // the decoder's defaults are in bounds
		{MaxFrames, 591, ""},                           // 1024 x 591 x 591 x 3 = 1,073,007,616 bytes
		{21, MaxSize, ""},                              // 21 x 4096 x 4096 x 3 = 1,056,964,608 bytes
		{0, 224, "--frames 0: want 1..1024"},
		{-3, 224, "--frames -3: want 1..1024"},
		{MaxFrames + 1, 224, "--frames 1025: want 1..1024"},
		{MaxFrames + 1, 0, "--frames 1025: want 1..1024"}, // frames first
		{8, MinSize - 1, "--size 7: want 8..4096"},
		{8, MaxSize + 1, "--size 4097: want 8..4096"},
		{8, -1 << 40, "--size -1099511627776: want 8..4096"},
		{MaxFrames, 592, "--frames 1024 --size 592: one decoded clip would be 1076625408 bytes (F x S x S x 3), want at most 1073741824 (1 GiB)"},
		{22, MaxSize, "--frames 22 --size 4096: one decoded clip would be 1107296256 bytes (F x S x S x 3), want at most 1073741824 (1 GiB)"},
		{MaxFrames, MaxSize, "--frames 1024 --size 4096: one decoded clip would be 51539607552 bytes (F x S x S x 3), want at most 1073741824 (1 GiB)"},
	}
	for _, tc := range tests {
		err := Check(tc.frames, tc.size, "--frames", "--size")
		if tc.msg == "" {
			if err != nil {
				t.Errorf("Check(%d, %d): got %v, want nil", tc.frames, tc.size, err)
			}
			if b := clipBytes(tc.frames, tc.size); b > MaxClipBytes {
				t.Errorf("Check(%d, %d) accepted %d bytes, over %d", tc.frames, tc.size, b, MaxClipBytes)
			}
			continue
		}
		if !errors.Is(err, ErrBounds) || err.Error() != tc.msg {
			t.Errorf("Check(%d, %d): got %v, want %q matching ErrBounds", tc.frames, tc.size, err, tc.msg)
		}
	}
}
