package gen

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"testing"

	"golang.org/x/image/webp"
)

// TestLargeWebPIsValid renders WebP images well above 32 KB, the size of
// FFmpeg's output buffer: written to a pipe, the WebP muxer could not seek
// back to fill in the RIFF size, which stayed 0, so webpinfo, dwebp and
// x/image/webp rejected the file. It checks the RIFF header and decodes
// every image with x/image/webp.
func TestLargeWebPIsValid(t *testing.T) {
	needFFmpeg(t)
	rd := &renderer{ffmpeg: "ffmpeg", tmp: t.TempDir()}
	for _, im := range []imageSpec{
		{Width: 64, Height: 48, Format: "webp", Quality: 70, Content: "testsrc2", Noise: 9},    // small: fits the buffer
		{Width: 512, Height: 512, Format: "webp", Quality: 90, Content: "testsrc2", Noise: 20}, // large
		{Width: 700, Height: 400, Format: "webp", Quality: 94, Content: "life", Noise: 19},     // large
	} {
		b, err := rd.image(context.Background(), im, 11)
		if err != nil {
			t.Fatalf("%dx%d: %v", im.Width, im.Height, err)
		}
		if im.Width >= 512 && len(b) < 96<<10 {
			t.Fatalf("%dx%d: got %d bytes, want well above 32 KB to exercise the bug", im.Width, im.Height, len(b))
		}
		// rd.image checked the RIFF header (checkRIFF); a decoder other
		// than FFmpeg's must read the file.
		img, err := webp.Decode(bytes.NewReader(b))
		if err != nil {
			t.Errorf("%dx%d (%d bytes): x/image/webp: %v", im.Width, im.Height, len(b), err)
			continue
		}
		if r := img.Bounds(); r.Dx() != im.Width || r.Dy() != im.Height {
			t.Errorf("%dx%d: decoded %dx%d", im.Width, im.Height, r.Dx(), r.Dy())
		}
	}
}

// TestCheckRIFF checks the safeguard on every WebP the generator writes,
// including the shape a pipe gave: size 0 and the size appended as 4
// stray bytes at the end, where the muxer's failed seek left it.
func TestCheckRIFF(t *testing.T) {
	file := func(size uint32, payload int, tail []byte) []byte {
		b := append([]byte("RIFF\x00\x00\x00\x00WEBP"), bytes.Repeat([]byte{7}, payload)...)
		binary.LittleEndian.PutUint32(b[4:8], size)
		return append(b, tail...)
	}
	for _, tt := range []struct {
		name string
		b    []byte
		ok   bool
	}{
		{"valid", file(4+100, 100, nil), true},
		{"valid, empty payload", file(4, 0, nil), true},
		{"size 0 (pipe)", file(0, 100, []byte{104, 0, 0, 0}), false},
		{"size too large", file(4+101, 100, nil), false},
		{"size too small", file(4+99, 100, nil), false},
		{"size 2^32-1", file(1<<32-1, 100, nil), false},
		{"not RIFF", append([]byte("RIFX"), file(104, 100, nil)[4:]...), false},
		{"not WEBP", append(file(4, 0, nil)[:8], []byte("WAVE")...), false},
		{"short", []byte("RIFF\x04\x00\x00\x00WEB"), false},
		{"empty", nil, false},
	} {
		err := checkRIFF(tt.b)
		if (err == nil) != tt.ok {
			t.Errorf("%s: got %v, want ok %v", tt.name, err, tt.ok)
		}
		if err != nil && !errors.Is(err, ErrFFmpeg) {
			t.Errorf("%s: got %v, want ErrFFmpeg", tt.name, err)
		}
	}
}
