package decoding

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"
)

// checkSampleErr fails unless err is nil or a *SampleError of a known kind.
func checkSampleErr(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	var se *SampleError
	if !errors.As(err, &se) {
		t.Errorf("%s: got %T %v, want a *SampleError", what, err, err)
		return
	}
	for _, k := range []error{ErrCorrupt, ErrLimit, ErrUnsupported, ErrTimeout, ErrNoPayload} {
		if se.Kind == k && errors.Is(err, k) {
			return
		}
	}
	t.Errorf("%s: got kind %v, want one of the decode sentinels", what, se.Kind)
}

// hostileDecoder is a decoder with a short deadline.
func hostileDecoder() *Decoder {
	return NewDecoder(Options{Frames: 4, Size: 32, Limits: Limits{SampleDeadline: 2 * time.Second}})
}

// decodeHostile decodes one damaged member with no record and with the
// record of the undamaged file (a stale record: the bytes no longer match
// it), and checks the outcome and the time taken.
func decodeHostile(t *testing.T, d *Decoder, what, ext string, data []byte, good *Record) {
	t.Helper()
	s := decSample("k", map[string][]byte{ext: data})
	for _, rec := range []*Record{nil, good} {
		start := time.Now()
		out, err := d.Decode(context.Background(), s, rec)
		if el := time.Since(start); el > 2*d.opts.Limits.SampleDeadline {
			t.Errorf("%s: took %v, past the deadline", what, el)
		}
		checkSampleErr(t, what, err)
		if err == nil && out.Modality != ModalityText && len(out.Tensors) == 0 {
			t.Errorf("%s: no error and no tensor", what)
		}
	}
}

func TestDecodeHostileSamples(t *testing.T) {
	before := peakRSSBytes(t)
	d := hostileDecoder()
	files := []string{"h264_bframes.mp4", "hevc.mp4", "vp9.webm", "av1.mp4", "image420.jpg", "image444.jpg", "image.png", "image.webp"}
	variants := 40
	if testing.Short() {
		variants = 10
	}
	for _, name := range files {
		data := media(t, name)
		ext := lastComponent(name)
		good, err := ParseRecord(decSample("k", map[string][]byte{ext: data}), Limits{})
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(7, uint64(len(data))))
		for i := range variants {
			cut := 1 + rng.IntN(len(data)-1)
			decodeHostile(t, d, name+" truncated at "+strconv.Itoa(cut), ext, data[:cut], good)
			b := bytes.Clone(data)
			for range 1 + rng.IntN(10) {
				b[rng.IntN(len(b))] ^= 1 << rng.IntN(8)
			}
			decodeHostile(t, d, name+" flipped "+strconv.Itoa(i), ext, b, good)
		}
	}
	if grew := peakRSSBytes(t) - before; grew > 1<<30 {
		t.Errorf("peak RSS grew by %d MiB", grew>>20)
	}
}

func TestDecodeForgedHeaders(t *testing.T) {
	d := hostileDecoder()
	mp4 := media(t, "h264_bframes.mp4")
	jpg := media(t, "image420.jpg")
	forge := func(data []byte, f func(b []byte)) []byte {
		b := bytes.Clone(data)
		f(b)
		return b
	}
	inMoov := func(b []byte, typ string) int {
		m := bytes.Index(b, []byte("moov"))
		return m + bytes.Index(b[m:], []byte(typ)) - 4
	}
	tests := []struct {
		name string
		ext  string
		data []byte
		want error // nil: any typed outcome
	}{
		{"mp4 stsd 65535x65535", "mp4", forge(mp4, func(b []byte) {
			o := inMoov(b, "avc1") + 8 + 24
			binary.BigEndian.PutUint32(b[o:], 0xFFFFFFFF)
		}), ErrLimit},
		{"mp4 stsz 2^31 samples", "mp4", forge(mp4, func(b []byte) {
			binary.BigEndian.PutUint32(b[inMoov(b, "stsz")+16:], 1<<31)
		}), nil},
		{"mp4 stco past the end", "mp4", forge(mp4, func(b []byte) {
			o := inMoov(b, "stco")
			for i := range int(binary.BigEndian.Uint32(b[o+12:])) {
				binary.BigEndian.PutUint32(b[o+16+4*i:], 0x7FFFFFF0)
			}
		}), ErrCorrupt},
		{"mp4 mdat emptied", "mp4", forge(mp4, func(b []byte) {
			m := bytes.Index(b, []byte("mdat"))
			clear(b[m+4 : m+4+int(binary.BigEndian.Uint32(b[m-4:]))-8])
		}), nil},
		{"jpeg SOF 65500x65500", "jpg", forge(jpg, func(b []byte) {
			i := bytes.Index(b, []byte{0xFF, 0xC0})
			b[i+5], b[i+6], b[i+7], b[i+8] = 0xFF, 0xDC, 0xFF, 0xDC
		}), ErrLimit},
		{"jpeg SOF 0x0", "jpg", forge(jpg, func(b []byte) {
			i := bytes.Index(b, []byte{0xFF, 0xC0})
			b[i+5], b[i+6], b[i+7], b[i+8] = 0, 0, 0, 0
		}), nil},
		{"jpeg huffman table zeroed", "jpg", forge(jpg, func(b []byte) {
			i := bytes.Index(b, []byte{0xFF, 0xC4})
			clear(b[i+4 : i+30])
		}), nil},
	}
	for _, tc := range tests {
		_, err := d.Decode(context.Background(), decSample("k", map[string][]byte{tc.ext: tc.data}), nil)
		checkSampleErr(t, tc.name, err)
		if tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.want)
		}
		t.Logf("%s: %v", tc.name, err)
	}
}

// FuzzDecodeSample decodes arbitrary bytes as a video, image or document
// member with small limits: only success or a typed *SampleError may come
// back, within the deadline.
func FuzzDecodeSample(f *testing.F) {
	exts := []string{"mp4", "webm", "jpg", "png", "webp"}
	for i, name := range []string{"h264_bframes.mp4", "vp9.webm", "image420.jpg", "image.png", "image.webp"} {
		f.Add(media(f, name), uint8(i))
	}
	d := NewDecoder(Options{Frames: 3, Size: 16, Limits: Limits{
		MaxPixels: 1 << 20, MaxImagePixels: 1 << 22, MaxFramesDecoded: 300, SampleDeadline: time.Second,
	}})
	f.Fuzz(func(t *testing.T, data []byte, kind uint8) {
		s := decSample("k", map[string][]byte{exts[int(kind)%len(exts)]: data, "txt": []byte("caption")})
		start := time.Now()
		out, err := d.Decode(context.Background(), s, nil)
		if time.Since(start) > 3*time.Second {
			t.Fatalf("took %v", time.Since(start))
		}
		checkSampleErr(t, "fuzz", err)
		if err == nil {
			for _, tn := range out.Tensors {
				n := 1
				for _, x := range tn.Shape {
					n *= x
				}
				if n != len(tn.Data) {
					t.Fatalf("tensor shape %v holds %d bytes", tn.Shape, len(tn.Data))
				}
			}
		}
	})
}
