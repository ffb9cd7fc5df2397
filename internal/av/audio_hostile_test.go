package av

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/datahelix/datahelix/internal/av/avtest"
)

// audioTyped reports whether err is nil, one of the package's typed
// errors, or ErrNoAudio.
func audioTyped(err error) bool {
	return typed(err) || errors.Is(err, ErrNoAudio)
}

// audioBoth probes and decodes data (a span after a seek) and checks that
// each returns within the deadline with nil or a typed error.
func audioBoth(t *testing.T, what string, data []byte, cfg Config) {
	t.Helper()
	start := time.Now()
	_, perr := ProbeAudio(context.Background(), data, cfg)
	_, derr := DecodeAudio(context.Background(), data, cfg, 12000, 8000, 8000, 2, make([]float32, 16000))
	if el := time.Since(start); el > 2*cfg.Timeout+time.Second {
		t.Errorf("%s: took %v, beyond the deadline", what, el)
	}
	for _, err := range []error{perr, derr} {
		if !audioTyped(err) {
			t.Errorf("%s: got untyped error %v", what, err)
		}
	}
}

// TestHostileAudio feeds every tone format truncated, with flipped bits
// and with runs of garbage to both audio entry points.
func TestHostileAudio(t *testing.T) {
	cfg := audioConfig()
	cfg.Timeout = 2 * time.Second
	flips, cuts := 40, 16
	if testing.Short() {
		flips, cuts = 10, 6
	}
	for _, f := range toneFiles {
		data := avtest.Tone(t, f.name, f.args...)
		for i := 1; i <= cuts; i++ {
			cut := len(data) * i / (cuts + 1)
			if i <= 3 {
				cut = i * 16
			}
			audioBoth(t, f.name+" truncated at "+strconv.Itoa(cut), data[:cut], cfg)
		}
		rng := rand.New(rand.NewPCG(3, uint64(len(data))))
		for i := range flips {
			b := bytes.Clone(data)
			for range 1 + rng.IntN(8) {
				b[rng.IntN(len(b))] ^= 1 << rng.IntN(8)
			}
			audioBoth(t, f.name+" flip "+strconv.Itoa(i), b, cfg)
		}
		for i := range 3 {
			b := bytes.Clone(data)
			off := len(b) * (i + 1) / 5
			for j := off; j < min(len(b), off+512); j++ {
				b[j] = byte(rng.Uint32())
			}
			audioBoth(t, f.name+" garbage "+strconv.Itoa(i), b, cfg)
		}
	}
}

// FuzzDecodeAudio feeds mutated audio files and clips to ProbeAudio and
// DecodeAudio: any outcome but a typed error or success (a crash, a hang
// past the deadline, an untyped error) fails.
func FuzzDecodeAudio(f *testing.F) {
	for _, tf := range toneFiles {
		f.Add(avtest.Tone(f, tf.name, tf.args...))
	}
	f.Add(readMedia(f, "h264_audio.mkv"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg := fuzzConfig()
		cfg.Formats, cfg.Codecs = DefaultAudioFormats, DefaultAudioCodecs
		start := time.Now()
		if _, err := ProbeAudio(context.Background(), data, cfg); !audioTyped(err) {
			t.Fatalf("ProbeAudio: untyped error %v", err)
		}
		first := int64(len(data) % 3 * 8000) // from the start, or after a seek
		if _, err := DecodeAudio(context.Background(), data, cfg, first, 4000, 8000+len(data)%2*8000, 1+len(data)%3, make([]float32, 4000*(1+len(data)%3))); !audioTyped(err) {
			t.Fatalf("DecodeAudio: untyped error %v", err)
		}
		if el := time.Since(start); el > 2*cfg.Timeout+time.Second {
			t.Fatalf("took %v", el)
		}
	})
}
