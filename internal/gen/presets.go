package gen

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strings"

	"github.com/datahelix/datahelix/internal/tjpeg"
)

// A preset draws the specification of sample i of a dataset from a seeded
// generator. The distributions follow the published statistics of the
// public dataset each preset is named after (sources in the comments);
// what this machine cannot afford by default is scaled, and says so.

// kind is what a sample carries.
type kind string

const (
	kindVideo    kind = "video"
	kindImage    kind = "image"
	kindDocument kind = "document"
	kindText     kind = "text"
	kindAudio    kind = "audio"
)

// videoSpec says how to encode one clip.
type videoSpec struct {
	Seconds   float64 `json:"duration_s"`
	Width     int     `json:"width"`
	Height    int     `json:"height"`
	FPS       int     `json:"fps"`
	Codec     string  `json:"codec"`     // h264, hevc, vp9, av1
	Container string  `json:"container"` // mp4, webm
	GOP       int     `json:"gop"`       // maximum keyframe interval, frames
	BFrames   int     `json:"bframes"`
	KbitRate  int     `json:"kbit_s"`
	Content   string  `json:"content"` // lavfi source name
	Noise     int     `json:"noise"`   // temporal noise strength
	Audio     bool    `json:"audio"`
	FastStart bool    `json:"faststart"` // moov before mdat
}

// audioSpec says how to encode one audio file: a sine of Freq Hz with
// pink noise, the noise seeded by the sample.
type audioSpec struct {
	Seconds    float64 `json:"duration_s"`
	Codec      string  `json:"codec"`     // aac, mp3, flac, opus
	Container  string  `json:"container"` // m4a, mp3, flac, opus
	SampleRate int     `json:"sample_rate"`
	Channels   int     `json:"channels"`
	Freq       int     `json:"freq"`
}

// imageSpec says how to encode one image.
type imageSpec struct {
	Width       int    `json:"width"`
	Height      int    `json:"height"`
	Format      string `json:"format"` // jpg, png, webp
	Quality     int    `json:"quality"`
	Subsampling string `json:"subsampling,omitempty"` // JPEG: 420, 422, 444
	Progressive bool   `json:"progressive,omitempty"`
	Content     string `json:"content"`
	Noise       int    `json:"noise"`
}

// sampleSpec is everything needed to render sample Index; it is also the
// sample's JSON metadata member.
type sampleSpec struct {
	Preset string      `json:"preset"`
	Source string      `json:"source"` // the dataset the distributions come from
	Seed   uint64      `json:"seed"`
	Index  int         `json:"index"`
	Kind   kind        `json:"kind"`
	Video  *videoSpec  `json:"video,omitempty"`
	Audio  *audioSpec  `json:"audio,omitempty"`
	Images []imageSpec `json:"images,omitempty"`
	// Layout is the reading order of a document: "text" or "image" per
	// position (members KEY.<pos>.txt and KEY.<pos>.jpg).
	Layout []string `json:"layout,omitempty"`
	Words  []int    `json:"words"` // word count of each text part
}

// preset describes one named dataset.
type preset struct {
	name string
	// source names the public dataset whose statistics it follows.
	source string
	// durScale is the default duration reduction for this machine.
	durScale float64
	// spec draws the sample.
	spec func(r *rand.Rand, sc scales) sampleSpec
}

// scales are the reductions applied to drawn durations and sizes.
type scales struct{ dur, size float64 }

// lognormal draws from a log-normal with the given mean and shape sigma.
func lognormal(r *rand.Rand, mean, sigma float64) float64 {
	mu := math.Log(mean) - sigma*sigma/2
	return math.Exp(mu + sigma*r.NormFloat64())
}

func clamp(v, lo, hi float64) float64 { return math.Min(math.Max(v, lo), hi) }

// pick returns an index drawn with the given weights.
func pick(r *rand.Rand, weights ...float64) int {
	sum := 0.0
	for _, w := range weights {
		sum += w
	}
	x := r.Float64() * sum
	for i, w := range weights {
		if x < w {
			return i
		}
		x -= w
	}
	return len(weights) - 1
}

// even rounds v to a positive even integer (4:2:0 video needs even sizes).
func even(v float64) int { return max(2, int(math.Round(v/2))*2) }

