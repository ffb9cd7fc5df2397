package decoding

import (
	"bytes"
	"fmt"

	"github.com/datahelix/datahelix/internal/av"
	"github.com/datahelix/datahelix/internal/tjpeg"
	"github.com/datahelix/datahelix/internal/transform"
	"github.com/datahelix/datahelix/internal/video"
)

// uprightSize is the size of clip v's frames shown upright: a turn by 90
// or 270 degrees swaps the coded sides.
func uprightSize(v *VideoInfo) (w, h int) {
	if v.Turn()%180 == 90 {
		return v.Height, v.Width
	}
	return v.Width, v.Height
}

// ClipTargets returns the decode-order frames Decode samples from the
// clip v of s, sorted by presentation time: F frames uniformly over the
// clip (video.SampleFrames), or, with Options.Transform's segment
// sampling, F frames Stride apart from a start seeded by the sample's
// epoch and key (video.SampleSegment), or with its fps sampling the
// frames at that rate from the start, at most F (video.SampleRate). A caller that splits a clip into
// tasks plans them over these.
func (d *Decoder) ClipTargets(s *Sample, v *VideoInfo) []int {
	tf := d.opts.Transform
	switch tf.Temporal {
	case transform.Segment:
		return video.SampleSegment(v, d.opts.Frames, tf.Stride, func(count, span int) int {
			return tf.SegmentStart(s.Epoch, s.Key, count, span)
		})
	case transform.Rate:
		return video.SampleRate(v, tf.MilliFPS(), d.opts.Frames)
	}
	return video.SampleFrames(v, d.opts.Frames)
}

// ClipFrames is F, the frames of the tensor of a clip for which
// ClipTargets gave targets frames: Options.Frames, whose slots repeat
// the frames of a shorter clip; with fps sampling the targets alone (at
// least 1), so that F varies by clip and no frame repeats.
func (d *Decoder) ClipFrames(targets int) int {
	if d.opts.Transform.Temporal == transform.Rate {
		return min(max(targets, 1), d.opts.Frames)
	}
	return d.opts.Frames
}

// clipConfig returns the av configuration that decodes the clip v of s
// with its transform: the crop of the upright picture chosen from the
// record's size (which the C side scales to the decoded frames' when
// they differ) and the flip. The default squash leaves the configuration
// as it was, so its output does not change.
func (d *Decoder) clipConfig(s *Sample, v *VideoInfo) av.Config {
	cfg := d.cfg
	if s == nil || d.opts.Transform.Identity() {
		return cfg
	}
	w, h := uprightSize(v)
	view := d.opts.Transform.View(s.Epoch, s.Key, 0, w, h)
	if !view.Whole(max(w, 1), max(h, 1)) {
		c := view.Crop
		cfg.Crop = av.Crop{X: c.X, Y: c.Y, W: c.W, H: c.H, RefW: max(w, 1), RefH: max(h, 1)}
	}
	cfg.HFlip = view.Flip
	return cfg
}

// imageView returns the transform of image index of s, w x h pixels.
func (d *Decoder) imageView(s *Sample, index, w, h int) transform.View {
	if s == nil {
		return transform.View{Crop: transform.Rect{W: w, H: h}}
	}
	return d.opts.Transform.View(s.Epoch, s.Key, index, w, h)
}

// flipped returns a function that returns t, err, t mirrored left to
// right first when flip is set (in C: av.FlipRGB): squash's flip is the
// exact mirror of its unflipped output.
func (d *Decoder) flipped(t Tensor, err error) func(flip bool) (Tensor, error) {
	return func(flip bool) (Tensor, error) {
		if err == nil && flip {
			av.FlipRGB(t.Data, d.opts.Size, d.opts.Size)
		}
		return t, err
	}
}

// decodeImageView decodes image index of s (data) with its transform:
// its crop scaled to S x S with swscale's bilinear filter (ScaleRGB, the
// crop read in place), flipped when the view says so. A JPEG is first
// DCT-scaled to the smallest of TurboJPEG's sizes whose crop still
// covers S x S, so a small crop of a large photo decodes few pixels. A
// crop smaller than S x S is scaled up. A view of the whole picture,
// flipped or not, takes decodeImage's path, whose output is today's.
func (d *Decoder) decodeImageView(s *Sample, index int, data []byte) (Tensor, error) {
	size := d.opts.Size
	maxPix := d.opts.Limits.MaxImagePixels
	var img tjpeg.Image
	var view transform.View
	w, h := 0, 0
	if bytes.HasPrefix(data, []byte{0xFF, 0xD8}) {
		hdr, err := tjpeg.DecodeHeader(data)
		if err != nil {
			return Tensor{}, err
		}
		w, h = hdr.Width, hdr.Height
		view = d.imageView(s, index, w, h)
		if view.Crop == (transform.Rect{W: w, H: h}) {
			return d.flipped(d.decodeImage(data))(view.Flip)
		}
		c := view.Crop
		// The full size whose crop is at least S x S.
		minW := (size*w + c.W - 1) / c.W
		minH := (size*h + c.H - 1) / c.H
		if img, err = tjpeg.Decode(data, tjpeg.Options{MinWidth: minW, MinHeight: minH, MaxPixels: maxPix}); err != nil {
			return Tensor{}, err
		}
	} else {
		var err error
		if img, err = decodeImageRGB(data, maxPix, 0); err != nil {
			return Tensor{}, err
		}
		w, h = img.Width, img.Height
		view = d.imageView(s, index, w, h)
		if view.Crop == (transform.Rect{W: w, H: h}) {
			t := Tensor{Shape: []int{size, size, 3}, Data: make([]byte, size*size*3)}
			resizeRGB(t.Data, size, size, img.Pix, img.Width, img.Height)
			return d.flipped(t, nil)(view.Flip)
		}
	}
	t := Tensor{Shape: []int{size, size, 3}, Data: make([]byte, size*size*3)}
	c := view.Crop.Scaled(w, h, img.Width, img.Height)
	stride := img.Width * 3
	if c.X+c.W > img.Width || c.Y+c.H > img.Height {
		return Tensor{}, fmt.Errorf("%w: crop %+v outside a %dx%d image", ErrCorrupt, c, img.Width, img.Height)
	}
	if err := av.ScaleRGB(t.Data, size, size, 0, img.Pix[c.Y*stride+c.X*3:], stride, c.W, c.H, view.Flip); err != nil {
		return Tensor{}, err
	}
	return t, nil
}
