package av

import (
	"context"
	"errors"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/datahelix/datahelix/internal/av/avtest"
)

// toneFiles are the formats the tone is tested in: file name and ffmpeg
// output arguments.
var toneFiles = []struct {
	name string
	args []string
}{
	{"tone.wav", nil},
	{"tone.flac", nil},
	{"tone.mp3", []string{"-c:a", "libmp3lame", "-b:a", "96k"}},
	{"tone.m4a", []string{"-c:a", "aac", "-b:a", "96k"}},
	{"tone.opus", []string{"-c:a", "libopus", "-b:a", "64k"}},
	{"tone.ogg", []string{"-c:a", "libvorbis"}},
	{"tone.mka", []string{"-c:a", "libopus", "-b:a", "64k"}},
	{"tone_video.mp4", append(slices.Clone(avtest.Picture), "-map", "1:v", "-map", "0:a", "-c:v", "libx264", "-preset", "ultrafast", "-c:a", "aac", "-shortest")},
}

func audioConfig() Config {
	c := cfgSize(16)
	c.Formats, c.Codecs = DefaultAudioFormats, DefaultAudioCodecs
	c.Timeout = 10 * time.Second
	return c
}

func TestDecodeAudioTone(t *testing.T) {
	const rate = 16000
	for _, f := range toneFiles {
		data := avtest.Tone(t, f.name, f.args...)
		for _, span := range []struct{ first, count int64 }{{0, rate}, {rate * 3 / 2, rate}} { // 0-1 s, 1.5-2.5 s (a seek)
			for _, ch := range []int{1, 2} {
				dst := make([]float32, span.count*int64(ch))
				st, err := DecodeAudio(context.Background(), data, audioConfig(), span.first, span.count, rate, ch, dst)
				if err != nil {
					t.Fatalf("%s %+v ch %d: %v", f.name, span, ch, err)
				}
				// An MP3 stream starts 25 ms in (LAME's encoder delay,
				// which FFmpeg's timestamps keep): the samples before it
				// are silence that the stream does not cover.
				if st.Written != span.count && !(f.name == "tone.mp3" && span.first == 0 && st.Written >= span.count-rate*3/100) {
					t.Errorf("%s %+v ch %d: wrote %d samples, want %d", f.name, span, ch, st.Written, span.count)
				}
				// Leave out the first 40 ms: the MP3 stream starts 25 ms
				// in, and codecs with priming (AAC, Opus) ramp in.
				skip := int64(rate / 25)
				for c := range ch {
					pcm := dst[int64(c)*span.count+skip : int64(c+1)*span.count]
					rms, hz := avtest.ToneOf(pcm, rate)
					if want := 0.125 / math.Sqrt2; math.Abs(rms-want) > 0.1*want {
						t.Errorf("%s %+v ch %d/%d: RMS %.4f, want %.4f", f.name, span, c, ch, rms, want)
					}
					if math.Abs(hz-440) > 5 {
						t.Errorf("%s %+v ch %d/%d: %.1f Hz, want 440", f.name, span, c, ch, hz)
					}
				}
			}
		}
	}
}

// TestDecodeAudioAligned decodes one span whole and in two parts, the
// second after a seek: the samples must line up (the span is on the
// file's timeline), to within a codec's error after a seek.
func TestDecodeAudioAligned(t *testing.T) {
	const rate = 8000
	for _, name := range []string{"tone.wav", "tone.flac", "tone.m4a"} {
		var args []string
		for _, f := range toneFiles {
			if f.name == name {
				args = f.args
			}
		}
		data := avtest.Tone(t, name, args...)
		whole := make([]float32, 2*rate)
		if _, err := DecodeAudio(context.Background(), data, audioConfig(), rate/2, 2*rate, rate, 1, whole); err != nil {
			t.Fatal(err)
		}
		part := make([]float32, rate)
		if _, err := DecodeAudio(context.Background(), data, audioConfig(), rate/2+rate, rate, rate, 1, part); err != nil {
			t.Fatal(err)
		}
		var worst float64
		for i, v := range part {
			worst = max(worst, math.Abs(float64(v-whole[rate+i])))
		}
		if worst > 0.01 {
			t.Errorf("%s: the part after a seek differs from the whole by up to %.4f", name, worst)
		}
	}
}

func TestDecodeAudioPadsPastEnd(t *testing.T) {
	const rate = 8000
	data := avtest.Tone(t, "tone.wav")
	dst := make([]float32, 2*rate)
	st, err := DecodeAudio(context.Background(), data, audioConfig(), 2*rate, 2*rate, rate, 1, dst) // 2-4 s of a 3 s file
	if err != nil {
		t.Fatal(err)
	}
	if st.Written != rate {
		t.Errorf("wrote %d samples, want %d (the stream's last second)", st.Written, rate)
	}
	for i, v := range dst[rate+8:] {
		if v != 0 {
			t.Fatalf("sample %d past the stream's end is %v, want 0", rate+8+i, v)
		}
	}
	if rms, _ := avtest.ToneOf(dst[:rate-8], rate); rms < 0.08 {
		t.Errorf("RMS before the end %.4f, want the tone's", rms)
	}
}

