package gen

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/datahelix/datahelix/decode"
	"github.com/datahelix/datahelix/internal/decoding"
	"github.com/datahelix/datahelix/internal/shard"
	"github.com/datahelix/datahelix/internal/tjpeg"
)

func needFFmpeg(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("ffmpeg"); err != nil {
		t.Skip("ffmpeg CLI not installed")
	}
}

// TestRenderDeterministic encodes every codec and image format twice and
// compares the bytes.
func TestRenderDeterministic(t *testing.T) {
	needFFmpeg(t)
	rd := &renderer{ffmpeg: "ffmpeg", tmp: t.TempDir()}
	ctx := context.Background()
	for _, codec := range []string{"h264", "hevc", "vp9", "av1"} {
		v := &videoSpec{Seconds: 0.6, Width: 96, Height: 64, FPS: 25, Codec: codec, Container: "mp4", GOP: 12, BFrames: 3, KbitRate: 200, Content: "testsrc2", Noise: 6, Audio: codec == "h264", FastStart: true}
		if codec == "vp9" {
			v.Container, v.BFrames, v.Audio = "webm", 0, false
		}
		a, err := rd.video(ctx, v, 42)
		if err != nil {
			t.Fatal(err)
		}
		b, err := rd.video(ctx, v, 42)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s: two encodes of the same spec differ (%d and %d bytes)", codec, len(a), len(b))
		}
		c, _ := rd.video(ctx, v, 43)
		if bytes.Equal(a, c) {
			t.Errorf("%s: different seeds gave the same bytes", codec)
		}
	}
	for _, im := range []imageSpec{
		{Width: 120, Height: 90, Format: "jpg", Quality: 3, Subsampling: "420", Content: "life", Noise: 9},
		{Width: 120, Height: 90, Format: "jpg", Quality: 3, Subsampling: "444", Progressive: true, Content: "mandelbrot", Noise: 9},
		{Width: 70, Height: 50, Format: "png", Content: "cellauto", Noise: 9},
		{Width: 70, Height: 50, Format: "webp", Quality: 70, Content: "testsrc2", Noise: 9},
	} {
		if im.Progressive && tjpeg.Backend != "turbojpeg" {
			continue // needs TurboJPEG's lossless transform
		}
		a, err := rd.image(ctx, im, 7)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := rd.image(ctx, im, 7)
		if !bytes.Equal(a, b) {
			t.Errorf("%s: two encodes differ", im.Format)
		}
		if im.Progressive && !bytes.Contains(a, []byte{0xFF, 0xC2}) {
			t.Errorf("progressive JPEG has no SOF2 marker")
		}
	}
}

