package decoding

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/datahelix/datahelix/internal/av/avtest"
	"github.com/datahelix/datahelix/internal/video"
)

// mediaFile is avtest.Tone with the test picture as input 1.
func mediaFile(t testing.TB, name string, args ...string) []byte {
	t.Helper()
	return avtest.Tone(t, name, append(slices.Clone(avtest.Picture), args...)...)
}

var (
	h264 = []string{"-c:v", "libx264", "-preset", "ultrafast", "-g", "10"}
	aac  = []string{"-c:a", "aac", "-b:a", "64k"}
)

func clipWithAudio(t *testing.T) []byte {
	return mediaFile(t, "tone.mp4", append(append([]string{"-map", "1:v", "-map", "0:a"}, h264...), aac...)...)
}

func clipWithoutAudio(t *testing.T) []byte {
	return mediaFile(t, "silent.mp4", append([]string{"-map", "1:v"}, h264...)...)
}

func audioOnlyMP4(t *testing.T) []byte {
	return mediaFile(t, "sound.mp4", append([]string{"-map", "0:a"}, aac...)...)
}

func mp3File(t testing.TB) []byte {
	return mediaFile(t, "tone.mp3", "-map", "0:a", "-c:a", "libmp3lame", "-b:a", "96k")
}

func TestAudioSpan(t *testing.T) {
	perFrame := func(pts ...int64) *VideoInfo {
		v := &VideoInfo{Timescale: 1000, Frames: len(pts), FramePTS: pts, FrameBytes: make([]uint32, len(pts)), Keyframes: []int{0}}
		v.Duration = pts[len(pts)-1] + 100
		return v
	}
	tenFPS := perFrame(0, 100, 200, 300, 400, 500, 600, 700, 800, 900)
	bFrames := perFrame(0, 300, 100, 200, 600, 400, 500, 900, 700, 800) // decode order of an IBBP clip
	estimated := &VideoInfo{Timescale: 1000, Frames: 10, Duration: 1000, FrameCountEstimated: true}
	for _, tc := range []struct {
		name               string
		v                  *VideoInfo
		frames, rate       int
		wantFirst, wantLen int64
	}{
		// F=2 picks the frames shown at 250 and 750 ms: those of 200 and
		// 700 ms; the span ends when frame 700 is replaced at 800 ms.
		{"2 of 10", tenFPS, 2, 16000, 3200, 9600},
		{"all 10", tenFPS, 10, 16000, 0, 16000}, // the last frame lasts an average frame
		{"more than the clip", tenFPS, 32, 8000, 0, 8000},
		{"b-frames", bFrames, 2, 16000, 3200, 9600},
		{"estimated", estimated, 2, 16000, 3200, 9600},
		{"estimated all", estimated, 10, 16000, 0, 16000},
		// 200 ms at 44.1 kHz is 8820 samples; 1/3 s rounds: see below.
		{"44.1 kHz", tenFPS, 2, 44100, 8820, 26460},
	} {
		first, n := AudioSpan(tc.v, video.SampleFrames(tc.v, tc.frames), tc.rate)
		if first != tc.wantFirst || n != tc.wantLen {
			t.Errorf("%s: span %d+%d, want %d+%d", tc.name, first, n, tc.wantFirst, tc.wantLen)
		}
	}
	// Rounding: halves round up, on both ends alike.
	third := &VideoInfo{Timescale: 3, Frames: 3, FramePTS: []int64{0, 1, 2}, FrameBytes: make([]uint32, 3), Duration: 3, Keyframes: []int{0}}
	if first, n := AudioSpan(third, video.SampleFrames(third, 1), 3); first != 1 || n != 1 {
		t.Errorf("thirds: span %d+%d, want 1+1", first, n)
	}
	if first, n := AudioSpan(third, video.SampleFrames(third, 1), 1); first != 0 || n != 1 { // 1/3 s -> 0, 2/3 s -> 1
		t.Errorf("thirds at 1 Hz: span %d+%d, want 0+1", first, n)
	}
	if got := ticksToSamples(1, 2, 1); got != 1 { // half a sample rounds up
		t.Errorf("ticksToSamples(1/2 s, 1 Hz) = %d, want 1", got)
	}
	if got := ticksToSamples(-1, 2, 1); got != 0 {
		t.Errorf("ticksToSamples(-1/2 s, 1 Hz) = %d, want 0", got)
	}
}