func TestProbeAudio(t *testing.T) {
	for _, f := range toneFiles {
		info, err := ProbeAudio(context.Background(), avtest.Tone(t, f.name, f.args...), audioConfig())
		if err != nil {
			t.Fatalf("%s: %v", f.name, err)
		}
		if s := info.Seconds(); math.Abs(s-3) > 0.1 || info.SampleRate == 0 || info.Channels != 1 {
			t.Errorf("%s: %+v (%.3f s), want 3 s of mono", f.name, info, s)
		}
		if info.HasVideo != (f.name == "tone_video.mp4") {
			t.Errorf("%s: HasVideo %v", f.name, info.HasVideo)
		}
	}
}

func TestDecodeAudioNoStream(t *testing.T) {
	data := readMedia(t, "h264_bframes.mp4")
	_, err := ProbeAudio(context.Background(), data, audioConfig())
	if !errors.Is(err, ErrNoAudio) {
		t.Errorf("probe: %v, want ErrNoAudio", err)
	}
	_, err = DecodeAudio(context.Background(), data, audioConfig(), 0, 100, 8000, 1, make([]float32, 100))
	if !errors.Is(err, ErrNoAudio) {
		t.Errorf("decode: %v, want ErrNoAudio", err)
	}
	// The committed Matroska clip has an Opus 440 Hz tone.
	dst := make([]float32, 8000)
	if _, err := DecodeAudio(context.Background(), readMedia(t, "h264_audio.mkv"), audioConfig(), 1000, 8000, 16000, 1, dst); err != nil {
		t.Fatal(err)
	}
	if _, hz := avtest.ToneOf(dst, 16000); math.Abs(hz-440) > 5 {
		t.Errorf("h264_audio.mkv: %.1f Hz, want 440", hz)
	}
}

func TestDecodeAudioRefuses(t *testing.T) {
	data := avtest.Tone(t, "tone.flac")
	cfg := audioConfig()
	cfg.Codecs = "aac"
	if _, err := DecodeAudio(context.Background(), data, cfg, 0, 10, 8000, 1, make([]float32, 10)); !errors.Is(err, ErrUnsupported) {
		t.Errorf("flac outside the codec list: %v, want ErrUnsupported", err)
	}
	cfg = audioConfig()
	cfg.Formats = "wav"
	if _, err := DecodeAudio(context.Background(), data, cfg, 0, 10, 8000, 1, make([]float32, 10)); !errors.Is(err, ErrUnsupported) {
		t.Errorf("flac outside the format list: %v, want ErrUnsupported", err)
	}
	cfg = audioConfig()
	cfg.MaxFrames = 3
	if _, err := DecodeAudio(context.Background(), data, cfg, 0, 16000, 8000, 1, make([]float32, 16000)); !errors.Is(err, ErrLimit) {
		t.Errorf("over MaxFrames: %v, want ErrLimit", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := DecodeAudio(ctx, data, audioConfig(), 0, 16000, 8000, 1, make([]float32, 16000)); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v, want context.Canceled", err)
	}
	for _, bad := range []struct {
		first, count  int64
		rate, ch, dst int
	}{{0, 10, 0, 1, 10}, {0, 10, 8000, 0, 0}, {0, -1, 8000, 1, 0}, {0, 10, 8000, 2, 10}, {0, 10, MaxAudioRate + 1, 1, 10}} {
		if _, err := DecodeAudio(context.Background(), data, audioConfig(), bad.first, bad.count, bad.rate, bad.ch, make([]float32, bad.dst)); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: %v, want ErrConfig", bad, err)
		}
	}
}

// TestDecodeAudioBeforeStart: a span starting before 0 (a Matroska clip's
// frames may) is silence up to the stream's start.
func TestDecodeAudioBeforeStart(t *testing.T) {
	const rate = 8000
	dst := make([]float32, 2*rate)
	st, err := DecodeAudio(context.Background(), avtest.Tone(t, "tone.wav"), audioConfig(), -rate, 2*rate, rate, 1, dst)
	if err != nil {
		t.Fatal(err)
	}
	if st.Written != rate {
		t.Errorf("wrote %d samples, want %d", st.Written, rate)
	}
	for i, v := range dst[:rate] {
		if v != 0 {
			t.Fatalf("sample %d before the stream is %v", i, v)
		}
	}
	if rms, hz := avtest.ToneOf(dst[rate:], rate); math.Abs(hz-440) > 5 || rms < 0.08 {
		t.Errorf("after the start: RMS %.4f, %.1f Hz", rms, hz)
	}
}
