package decoding

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// TestCalibrateAudioCost measures what decoding audio costs, for the cost
// model's audio coefficients (internal/costmodel, "audio/<codec>"): per
// codec, the mean thread CPU time of 15 calls of DecodeAudio over spans
// of 30-second 48 kHz stereo tones at two output rates and channel
// counts (16 kHz mono, 48 kHz stereo), fitted to µs = a + b*seconds
// decoded by least squares. The output's rate and channels change the
// cost little against the codec's (resampling is a fraction of
// decoding), so they are not a feature. It runs only with
// DATAHELIX_AUDIO_CALIBRATE=1 and prints the coefficients.
func TestCalibrateAudioCost(t *testing.T) {
	if os.Getenv("DATAHELIX_AUDIO_CALIBRATE") == "" {
		t.Skip("set DATAHELIX_AUDIO_CALIBRATE=1 to measure")
	}
	ff, err := exec.LookPath("ffmpeg")
	if err != nil {
		t.Skip("ffmpeg CLI not installed")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	codecs := []struct{ codec, name string }{
		{"aac", "t.m4a"}, {"mp3", "t.mp3"}, {"opus", "t.opus"}, {"vorbis", "t.ogg"}, {"flac", "t.flac"}, {"pcm_s16le", "t.wav"},
	}
	args := map[string][]string{"t.m4a": {"-c:a", "aac"}, "t.mp3": {"-c:a", "libmp3lame"}, "t.opus": {"-c:a", "libopus"}, "t.ogg": {"-c:a", "libvorbis"}}
	for _, c := range codecs {
		out := filepath.Join(t.TempDir(), c.name)
		cmd := append([]string{"-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000:duration=30", "-ac", "2"}, args[c.name]...)
		if msg, err := exec.Command(ff, append(cmd, out)...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %s", err, msg)
		}
		data, _ := os.ReadFile(out)
		var xs, ys []float64
		for _, rc := range [][2]int{{16000, 1}, {48000, 2}} {
			d := NewDecoder(Options{AudioRate: rc[0], AudioChannels: rc[1]})
			s := FileSample(out, data)
			rec, err := ParseRecordFor(s, d.Options())
			if err != nil {
				t.Fatal(err)
			}
			for _, span := range [][2]float64{{0, 1}, {0, 5}, {0, 29}, {10, 5}, {20, 2}} {
				r := *rec
				a := *rec.Audio
				a.Start, a.Duration = int64(span[0]*float64(a.Timescale)), int64(span[1]*float64(a.Timescale))
				r.Audio = &a
				const reps = 15
				c0 := threadCPU()
				for range reps {
					if _, err := d.decodeAudio(context.Background(), s, &r); err != nil {
						t.Fatal(err)
					}
				}
				f := audioFeatures(span[0], span[1])
				xs = append(xs, f[:]...)
				ys = append(ys, float64((threadCPU()-c0).Microseconds())/reps)
			}
		}
		n := len(ys)
		var beta mat.VecDense
		if err := beta.SolveVec(mat.NewDense(n, 2, xs), mat.NewVecDense(n, ys)); err != nil {
			t.Fatal(err)
		}
		fmt.Printf("%q: {%.0f, %.0f}, // µs per call, per second decoded; measured %.0f\n",
			"audio/"+c.codec, beta.AtVec(0), beta.AtVec(1), ys)
	}
}

// audioFeatures mirrors internal/costmodel's audio features for a span
// of seconds from start: 1 call, and the seconds of input decoded (from
// the stream's start, or from a quarter second before a span starting
// after the first second, as av.DecodeAudio seeks).
func audioFeatures(start, seconds float64) [2]float64 {
	if start > 1 {
		return [2]float64{1, seconds + 0.25}
	}
	return [2]float64{1, start + seconds}
}
