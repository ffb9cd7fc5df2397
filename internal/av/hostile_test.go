package av

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// typed reports whether err is nil or one of the package's typed errors.
func typed(err error) bool {
	return err == nil || errors.Is(err, ErrCorrupt) || errors.Is(err, ErrLimit) ||
		errors.Is(err, ErrUnsupported) || errors.Is(err, ErrTimeout)
}

// peakRSS returns the process's peak resident set (VmHWM) in bytes.
func peakRSS(t testing.TB) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Skip("no /proc/self/status")
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// hostileConfig is the default configuration with a short deadline.
func hostileConfig() Config {
	c := cfgSize(32)
	c.Timeout = 2 * time.Second
	return c
}

// decodeBoth runs the two decoding entry points on data and checks that
// each returns within its deadline with nil or a typed error.
func decodeBoth(t *testing.T, what string, data []byte) (errAll, errTargets error) {
	t.Helper()
	cfg := hostileConfig()
	start := time.Now()
	_, errAll = DecodeAll(context.Background(), data, cfg)
	targets := []Target{{PTS: 0, Slot: 0}, {PTS: 1 << 20, Slot: 1, Seek: SeekAuto}, {PTS: 1 << 40, Slot: 2, Seek: SeekTo, SeekPTS: 1 << 30}}
	_, errTargets = DecodeTargets(context.Background(), data, cfg, Rational{1, 1000}, targets, make([]byte, 3*32*32*3))
	if el := time.Since(start); el > 2*cfg.Timeout+time.Second {
		t.Errorf("%s: took %v, beyond the deadline", what, el)
	}
	for _, err := range []error{errAll, errTargets} {
		if !typed(err) {
			t.Errorf("%s: got untyped error %v", what, err)
		}
	}
	return errAll, errTargets
}

func TestHostileInputs(t *testing.T) {
	before := peakRSS(t)
	flips, cuts := 60, 24
	if testing.Short() {
		flips, cuts = 15, 8
	}
	for _, name := range clips {
		data := readMedia(t, name)
		// Truncations at evenly spread points, including inside the header.
		for i := 1; i <= cuts; i++ {
			cut := len(data) * i / (cuts + 1)
			if i <= 4 {
				cut = i * 16
			}
			decodeBoth(t, name+" truncated at "+strconv.Itoa(cut), data[:cut])
		}
		// Bit flips: a few random bits anywhere in the file.
		rng := rand.New(rand.NewPCG(2, uint64(len(data))))
		for i := range flips {
			b := bytes.Clone(data)
			for range 1 + rng.IntN(8) {
				b[rng.IntN(len(b))] ^= 1 << rng.IntN(8)
			}
			decodeBoth(t, name+" flip "+strconv.Itoa(i), b)
		}
		// Runs of garbage over the middle.
		for i := range 4 {
			b := bytes.Clone(data)
			off := len(b) * (i + 1) / 6
			for j := off; j < min(len(b), off+512); j++ {
				b[j] = byte(rng.Uint32())
			}
			decodeBoth(t, name+" garbage "+strconv.Itoa(i), b)
		}
	}
	if grew := peakRSS(t) - before; grew > 1<<30 {
		t.Errorf("peak RSS grew by %d MiB during hostile decoding", grew>>20)
	}
}

// box finds the first box of type typ inside moov (a naive search, good
// for the committed files) and returns the offset of its size field.
func box(t *testing.T, data []byte, typ string) int {
	t.Helper()
	m := bytes.Index(data, []byte("moov"))
	i := bytes.Index(data[m:], []byte(typ)) + m
	if i < m || i < 4 {
		t.Fatalf("no %s box", typ)
	}
	return i - 4
}

