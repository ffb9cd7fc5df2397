package tjpeg

import (
	"bytes"
	"errors"
	"testing"
)

// withJunk returns data with junk inserted before the marker segment that
// starts at the first occurrence of marker (0xFF, code).
func withJunk(t *testing.T, data []byte, code byte, junk []byte) []byte {
	t.Helper()
	i := bytes.Index(data, []byte{0xFF, code})
	if i < 2 {
		t.Fatalf("no marker 0x%02x", code)
	}
	return append(append(append([]byte{}, data[:i]...), junk...), data[i:]...)
}

// TestExtraneousBytes checks that junk between the segments before the
// first scan (libjpeg's "Corrupt JPEG data: N extraneous bytes before
// marker" warning, which djpeg, FFmpeg and PIL decode through) gives the
// same pixels as the clean file, while truncation is still refused.
func TestExtraneousBytes(t *testing.T) {
	data := readJPEG(t, "image420.jpg")
	want, err := Decode(data, Options{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		code byte
		junk []byte
	}{
		{"3 zero bytes before DQT", 0xDB, []byte{0, 0, 0}},
		{"text before SOF0", 0xC0, []byte("junk")},
		{"stuffed FF 00 and FF fill bytes before DHT", 0xC4, []byte{1, 0xFF, 0x00, 2, 0xFF, 0xFF}},
		{"junk before SOS", 0xDA, []byte{0x20}},
	}
	for _, tc := range tests {
		b := withJunk(t, data, tc.code, tc.junk)
		if _, err := DecodeHeader(b); err != nil {
			t.Errorf("%s: header: %v", tc.name, err)
		}
		got, err := Decode(b, Options{})
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if got.Width != want.Width || got.Height != want.Height || !bytes.Equal(got.Pix, want.Pix) {
			t.Errorf("%s: got pixels other than the clean file's", tc.name)
		}
		if _, err := Decode(b[:len(b)*2/3], Options{}); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s, truncated: got %v, want ErrCorrupt", tc.name, err)
		}
	}
}

func TestSkipExtraneous(t *testing.T) {
	data := readJPEG(t, "image420.jpg")
	// Fill bytes before a marker are no junk: the input comes back as is.
	fill := withJunk(t, data, 0xDB, []byte{0xFF, 0xFF})
	if got := skipExtraneous(fill); &got[0] != &fill[0] || len(got) != len(fill) {
		t.Errorf("fill bytes: got a copy, want the input itself")
	}
	if got := skipExtraneous(data); &got[0] != &data[0] || len(got) != len(data) {
		t.Errorf("clean file: got a copy, want the input itself")
	}
	junk := withJunk(t, data, 0xC4, []byte{7, 0xFF, 0, 9})
	if got := skipExtraneous(junk); !bytes.Equal(got, data) {
		t.Errorf("junk before DHT: got %d bytes, want the clean file's %d", len(got), len(data))
	}
	// Nothing after the first scan is touched: junk there stays an error.
	late := append(append(append([]byte{}, data[:len(data)-2]...), 1, 2, 3), data[len(data)-2:]...)
	if got := skipExtraneous(late); !bytes.Equal(got, late) {
		t.Errorf("junk after the scan: got it changed")
	}
	for _, b := range [][]byte{nil, {0xFF}, {0xFF, 0xD8}, {0xFF, 0xD8, 1, 2}, {0xFF, 0xD8, 0xFF, 0xE0, 0, 1}} {
		if got := skipExtraneous(b); !bytes.Equal(got, b) {
			t.Errorf("skipExtraneous(%x): got %x, want the input", b, got)
		}
	}
}

// FuzzSkipExtraneous checks that skipExtraneous never panics and only
// drops bytes: its result is no longer than the input and keeps the input's
// first two bytes and its tail after the first scan starts.
func FuzzSkipExtraneous(f *testing.F) {
	data := readJPEG(f, "image420.jpg")
	f.Add(data[:400])
	f.Add([]byte{0xFF, 0xD8, 1, 0xFF, 0, 0xFF, 0xFF, 0xDB, 0, 2, 0xFF, 0xDA, 5})
	f.Fuzz(func(t *testing.T, b []byte) {
		got := skipExtraneous(b)
		if len(got) > len(b) || len(b) >= 2 && !bytes.Equal(got[:2], b[:2]) {
			t.Fatalf("skipExtraneous(%x) = %x", b, got)
		}
		if _, err := Decode(got, Options{MaxPixels: 1 << 20}); !typed(err) {
			t.Fatalf("untyped error %v", err)
		}
	})
}