func TestDecodeClipAudio(t *testing.T) {
	s := FileSample("clip.mp4", clipWithAudio(t))
	for _, ch := range []int{1, 2} {
		d := NewDecoder(Options{Frames: 8, Size: 32, AudioRate: 16000, AudioChannels: ch})
		out, err := d.Decode(context.Background(), s, nil)
		if err != nil {
			t.Fatal(err)
		}
		rec, err := ParseRecordFor(s, d.Options())
		if err != nil {
			t.Fatal(err)
		}
		a := out.Audio
		if a == nil || a.Missing || a.Rate != 16000 || a.Channels != ch {
			t.Fatalf("channels %d: audio %+v", ch, a)
		}
		first, n := AudioSpan(rec.Video, video.SampleFrames(rec.Video, 8), 16000)
		if a.First != first || int64(a.Len()) != n || n < 16000*25/10 {
			t.Errorf("channels %d: audio %d+%d, want the span %d+%d (about 3 s)", ch, a.First, a.Len(), first, n)
		}
		if rec.Audio == nil || rec.Audio.Codec != "aac" || rec.Audio.Member != 0 {
			t.Errorf("record audio %+v, want the clip's AAC track", rec.Audio)
		}
		for c := range ch {
			pcm := a.PCM[c*a.Len()+1600 : (c+1)*a.Len()-1600] // leave out AAC's ramp in and out
			rms, hz := avtest.ToneOf(pcm, 16000)
			if math.Abs(rms-0.0884) > 0.009 || math.Abs(hz-440) > 4 {
				t.Errorf("channels %d, channel %d: RMS %.4f, %.1f Hz; want 0.0884, 440 Hz", ch, c, rms, hz)
			}
		}
		// The same span decoded in tasks' way (DecodeAudio) is the same.
		again, err := d.DecodeAudio(context.Background(), s, rec)
		if err != nil || again.MD5() != a.MD5() {
			t.Errorf("DecodeAudio: %v, MD5 %s, want Decode's %s", err, again.MD5(), a.MD5())
		}
		sums, err := SampleMD5sFor(context.Background(), s, d.Options())
		if err != nil || len(sums) != 2 || !sums[1].Audio || sums[1].MD5s[0] != a.MD5() {
			t.Errorf("SampleMD5sFor: %+v, %v; want the frames, then the audio's MD5 %s", sums, err, a.MD5())
		}
	}
	// Audio off: no audio, as before.
	out, err := NewDecoder(Options{Frames: 8, Size: 32}).Decode(context.Background(), s, nil)
	if err != nil || out.Audio != nil {
		t.Errorf("audio off: %v, audio %v", err, out.Audio)
	}
}

// TestDecodeClipWithoutAudio: a clip without sound in a dataset with
// audio on keeps its place, with silence and Missing set.
func TestDecodeClipWithoutAudio(t *testing.T) {
	s := FileSample("silent.mp4", clipWithoutAudio(t))
	d := NewDecoder(Options{Frames: 4, Size: 32, AudioRate: 8000})
	out, err := d.Decode(context.Background(), s, nil)
	if err != nil {
		t.Fatal(err)
	}
	a := out.Audio
	if a == nil || !a.Missing || a.Channels != 1 || a.Len() == 0 {
		t.Fatalf("audio %+v, want silence marked Missing", a)
	}
	for _, v := range a.PCM {
		if v != 0 {
			t.Fatalf("silence holds %v", v)
		}
	}
	rec, _ := ParseRecordFor(s, d.Options())
	if _, n := AudioSpan(rec.Video, video.SampleFrames(rec.Video, 4), 8000); int64(a.Len()) != n {
		t.Errorf("silence of %d samples, want the span's %d", a.Len(), n)
	}
}

