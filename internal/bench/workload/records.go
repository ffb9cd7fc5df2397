package workload

import (
	"encoding/json"
	"fmt"
	"math"

	"github.com/datahelix/datahelix/decode"
	"github.com/datahelix/datahelix/internal/decoding"
	"github.com/datahelix/datahelix/internal/gen"
)

// genSpec is the part of the generator's per-sample metadata
// (gen.Spec) that the cost of a sample depends on.
type genSpec struct {
	Kind  string `json:"kind"`
	Video *struct {
		Seconds   float64 `json:"duration_s"`
		Width     int     `json:"width"`
		Height    int     `json:"height"`
		FPS       int     `json:"fps"`
		Codec     string  `json:"codec"`
		Container string  `json:"container"`
		GOP       int     `json:"gop"`
		BFrames   int     `json:"bframes"`
		KbitRate  int     `json:"kbit_s"`
	} `json:"video"`
	Audio *struct {
		Seconds    float64 `json:"duration_s"`
		Codec      string  `json:"codec"`
		SampleRate int     `json:"sample_rate"`
		Channels   int     `json:"channels"`
	} `json:"audio"`
	Images []genImage `json:"images"`
	Words  []int      `json:"words"`
}

// genImage is one image of a generator specification.
type genImage struct {
	Width       int    `json:"width"`
	Height      int    `json:"height"`
	Format      string `json:"format"`
	Quality     int    `json:"quality"`
	Subsampling string `json:"subsampling"`
	Progressive bool   `json:"progressive"`
	Content     string `json:"content"`
}

// format is the decoder's name of the image's format.
func (im genImage) format() string {
	if im.Format == "jpg" {
		return "jpeg"
	}
	return im.Format
}

// bppKeys are the keys of Calibration.BitsPerPixel for the image, most
// specific first: format, content and quality; format and content;
// format.
func (im genImage) bppKeys() []string {
	f := im.format()
	return []string{fmt.Sprintf("%s/%s/q%d", f, im.Content, im.Quality), f + "/" + im.Content, f}
}

// bitsPerPixel looks the image up in bpp by its most specific key.
func (im genImage) bitsPerPixel(bpp map[string]float64) float64 {
	for _, k := range im.bppKeys() {
		if v, ok := bpp[k]; ok {
			return v
		}
	}
	return defaultBitsPerPixel["jpeg"]
}

// Text statistics of the generator's vocabulary (internal/gen/text.go):
// about 5.4 bytes per word with its space, one token per word (no word
// is over 8 letters) plus one per sentence-ending period, sentences of 6
// to 20 words.
const (
	bytesPerWord   = 5.4
	wordsPerPeriod = 13
	// metaBytes is the size of a generated sample's .json member.
	metaBytes = 400
)

// drawSpec returns the generator's specification of sample i of a
// one-shard dataset of preset p.
func drawSpec(p string, seed uint64, durScale float64, i int) (*genSpec, error) {
	data, err := gen.Spec(gen.Config{Preset: p, Samples: i + 1, Shards: 1, Out: ".", Seed: seed, DurationScale: durScale}, i)
	if err != nil {
		return nil, err
	}
	var s genSpec
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("bench: preset %s sample %d: %w", p, i, err)
	}
	return &s, nil
}

