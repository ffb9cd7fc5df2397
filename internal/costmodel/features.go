package costmodel

import (
	"math"

	"github.com/datahelix/datahelix/decode"
	"github.com/datahelix/datahelix/internal/decoding"
	"github.com/datahelix/datahelix/internal/transform"
	"github.com/datahelix/datahelix/internal/video"
)

// Options are the decode options a cost estimate is for: they change
// which frames are decoded and how many output pixels are written.
type Options struct {
	Frames   int // F: frames sampled per clip
	Size     int // S: output side, every frame and image becomes S x S
	MaxTasks int // how many keyframe-aligned tasks a clip may split into
	// Transform changes which frames are decoded (segment sampling: the
	// record's epoch and key give its start, as they give the decoder's)
	// and how many source pixels are scaled (a crop, priced at its
	// expected area).
	Transform transform.Spec
	// AudioRate is the audio output's sample rate (decode.Options.
	// AudioRate; 0: no audio), which prices a clip's audio track.
	AudioRate int `json:",omitempty"`
}

// DefaultOptions returns the decoder's defaults: 8 frames of 224 x 224,
// one task per clip.
func DefaultOptions() Options {
	return Options{Frames: decode.DefaultFrames, Size: decode.DefaultSize, MaxTasks: 1}
}

func (o Options) withDefaults() Options {
	d := DefaultOptions()
	if o.Frames <= 0 {
		o.Frames = d.Frames
	}
	if o.Size <= 0 {
		o.Size = d.Size
	}
	if o.MaxTasks <= 0 {
		o.MaxTasks = d.MaxTasks
	}
	return o
}

// numCostFeatures is the length of every cost feature vector.
const numCostFeatures = 8

// featureVector is the feature vector of one sample. Its meaning depends on
// the model key (see costFeatures); units are chosen so that coefficients
// are microseconds per megapixel, per megabyte or per item, all of
// similar magnitude.
type featureVector [numCostFeatures]float64

// Model keys: one linear model per modality and codec or image format.
const (
	costKeyText     = "text"
	costKeyDocument = "document"
	costKeyUnknown  = "unknown"
)

// costFeatures returns the model key of a record and its features:
//
//	video/<codec>:  [0] tasks (one container open and decoder setup each),
//	                [1] megapixels of the frames video.PlanTasks must decode
//	                that are not reordered, [2] megapixels of the reordered
//	                ones (B-frames, which a decoder may skip), [3] megabytes
//	                of the decoded frames, [4] megapixels colour-converted
//	                and scaled (sampled frames x source size), [5] output
//	                megapixels (sampled frames x S^2), [6] thousands of
//	                frames in the clip (the demuxer indexes them all);
//	image/<format>, document:
//	                [0] images, [1] JPEG megapixels decoded (after DCT
//	                scaling, as the decoder does it), [2] JPEG source
//	                megapixels, [3] JPEG megabytes, [4] source megapixels
//	                of progressive JPEGs, [5] PNG megapixels, [6] WebP
//	                megapixels, [7] PNG and WebP megabytes — documents mix
//	                formats whose cost per pixel differs several times;
//	text:           [0] 1, [1] thousands of tokens, [2] megabytes;
//	audio/<codec>:  [0] 1 (a container open and decoder setup), [1]
//	                seconds of audio decoded (audioSeconds);
//
// and for a clip with audio output on, video's [7] is the milliseconds
// its audio track costs as its codec's audio model prices it
// (audioCostMS), so that the clip's model learns one factor for it.
func costFeatures(r *decoding.Record, o Options) (string, featureVector) {
	var x featureVector
	switch r.Modality {
	case decode.ModalityVideo:
		if v := r.Video; v != nil {
			key, x := videoCostFeatures(v, o, r.Epoch, r.Key)
			if o.AudioRate > 0 && r.Audio != nil {
				first, count := decoding.AudioSpan(v, clipTargets(v, o, r.Epoch, r.Key), o.AudioRate)
				x[7] = audioCostMS(r.Audio.Codec, audioSeconds(first, count, o.AudioRate))
			}
			return key, x
		}
	case decoding.ModalityAudio:
		if a := r.Audio; a != nil {
			x[0] = 1
			if a.Timescale > 0 {
				x[1] = audioSecondsOf(float64(a.Start)/float64(a.Timescale), float64(a.Duration)/float64(a.Timescale))
			}
			return audioKey(a.Codec), x
		}
	case decode.ModalityImage, decode.ModalityDocument:
		key := costKeyDocument
		if r.Modality == decode.ModalityImage {
			key = "image/unknown"
			if len(r.Images) > 0 {
				key = "image/" + r.Images[0].Format
			}
		}
		for _, im := range r.Images {
			src := float64(im.Width) * float64(im.Height) / 1e6
			mb := float64(im.Bytes) / 1e6
			x[0]++
			switch im.Format {
			case "jpeg":
				x[1] += decodedImagePixels(im, o.Size, o.Transform) / 1e6
				x[2] += src
				x[3] += mb
				if im.Progressive {
					x[4] += src
				}
			case "png":
				x[5] += src
				x[7] += mb
			default:
				x[6] += src
				x[7] += mb
			}
		}
		x[0] = max(x[0], 1)
		return key, x
	case decode.ModalityText:
		x[0] = 1
		if r.Text != nil {
			x[1] = float64(r.Text.Tokens) / 1e3
			x[2] = float64(r.Text.Bytes) / 1e6
		}
		return costKeyText, x
	}
	x[0] = 1
	return costKeyUnknown, x
}