// TestGenerateTwiceIsIdentical generates a small mixed dataset twice.
func TestGenerateTwiceIsIdentical(t *testing.T) {
	needFFmpeg(t)
	cfg := Config{Preset: "mixed", Samples: 8, Shards: 4, Seed: 9, DurationScale: 0.1, SizeScale: 0.4}
	var runs [2][][]byte
	for i := range runs {
		cfg.Out = filepath.Join(t.TempDir(), "out")
		paths, err := Generate(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if len(paths) != 4 {
			t.Fatalf("got %d shards, want 4", len(paths))
		}
		for _, p := range paths {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			runs[i] = append(runs[i], b)
		}
		if left, _ := filepath.Glob(filepath.Join(cfg.Out, ".gen-*")); len(left) != 0 {
			t.Errorf("scratch directories left behind: %v", left)
		}
	}
	for k := range runs[0] {
		if !bytes.Equal(runs[0][k], runs[1][k]) {
			t.Errorf("shard %d differs between two runs with the same seed", k)
		}
	}
}

// TestPresetsDecode generates a few samples of every preset, reads them
// back through the shard index and the record parser, checks the records
// against the generation parameters, and decodes them.
func TestPresetsDecode(t *testing.T) {
	needFFmpeg(t)
	n := 3
	if testing.Short() {
		n = 1
	}
	wantModality := map[kind]decode.Modality{kindVideo: decode.ModalityVideo, kindImage: decode.ModalityImage,
		kindDocument: decode.ModalityDocument, kindText: decode.ModalityText, kindAudio: decoding.ModalityAudio}
	for _, name := range Presets() {
		t.Run(name, func(t *testing.T) {
			opts := decoding.Options{Frames: 4, Size: 32}
			if name == "audiocaps" {
				opts.AudioRate = 16000 // read only with the audio output on
			}
			dec := decoding.NewDecoder(opts)
			cfg := Config{Preset: name, Samples: n, Shards: 1, Out: t.TempDir(), Seed: 3, DurationScale: 0.15, SizeScale: 0.35}
			if IsMixture(name) {
				cfg.Samples, cfg.Shards = 4, 4
			}
			paths, err := Generate(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range paths {
				sh, err := shard.Open(p, t.TempDir())
				if err != nil {
					t.Fatal(err)
				}
				for i := range sh.Len() {
					s, err := sh.ReadSample(i)
					if err != nil {
						t.Fatal(err)
					}
					var spec sampleSpec
					for _, m := range s.Members {
						if m.Ext == "json" {
							if err := json.Unmarshal(m.Data, &spec); err != nil {
								t.Fatal(err)
							}
						}
					}
					rec, err := decoding.ParseRecordFor(s, opts)
					if err != nil {
						t.Fatalf("sample %s: %v", s.Key, err)
					}
					if rec.Modality != wantModality[spec.Kind] {
						t.Errorf("sample %s: got modality %v, want %v", s.Key, rec.Modality, spec.Kind)
					}
					checkRecord(t, s.Key, spec, rec)
					out, err := dec.Decode(context.Background(), s, rec)
					if err != nil {
						t.Fatalf("sample %s: %v", s.Key, err)
					}
					if out.MissedFrames != 0 {
						t.Errorf("sample %s: %d sampled frames missed", s.Key, out.MissedFrames)
					}
					if a := spec.Audio; a != nil && math.Abs(float64(out.Audio.Len())/16000-a.Seconds) > 0.1 {
						t.Errorf("sample %s: %d samples of audio at 16 kHz, want %.2f s", s.Key, out.Audio.Len(), a.Seconds)
					}
				}
				sh.Close()
			}
		})
	}
}

func checkRecord(t *testing.T, key string, spec sampleSpec, rec *decoding.Record) {
	t.Helper()
	if v := spec.Video; v != nil {
		got := rec.Video
		if got == nil {
			t.Fatalf("sample %s: no video in the record", key)
		}
		secs := float64(got.Duration) / float64(got.Timescale)
		if got.Width != v.Width || got.Height != v.Height || got.Codec != v.Codec || math.Abs(secs-v.Seconds) > 0.15 {
			t.Errorf("sample %s: got %s %dx%d %.2fs, want %s %dx%d %.2fs", key, got.Codec, got.Width, got.Height, secs, v.Codec, v.Width, v.Height, v.Seconds)
		}
	}
	if a := spec.Audio; a != nil {
		got := rec.Audio
		if got == nil || got.Codec != a.Codec || got.SampleRate != a.SampleRate || got.Channels != a.Channels || math.Abs(got.Seconds()-a.Seconds) > 0.1 {
			t.Errorf("sample %s: got audio %+v, want %+v", key, got, a)
		}
	}
	if len(rec.Images) != len(spec.Images) {
		t.Fatalf("sample %s: got %d images, want %d", key, len(rec.Images), len(spec.Images))
	}
	for j, im := range spec.Images {
		got := rec.Images[j]
		if got.Width != im.Width || got.Height != im.Height || got.Progressive != im.Progressive {
			t.Errorf("sample %s image %d: got %dx%d progressive %v, want %dx%d %v", key, j, got.Width, got.Height, got.Progressive, im.Width, im.Height, im.Progressive)
		}
		if im.Format == "jpg" && got.Subsampling != im.Subsampling {
			t.Errorf("sample %s image %d: got subsampling %s, want %s", key, j, got.Subsampling, im.Subsampling)
		}
	}
}

// TestDistributions checks the drawn specs (no rendering) against the
// published statistics the presets cite.
func TestDistributions(t *testing.T) {
	const n = 4000
	stats := func(preset string, scale float64) (meanSecs float64, sizes map[[2]int]int, images []int, words []int) {
		sizes = map[[2]int]int{}
		cfg := Config{Preset: preset, Samples: n, Shards: 1, Out: "unused", Seed: 1, DurationScale: scale}
		for i := range n {
			b, err := Spec(cfg, i)
			if err != nil {
				t.Fatal(err)
			}
			var s sampleSpec
			if err := json.Unmarshal(b, &s); err != nil {
				t.Fatal(err)
			}
			if s.Video != nil {
				meanSecs += s.Video.Seconds / n
				sizes[[2]int{s.Video.Width, s.Video.Height}]++
			}
			for _, im := range s.Images {
				sizes[[2]int{im.Width, im.Height}]++
			}
			images = append(images, len(s.Images))
			total := 0
			for _, w := range s.Words {
				total += w
			}
			words = append(words, total)
		}
		return
	}
	for _, tc := range []struct {
		preset   string
		scale    float64
		mean, to float64
	}{
		{"howto100m", 0, 3.6, 0.3},
		{"kinetics", 0, 9.5, 0.3},
		{"panda70m", 0, 8.5, 0.8},
		{"webvid", 0, 17.5, 1.2},
		{"activitynet", 0, 15, 1.5},
		{"activitynet", 1, 150, 12},
	} {
		got, sizes, _, _ := stats(tc.preset, tc.scale)
		if math.Abs(got-tc.mean) > tc.to {
			t.Errorf("%s (scale %v): got mean duration %.2f s, want %.1f ± %.1f", tc.preset, tc.scale, got, tc.mean, tc.to)
		}
		if tc.preset == "howto100m" && sizes[[2]int{426, 240}] < n*3/4 {
			t.Errorf("howto100m: got %d of %d clips at 426x240, want most", sizes[[2]int{426, 240}], n)
		}
		if tc.preset == "panda70m" {
			hd := 0
			for s, c := range sizes {
				if s[1] == 720 || s[1] == 240 { // AV1 clips are capped at 240p
					hd += c
				}
			}
			if hd != n {
				t.Errorf("panda70m: got %d of %d clips at 720p (or capped AV1), want all", hd, n)
			}
		}
	}
	_, sizes, _, _ := stats("imagenet", 0)
	if c := sizes[[2]int{500, 375}]; c < n*2/5 || c > n*3/5 {
		t.Errorf("imagenet: got %d of %d images at 500x375, want about half", c, n)
	}
	_, sizes, _, _ = stats("laion", 0)
	var long []int
	for s, c := range sizes {
		for range c {
			long = append(long, max(s[0], s[1]))
		}
	}
	slices.Sort(long)
	if med := long[len(long)/2]; med < 400 || med > 700 || long[len(long)-1] < 2000 {
		t.Errorf("laion: got median long side %d and max %d, want 400-700 and a tail past 2000", med, long[len(long)-1])
	}
	_, _, images, _ := stats("interleaved", 0)
	sum := 0
	for _, k := range images {
		if k < 1 || k > 8 {
			t.Fatalf("interleaved: a document has %d images, want 1-8", k)
		}
		sum += k
	}
	if mean := float64(sum) / n; mean < 2 || mean > 3.5 {
		t.Errorf("interleaved: got %.2f images per document, want about 2.5 (OBELICS)", mean)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, cfg := range []Config{
		{Preset: "nope", Samples: 1, Shards: 1, Out: "x"},
		{Preset: "text", Samples: 0, Shards: 1, Out: "x"},
		{Preset: "text", Samples: 2, Shards: 3, Out: "x"},
		{Preset: "text", Samples: 2, Shards: 1},
		{Preset: "text", Samples: 2, Shards: 1, Out: "x", DurationScale: -1},
	} {
		if _, err := Generate(context.Background(), cfg); err == nil {
			t.Errorf("%+v: got no error", cfg)
		}
	}
}