// video draws the encoding of a clip of the given duration and size, with
// the codec mix, GOP and bitrate of web video: GOP 1-2 s, B-frames on for
// H.264/HEVC, about 0.04-0.12 bits per pixel per frame.
func video(r *rand.Rand, sc scales, seconds float64, w, h int, codecWeights [4]float64) *videoSpec {
	codecs := []string{"h264", "hevc", "vp9", "av1"}
	v := &videoSpec{
		Seconds: math.Round(clamp(seconds*sc.dur, 0.5, 3600)*100) / 100,
		Width:   even(float64(w) * sc.size),
		Height:  even(float64(h) * sc.size),
		FPS:     []int{30, 25, 24, 30}[r.IntN(4)],
		Codec:   codecs[pick(r, codecWeights[:]...)],
		Noise:   4 + r.IntN(10),
		Content: []string{"testsrc2", "testsrc2", "life", "testsrc"}[r.IntN(4)],
	}
	v.GOP = int(float64(v.FPS) * (1 + r.Float64()))
	bpp := 0.04 + 0.08*r.Float64()
	v.KbitRate = max(50, int(bpp*float64(v.Width*v.Height*v.FPS)/1000))
	switch v.Codec {
	case "h264", "hevc":
		v.Container, v.BFrames = "mp4", 3
		v.FastStart = r.IntN(10) < 7
		v.Audio = r.IntN(10) < 3
	case "vp9":
		v.Container = "webm"
	case "av1":
		// AV1 encodes slowly: keep it small and short.
		v.Container = "mp4"
		v.Seconds = math.Min(v.Seconds, 4)
		v.Width, v.Height = min(v.Width, 426), min(v.Height, 240)
		v.KbitRate = min(v.KbitRate, 300)
	}
	return v
}

// imageOf draws one web image of the given size.
func imageOf(r *rand.Rand, sc scales, w, h int, format string) imageSpec {
	im := imageSpec{
		Width:   max(16, int(math.Round(float64(w)*sc.size))),
		Height:  max(16, int(math.Round(float64(h)*sc.size))),
		Format:  format,
		Noise:   5 + r.IntN(15),
		Content: []string{"testsrc2", "mandelbrot", "life", "cellauto"}[r.IntN(4)],
	}
	switch format {
	case "jpg":
		im.Quality = 2 + r.IntN(5) // ffmpeg -q:v: 2 is JPEG quality ~95, 6 ~85
		im.Subsampling = []string{"420", "420", "420", "444", "422"}[r.IntN(5)]
	case "webp":
		im.Quality = 60 + r.IntN(35)
	}
	if im.Width*im.Height > 1<<20 {
		im.Content = []string{"testsrc2", "testsrc"}[r.IntN(2)] // cheap to draw at 4K
	}
	return im
}