func TestForgedHeaders(t *testing.T) {
	mp4 := readMedia(t, "h264_bframes.mp4")
	tests := []struct {
		name  string
		forge func(b []byte)
		cfg   func(c *Config)
		want  error // nil: any typed error or success
	}{
		{"stsd 65535x65535", func(b []byte) {
			o := box(t, b, "avc1") + 8 + 24
			binary.BigEndian.PutUint16(b[o:], 0xFFFF)
			binary.BigEndian.PutUint16(b[o+2:], 0xFFFF)
		}, nil, ErrLimit},
		{"stsd 16x16, stream 320x240", func(b []byte) {
			o := box(t, b, "avc1") + 8 + 24
			binary.BigEndian.PutUint16(b[o:], 16)
			binary.BigEndian.PutUint16(b[o+2:], 16)
		}, func(c *Config) { c.MaxPixels = 1000 }, ErrLimit},
		{"stsz count 2^31", func(b []byte) {
			binary.BigEndian.PutUint32(b[box(t, b, "stsz")+16:], 1<<31)
		}, nil, nil},
		{"stts count 2^32-1", func(b []byte) {
			binary.BigEndian.PutUint32(b[box(t, b, "stts")+12:], 0xFFFFFFFF)
		}, nil, nil},
		{"stts delta 2^31", func(b []byte) {
			binary.BigEndian.PutUint32(b[box(t, b, "stts")+20:], 1<<31)
		}, nil, nil},
		{"mdhd timescale 0", func(b []byte) {
			binary.BigEndian.PutUint32(b[box(t, b, "mdhd")+20:], 0)
		}, nil, nil},
		{"moov size 2^32-1", func(b []byte) {
			binary.BigEndian.PutUint32(b[box(t, b, "moov"):], 0xFFFFFFFF)
		}, nil, nil},
		{"stco offsets past the end", func(b []byte) {
			o := box(t, b, "stco")
			n := int(binary.BigEndian.Uint32(b[o+12:]))
			for i := range n {
				binary.BigEndian.PutUint32(b[o+16+4*i:], 0x7FFFFFF0)
			}
		}, nil, ErrCorrupt},
		{"avcC emptied", func(b []byte) {
			o := box(t, b, "avcC")
			for i := o + 8; i < o+int(binary.BigEndian.Uint32(b[o:])); i++ {
				b[i] = 0
			}
		}, nil, nil},
	}
	for _, tc := range tests {
		b := bytes.Clone(mp4)
		tc.forge(b)
		cfg := hostileConfig()
		if tc.cfg != nil {
			tc.cfg(&cfg)
		}
		start := time.Now()
		_, err := DecodeAll(context.Background(), b, cfg)
		if time.Since(start) > cfg.Timeout+time.Second {
			t.Errorf("%s: took %v", tc.name, time.Since(start))
		}
		t.Logf("%s: %v", tc.name, err)
		if tc.want != nil && !errors.Is(err, tc.want) || !typed(err) {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.want)
		}
		decodeBoth(t, tc.name, b)
	}
}

// TestDeadlineInterruptsDecoding stops a long decode midway, through the
// deadline and through cancellation, and checks it returns promptly.
func TestDeadlineInterruptsDecoding(t *testing.T) {
	if testing.Short() {
		t.Skip("encodes a 20 s clip")
	}
	path := genClip(t, "long.mp4", append(lavfi("640x360", "20"), "-c:v", "libx264", "-preset", "ultrafast")...)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Timeout = 30 * time.Millisecond
	start := time.Now()
	st, err := DecodeAll(context.Background(), data, cfg)
	if !errors.Is(err, ErrTimeout) || st.FramesDecoded >= 500 {
		t.Errorf("deadline: got %v after %d of 500 frames, want ErrTimeout midway", err, st.FramesDecoded)
	}
	if el := time.Since(start); el > cfg.Timeout+500*time.Millisecond {
		t.Errorf("deadline: returned after %v", el)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(30*time.Millisecond, cancel)
	start = time.Now()
	_, err = DecodeAll(ctx, data, DefaultConfig())
	if !errors.Is(err, context.Canceled) {
		t.Errorf("cancel: got %v, want context.Canceled", err)
	}
	if el := time.Since(start); el > 530*time.Millisecond {
		t.Errorf("cancel: returned after %v", el)
	}
}