// clipTargets are the frames the decoder takes from clip v of the sample
// of epoch and key (decoding.Decoder.ClipTargets).
func clipTargets(v *video.Track, o Options, epoch int, key string) []int {
	targets := video.SampleFrames(v, o.Frames)
	switch tf := o.Transform; tf.Temporal {
	case transform.Segment:
		// The segment the decoder will take: its start is a function of
		// the seed, the sample's epoch and key, which the record carries.
		targets = video.SampleSegment(v, o.Frames, tf.Stride, func(count, span int) int { return tf.SegmentStart(epoch, key, count, span) })
	case transform.Rate:
		targets = video.SampleRate(v, tf.MilliFPS(), o.Frames) // exact: no randomness
	}
	return targets
}

func videoCostFeatures(v *video.Track, o Options, epoch int, key string) (string, featureVector) {
	var x featureVector
	codec := v.Codec
	if codec == "" {
		codec = "unknown"
	}
	targets := clipTargets(v, o, epoch, key)
	tasks := video.PlanTasks(v, targets, o.MaxTasks)
	px := float64(v.Width) * float64(v.Height) / 1e6
	fw, fh := cropFraction(o.Transform, v.Width, v.Height)
	x[0] = float64(max(len(tasks), 1))
	for _, t := range tasks {
		x[1] += float64(t.DecodeFrames-t.ReorderedFrames) * px
		x[2] += float64(t.ReorderedFrames) * px
		x[3] += float64(t.DecodeBytes) / 1e6
	}
	x[4] = float64(len(targets)) * px * fw * fh                  // swscale reads the crop alone
	cw, ch, _, _ := o.Transform.Shape(v.Width, v.Height, o.Size) // S x S, or native's scaled size
	x[5] = float64(len(targets)) * float64(cw) * float64(ch) / 1e6
	x[6] = float64(v.Frames) / 1e3
	return "video/" + codec, x
}

// cropFraction is the expected fraction of a w x h picture's width and
// height that tf's crop keeps: all of it for squash, the centre square
// for short-side, and for a random crop the square root of the mean of
// its area range on each side (its ratio averages near the picture's).
func cropFraction(tf transform.Spec, w, h int) (fw, fh float64) {
	if w <= 0 || h <= 0 {
		return 1, 1
	}
	switch tf.Resize {
	case transform.ShortSide:
		side := float64(min(w, h))
		return side / float64(w), side / float64(h)
	case transform.RandomCrop:
		sc := tf.WithDefaults().Scale
		f := math.Sqrt((sc[0] + sc[1]) / 2)
		return f, f
	}
	return 1, 1
}

// audioKey is the model key of audio of codec.
func audioKey(codec string) string {
	if codec == "" {
		codec = "unknown"
	}
	return "audio/" + codec
}

// audioSeconds returns the seconds of audio decoding count samples from
// first at rate decodes (audioSecondsOf).
func audioSeconds(first, count int64, rate int) float64 {
	return audioSecondsOf(float64(first)/float64(rate), float64(count)/float64(rate))
}

// audioSecondsOf returns the seconds of audio decoded for a span of
// seconds from start: from the stream's start, or from a quarter second
// before a span starting after the first second, where av.DecodeAudio
// seeks.
func audioSecondsOf(start, seconds float64) float64 {
	if start > 1 {
		return seconds + 0.25
	}
	return max(start, 0) + seconds
}

// audioCostMS prices decoding seconds of audio of codec in milliseconds,
// with the built-in audio coefficients (calibration_default.go; AAC's
// for a codec without its own).
func audioCostMS(codec string, seconds float64) float64 {
	c, ok := defaultCoefficients[audioKey(codec)]
	if !ok {
		c = defaultCoefficients["audio/aac"]
	}
	return (c[0] + c[1]*seconds) / 1000
}

// decodedImagePixels is the pixel count the decoder decodes an image to:
// JPEGs are DCT-scaled by the smallest factor n/8 that keeps both sides
// of the crop tf takes at least size (as TurboJPEG's scaled decode is
// used); other formats decode at full size.
func decodedImagePixels(im decoding.ImageInfo, size int, tf transform.Spec) float64 {
	w, h := im.Width, im.Height
	fw, fh := cropFraction(tf, w, h)
	if im.Format == "jpeg" && size > 0 {
		for n := 1; n < 8; n++ {
			sw, sh := (w*n+7)/8, (h*n+7)/8
			if float64(sw)*fw >= float64(size) && float64(sh)*fh >= float64(size) {
				w, h = sw, sh
				break
			}
		}
	}
	return float64(w) * float64(h)
}