// TestAudioSamples: sound alone is an audio sample with audio on, and a
// per-sample error naming it with audio off, as before.
func TestAudioSamples(t *testing.T) {
	on := Options{Frames: 4, Size: 32, AudioRate: 16000, AudioChannels: 2}
	for _, tc := range []struct {
		name      string
		s         *Sample
		text      string
		offErr    error
		offSays   string
		wantCodec string
	}{
		{"mp3 file", FileSample("dir/song.mp3", mp3File(t)), "", ErrNoPayload, "file dir/song.mp3", "mp3"},
		{"audio-only mp4 file", FileSample("sound.mp4", audioOnlyMP4(t)), "", ErrCorrupt, "no video track", "aac"},
		{"m4a with a transcript", &Sample{Shard: "s.tar", Key: "k", Members: []Member{
			{Name: "k.m4a", Ext: "m4a", Data: audioOnlyMP4(t)}, {Name: "k.txt", Ext: "txt", Data: []byte("a tone")}}},
			"a tone", ErrUnsupported, `sample "k": member k.m4a`, "aac"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewDecoder(Options{Frames: 4, Size: 32}).Decode(context.Background(), tc.s, nil)
			var se *SampleError
			if !errors.Is(err, tc.offErr) || !errors.As(err, &se) || !strings.Contains(err.Error(), tc.offSays) {
				t.Errorf("audio off: %v, want a *SampleError matching %v saying %q", err, tc.offErr, tc.offSays)
			}
			d := NewDecoder(on)
			rec, err := ParseRecordFor(tc.s, d.Options())
			if err != nil {
				t.Fatal(err)
			}
			if rec.Modality != ModalityAudio || rec.Audio == nil || rec.Audio.Codec != tc.wantCodec || math.Abs(rec.Audio.Seconds()-3) > 0.1 {
				t.Fatalf("record %+v, audio %+v: want a 3 s %s audio sample", rec, rec.Audio, tc.wantCodec)
			}
			out, err := d.Decode(context.Background(), tc.s, rec)
			if err != nil {
				t.Fatal(err)
			}
			a := out.Audio
			if out.Modality != ModalityAudio || a == nil || a.Channels != 2 || out.Text != tc.text || len(out.Tensors) != 0 {
				t.Fatalf("output %+v, audio %+v", out, a)
			}
			// The whole stream from its start, for its duration.
			wantFirst := ticksToSamples(rec.Audio.Start, rec.Audio.Timescale, 16000)
			wantLen := ticksToSamples(rec.Audio.Start+rec.Audio.Duration, rec.Audio.Timescale, 16000) - wantFirst
			if a.First != wantFirst || int64(a.Len()) != wantLen {
				t.Errorf("audio %d+%d, want %d+%d", a.First, a.Len(), wantFirst, wantLen)
			}
			rms, hz := avtest.ToneOf(a.PCM[16000:a.Len()-4000], 16000)
			if math.Abs(rms-0.0884) > 0.009 || math.Abs(hz-440) > 4 {
				t.Errorf("RMS %.4f, %.1f Hz; want 0.0884, 440 Hz", rms, hz)
			}
		})
	}
}

func TestAudioLimits(t *testing.T) {
	s := FileSample("song.mp3", mp3File(t))
	d := NewDecoder(Options{AudioRate: 8000, Limits: Limits{MaxAudioDuration: time.Second}})
	_, err := d.Decode(context.Background(), s, nil)
	if !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), "MaxAudioDuration") {
		t.Errorf("3 s over a 1 s limit: %v, want ErrLimit", err)
	}
	for _, bad := range [][2]int{{-1, 0}, {0, 2}, {MaxAudioRate + 1, 1}, {16000, MaxAudioChannels + 1}, {16000, -1}} {
		if CheckAudio(bad[0], bad[1]) == nil {
			t.Errorf("CheckAudio(%d, %d) accepted", bad[0], bad[1])
		}
	}
	for _, good := range [][2]int{{0, 0}, {16000, 0}, {48000, 2}} {
		if err := CheckAudio(good[0], good[1]); err != nil {
			t.Errorf("CheckAudio(%d, %d): %v", good[0], good[1], err)
		}
	}
}

// FuzzDecodeAudioSample decodes arbitrary bytes as an audio member or a
// clip with audio output on and small limits: only success or a typed
// *SampleError may come back, within the deadline, and the audio's shape
// must match its samples.
func FuzzDecodeAudioSample(f *testing.F) {
	exts := []string{"mp3", "m4a", "mp4", "flac", "webm"}
	f.Add(mp3File(f), uint8(0))
	f.Add(media(f, "h264_audio.mkv"), uint8(4))
	d := NewDecoder(Options{Frames: 3, Size: 16, AudioRate: 8000, AudioChannels: 2, Limits: Limits{
		MaxPixels: 1 << 20, MaxFramesDecoded: 300, SampleDeadline: time.Second, MaxAudioDuration: 10 * time.Second,
	}})
	f.Fuzz(func(t *testing.T, data []byte, kind uint8) {
		s := decSample("k", map[string][]byte{exts[int(kind)%len(exts)]: data, "txt": []byte("caption")})
		start := time.Now()
		out, err := d.Decode(context.Background(), s, nil)
		if time.Since(start) > 4*time.Second {
			t.Fatalf("took %v", time.Since(start))
		}
		checkSampleErr(t, "fuzz", err)
		if err == nil && out.Audio != nil && (out.Audio.Channels != 2 || len(out.Audio.PCM) != 2*out.Audio.Len()) {
			t.Fatalf("audio %d channels, %d samples for %d a channel", out.Audio.Channels, len(out.Audio.PCM), out.Audio.Len())
		}
	})
}
