// Package avtest makes the sound the audio tests of package av and its
// users decode, with the ffmpeg CLI, and measures what they decode.
package avtest

import (
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// cache holds the files Tone made, by name.
var cache sync.Map

// Picture is the ffmpeg arguments that add a 3-second 64x48 10 fps test
// picture as input 1, for a clip with sound (map it with -map 1:v).
var Picture = []string{"-f", "lavfi", "-i", "testsrc2=size=64x48:rate=10:duration=3"}

// Tone returns the bytes of a file whose input 0 is a 3-second 440 Hz
// sine (amplitude 1/8, lavfi's default) at 44.1 kHz mono, then args (more
// inputs, maps, codecs), written by ffmpeg bit-exactly to the container
// that name's extension gives; made once per test binary and name. The
// test is skipped without the ffmpeg CLI.
func Tone(t testing.TB, name string, args ...string) []byte {
	t.Helper()
	if b, ok := cache.Load(name); ok {
		return b.([]byte)
	}
	ff, err := exec.LookPath("ffmpeg")
	if err != nil {
		t.Skip("ffmpeg CLI not installed")
	}
	out := filepath.Join(t.TempDir(), name)
	cmd := append([]string{"-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=44100:duration=3"}, args...)
	cmd = append(cmd, "-threads", "1", "-fflags", "+bitexact", out)
	if msg, err := exec.Command(ff, cmd...).CombinedOutput(); err != nil {
		t.Fatalf("ffmpeg %v: %v: %s", cmd, err, msg)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	cache.Store(name, b)
	return b
}

// ToneOf measures one channel of PCM at rate: its RMS and the rate of
// its upward zero crossings in Hz (a pure tone's frequency).
func ToneOf(pcm []float32, rate int) (rms, hz float64) {
	var sum float64
	up := 0
	for i, v := range pcm {
		sum += float64(v) * float64(v)
		if i > 0 && pcm[i-1] < 0 && v >= 0 {
			up++
		}
	}
	return math.Sqrt(sum / float64(len(pcm))), float64(up) * float64(rate) / float64(len(pcm))
}