// syntheticRecord builds the lightweight record the real parser would
// read from the sample the generator encodes from s, without encoding it:
//
//   - a clip has ceil(duration x fps) frames, a keyframe every GOP frames
//     (the generator forces them), and, for H.264 and HEVC with B-frames,
//     x264's decode order with a B-pyramid (P, then the middle B, then
//     the others: pts +4, +2, +1, +3 for 3 B-frames); VP9 and AV1 have
//     none. Frame sizes follow I:P:B = 5:2:1 (what the generated H.264
//     clips show) scaled to the target bitrate.
//   - an image's compressed size is its pixels times the bits per pixel
//     of its format, content and quality (measured by bench calibrate on
//     generated images; coarser keys when a combination was not seen).
//   - text is bytesPerWord bytes and one token per word plus periods.
func syntheticRecord(s *genSpec, bpp map[string]float64) (*decoding.Record, error) {
	r := &decoding.Record{Bytes: metaBytes}
	words := 0
	for _, n := range s.Words {
		words += n
	}
	if words > 0 {
		tb := int(math.Round(bytesPerWord * float64(words)))
		r.Text = &decoding.TextInfo{Bytes: tb, Tokens: words + words/wordsPerPeriod}
		r.Bytes += int64(tb)
	}
	switch s.Kind {
	case "video":
		if s.Video == nil {
			return nil, fmt.Errorf("bench: video sample without a video")
		}
		r.Modality = decode.ModalityVideo
		r.Video = syntheticVideo(s)
		r.Bytes += r.Video.Bytes
	case "image", "document":
		if len(s.Images) == 0 {
			return nil, fmt.Errorf("bench: %s sample without images", s.Kind)
		}
		r.Modality = decode.ModalityImage
		if s.Kind == "document" {
			r.Modality = decode.ModalityDocument
		}
		for _, im := range s.Images {
			format := im.format()
			px := float64(im.Width) * float64(im.Height)
			b := max(int(px*im.bitsPerPixel(bpp)/8), 100)
			sub := ""
			if format == "jpeg" {
				sub = im.Subsampling
			}
			r.Images = append(r.Images, decoding.ImageInfo{Format: format, Width: im.Width, Height: im.Height, Bytes: b,
				Progressive: im.Progressive, Subsampling: sub})
			r.Bytes += int64(b)
		}
	case "text":
		r.Modality = decode.ModalityText
		if r.Text == nil {
			r.Text = &decoding.TextInfo{}
		}
	case "audio":
		a := s.Audio
		if a == nil {
			return nil, fmt.Errorf("bench: audio sample without its audio")
		}
		r.Modality = decoding.ModalityAudio
		r.Audio = &decoding.AudioInfo{Codec: a.Codec, SampleRate: a.SampleRate, Channels: a.Channels, Timescale: 1000, Duration: int64(math.Round(a.Seconds * 1000))}
	default:
		return nil, fmt.Errorf("bench: unknown sample kind %q", s.Kind)
	}
	return r, nil
}

// syntheticVideo lays out the frames of a generated clip as the container
// parser would report them.
func syntheticVideo(s *genSpec) *decoding.VideoInfo {
	v := s.Video
	fps := max(v.FPS, 1)
	frames := max(int(math.Ceil(v.Seconds*float64(fps)-1e-6)), 1)
	const tick = 512 // timescale = fps x 512, as the generated MP4s have
	gop := max(v.GOP, 1)
	mini := 1 // frames per P + B-frames group
	if v.Codec == "h264" || v.Codec == "hevc" {
		mini = v.BFrames + 1
	}
	info := &decoding.VideoInfo{
		Container: v.Container, Codec: v.Codec, Width: v.Width, Height: v.Height,
		Timescale: uint32(fps * tick), Duration: int64(frames) * tick, Frames: frames,
		FrameBytes: make([]uint32, 0, frames), FramePTS: make([]int64, 0, frames),
	}
	weights := make([]float64, 0, frames)
	for k := 0; k < frames; k += gop {
		info.Keyframes = append(info.Keyframes, k)
		end := min(k+gop, frames)
		info.FramePTS = append(info.FramePTS, int64(k)*tick)
		weights = append(weights, 5)
		for g := k + 1; g < end; g += mini {
			last := min(g+mini, end) - 1
			// P, then the middle B, then the others in order.
			info.FramePTS = append(info.FramePTS, int64(last)*tick)
			weights = append(weights, 2)
			if last == g {
				continue
			}
			mid := g + (last-1-g)/2
			info.FramePTS = append(info.FramePTS, int64(mid)*tick)
			weights = append(weights, 1)
			for f := g; f < last; f++ {
				if f != mid {
					info.FramePTS = append(info.FramePTS, int64(f)*tick)
					weights = append(weights, 1)
				}
			}
		}
	}
	total := float64(v.KbitRate) * 1000 / 8 * v.Seconds
	sum := 0.0
	for _, w := range weights {
		sum += w
	}
	for _, w := range weights {
		b := uint32(max(math.Round(total*w/sum), 1))
		info.FrameBytes = append(info.FrameBytes, b)
		info.Bytes += int64(b)
	}
	return info
}