var presets = map[string]preset{
	// HowTo100M (Miech et al., ICCV 2019): 136M clips from 1.22M narrated
	// instructional YouTube videos, clips of 3.6 s on average (short, ASR
	// segment aligned); commonly distributed at 240p. Log-normal length.
	"howto100m": {name: "howto100m", source: "HowTo100M", durScale: 1, spec: func(r *rand.Rand, sc scales) sampleSpec {
		w := []int{426, 320}[pick(r, 0.8, 0.2)]
		return sampleSpec{Kind: kindVideo, Video: video(r, sc, clamp(lognormal(r, 3.6, 0.5), 1, 30), w, 240, [4]float64{0.8, 0, 0.2, 0}), Words: []int{8 + r.IntN(12)}}
	}},
	// Kinetics-400/700 (Kay et al., 2017): 10 s clips cut from YouTube;
	// nearly all exactly 10 s, a few shorter where the video ends. Stored
	// by most loaders with the short side at 256-360 px.
	"kinetics": {name: "kinetics", source: "Kinetics", durScale: 1, spec: func(r *rand.Rand, sc scales) sampleSpec {
		secs := 10.0
		if r.IntN(100) < 8 {
			secs = 2 + 8*r.Float64()
		}
		size := [][2]int{{340, 256}, {456, 256}, {640, 360}, {480, 360}}[pick(r, 0.3, 0.3, 0.3, 0.1)]
		return sampleSpec{Kind: kindVideo, Video: video(r, sc, secs, size[0], size[1], [4]float64{0.7, 0.05, 0.25, 0}), Words: []int{2 + r.IntN(3)}}
	}},
	// Panda-70M (Chen et al., CVPR 2024): 70.8M captioned clips of 8.5 s on
	// average (166.8K hours) cut from 720p HD-VILA-100M videos; heavy tail
	// of long clips. YouTube serves some AV1: kept rare here.
	"panda70m": {name: "panda70m", source: "Panda-70M", durScale: 1, spec: func(r *rand.Rand, sc scales) sampleSpec {
		return sampleSpec{Kind: kindVideo, Video: video(r, sc, clamp(lognormal(r, 8.5, 0.9), 1, 60), 1280, 720, [4]float64{0.85, 0.05, 0.08, 0.02}), Words: []int{10 + r.IntN(20)}}
	}},
	// WebVid-10M (Bain et al., ICCV 2021): 10.7M stock-footage previews,
	// 52K hours (17.5 s mean), 596x336 watermarked MP4.
	"webvid": {name: "webvid", source: "WebVid-10M", durScale: 1, spec: func(r *rand.Rand, sc scales) sampleSpec {
		return sampleSpec{Kind: kindVideo, Video: video(r, sc, clamp(lognormal(r, 17.5, 0.45), 4, 60), 596, 336, [4]float64{1, 0, 0, 0}), Words: []int{8 + r.IntN(15)}}
	}},
	// ActivityNet v1.3 (Caba Heilbron et al., CVPR 2015): 20K untrimmed
	// YouTube videos, 849 hours (about 150 s mean, 5 s to 10 min), 360p to
	// 720p. Durations are scaled by 0.1 by default on this 2-core machine
	// (15 s mean, same log-normal shape); Config.DurationScale = 1 restores them.
	"activitynet": {name: "activitynet", source: "ActivityNet v1.3", durScale: 0.1, spec: func(r *rand.Rand, sc scales) sampleSpec {
		size := [][2]int{{640, 360}, {480, 360}, {1280, 720}}[pick(r, 0.5, 0.3, 0.2)]
		return sampleSpec{Kind: kindVideo, Video: video(r, sc, clamp(lognormal(r, 150, 0.7), 5, 600), size[0], size[1], [4]float64{0.75, 0, 0.25, 0}), Words: []int{15 + r.IntN(30)}}
	}},
	// ImageNet ILSVRC-2012 (Russakovsky et al., IJCV 2015): 1.28M JPEGs,
	// typically 500 px on the long side; 500x375 is the most common size,
	// then 375x500, 500x333 and 500x500; high-quality baseline 4:2:0.
	"imagenet": {name: "imagenet", source: "ImageNet", durScale: 1, spec: func(r *rand.Rand, sc scales) sampleSpec {
		size := [][2]int{{500, 375}, {375, 500}, {500, 333}, {500, 500}, {0, 0}}[pick(r, 0.5, 0.15, 0.15, 0.1, 0.1)]
		if size[0] == 0 {
			size = [2]int{200 + r.IntN(600), 200 + r.IntN(600)}
		}
		im := imageOf(r, sc, size[0], size[1], "jpg")
		im.Quality, im.Subsampling = 2+r.IntN(3), "420"
		return sampleSpec{Kind: kindImage, Images: []imageSpec{im}, Words: []int{1 + r.IntN(3)}}
	}},
	// LAION-5B (Schuhmann et al., NeurIPS 2022): web images with alt-text,
	// heavy-tailed resolution (median around 500 px on the long side, up
	// to 4K and beyond), mostly JPEG (some progressive) with PNG and WebP.
	"laion": {name: "laion", source: "LAION-5B", durScale: 1, spec: func(r *rand.Rand, sc scales) sampleSpec {
		return sampleSpec{Kind: kindImage, Images: []imageSpec{webImage(r, sc)}, Words: []int{5 + r.IntN(20)}}
	}},
	// Interleaved image-text documents, OBELICS (Laurençon et al., 2023):
	// 141M web pages, 353M images (2.5 per document) and 115B tokens (about
	// 800 per document). Here 1-8 images, text and images in reading order.
	"interleaved": {name: "interleaved", source: "OBELICS", durScale: 1, spec: func(r *rand.Rand, sc scales) sampleSpec {
		n := 1 + min(int(lognormal(r, 2.3, 0.6)), 7)
		s := sampleSpec{Kind: kindDocument}
		s.Layout = append(s.Layout, "text")
		s.Words = append(s.Words, 40+r.IntN(200))
		for range n {
			s.Layout = append(s.Layout, "image")
			s.Images = append(s.Images, webImage(r, scales{sc.dur, sc.size * 0.6}))
			if r.IntN(3) > 0 {
				s.Layout = append(s.Layout, "text")
				s.Words = append(s.Words, 20+int(lognormal(r, 150, 0.8)))
			}
		}
		return s
	}},
	// AudioCaps (Kim et al., NAACL 2019): 46K AudioSet clips of 10 s (a
	// few shorter) with one human caption of about 9 words, as HF and
	// WebDataset copies store them: FLAC, MP3 or AAC (m4a), some Opus, at
	// 44.1 or 48 kHz (16 kHz resampled copies), mono or stereo. Read only
	// with the audio output on (--audio-rate).
	"audiocaps": {name: "audiocaps", source: "AudioCaps", durScale: 1, spec: func(r *rand.Rand, sc scales) sampleSpec {
		secs := 10.0
		if r.IntN(100) < 10 {
			secs = 2 + 8*r.Float64()
		}
		c := pick(r, 0.3, 0.3, 0.3, 0.1)
		a := &audioSpec{Seconds: math.Max(0.5, math.Round(secs*sc.dur*100)/100),
			Codec: []string{"flac", "mp3", "aac", "opus"}[c], Container: []string{"flac", "mp3", "m4a", "opus"}[c],
			SampleRate: []int{44100, 48000, 16000}[pick(r, 0.4, 0.4, 0.2)], Channels: 1 + r.IntN(2), Freq: 100 + r.IntN(2000)}
		if a.Codec == "opus" {
			a.SampleRate = 48000 // Opus codes at 48 kHz only
		}
		return sampleSpec{Kind: kindAudio, Audio: a, Words: []int{5 + r.IntN(9)}}
	}},
	// Text documents (web text as in C4, Raffel et al., JMLR 2020: about
	// 400-500 tokens per document, log-normal).
	"text": {name: "text", source: "C4", durScale: 1, spec: func(r *rand.Rand, sc scales) sampleSpec {
		return sampleSpec{Kind: kindText, Words: []int{10 + int(clamp(lognormal(r, 350, 0.9), 0, 20000))}}
	}},
}

// webImage draws a LAION-like image: log-normal long side, common aspect
// ratios, JPEG (15 % progressive), PNG or WebP.
func webImage(r *rand.Rand, sc scales) imageSpec {
	long := clamp(lognormal(r, 600, 0.7), 64, 3840)
	ar := []float64{1, 4.0 / 3, 3.0 / 2, 16.0 / 9, 3.0 / 4}[pick(r, 0.25, 0.25, 0.15, 0.2, 0.15)]
	w, h := long, long/ar
	if ar < 1 {
		w, h = long*ar, long
	}
	format := []string{"jpg", "png", "webp"}[pick(r, 0.9, 0.06, 0.04)]
	im := imageOf(r, sc, int(w), int(h), format)
	// Progressive JPEGs need TurboJPEG's lossless transform; a build
	// without it (-tags noturbojpeg) writes them as baseline.
	im.Progressive = format == "jpg" && r.IntN(100) < 15 && tjpeg.Backend == "turbojpeg"
	return im
}

// mixtures are the presets that mix others, one source per shard in
// turn: every shard is source-homogeneous, as WebDataset mixtures are
// (each source is sharded by its own tool, img2dataset or video2dataset,
// and the mixture is a list of shards).
var mixtures = map[string][]string{
	"mixed": {"kinetics", "imagenet", "text", "howto100m"},
	// hdmix is a video-LLM mixture with one heavy HD source, in equal
	// shards: HD clips (Panda-70M, 720p), short narrated clips
	// (HowTo100M), images (ImageNet) and text (C4), the kinds a video
	// LLM's mixture holds (Video-LLaMA, VideoChat2 and LLaVA-Video train on
	// HD video, short clips, image-text pairs and text together). The
	// rank that streams the HD shard has about ten times the decoding of
	// the next: the regime that cross-rank balancing is for.
	"hdmix": {"panda70m", "howto100m", "imagenet", "text"},
}

// IsMixture reports whether the preset name mixes other presets, one per
// shard: such a preset is described by its sources, not calibrated or
// listed as a source itself.
func IsMixture(name string) bool {
	_, ok := mixtures[name]
	return ok
}

// Presets lists the preset names.
func Presets() []string {
	var names []string
	for n := range mixtures {
		names = append(names, n)
	}
	for n := range presets {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// sourceOf returns the preset whose distributions shard s of a dataset of
// preset name follows.
func sourceOf(name string, shard int) (preset, error) {
	if srcs, ok := mixtures[name]; ok {
		return presets[srcs[shard%len(srcs)]], nil
	}
	p, ok := presets[name]
	if !ok {
		return preset{}, fmt.Errorf("%w %q (have %s)", ErrPreset, name, strings.Join(Presets(), ", "))
	}
	return p, nil
}
