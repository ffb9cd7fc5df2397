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
// frames at that rate from the start, at most F (video.SampleRate). A
// caller that splits a clip into tasks plans them over these.
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

// ClipShape is the shape of the tensor of clip v for which ClipTargets
// gave targets frames: [F, H, W, 3], F from ClipFrames; H = W = S, or
// under native resizing the clip's upright picture scaled to at most S
// and padded to the bucket size.
func (d *Decoder) ClipShape(v *VideoInfo, targets int) []int {
	w, h := uprightSize(v)
	_, _, pw, ph := d.opts.Transform.Shape(w, h, d.opts.Size)
	return []int{d.ClipFrames(targets), ph, pw, 3}
}

// PictureBytes is the size of the decoded tensor of a w x h image (or
// of one frame of a clip that size, upright): S x S x 3, or its padded
// native size.
func (d *Decoder) PictureBytes(w, h int) int64 {
	_, _, pw, ph := d.opts.Transform.Shape(w, h, d.opts.Size)
	return int64(pw) * int64(ph) * 3
}

// NewTensor allocates a zeroed tensor of shape.
func NewTensor(shape []int) Tensor {
	n := 1
	for _, x := range shape {
		n *= x
	}
	return Tensor{Shape: shape, Data: make([]byte, n)}
}

// cfgPlane is the bytes between the frames cfg writes.
func cfgPlane(cfg av.Config) int {
	if cfg.Plane > 0 {
		return cfg.Plane
	}
	return cfg.Width * cfg.Height * 3
}

// clipConfig returns the av configuration that decodes the clip v of s
// with its transform: the crop of the upright picture chosen from the
// record's size (which the C side scales to the decoded frames' when
// they differ) and the flip. The default squash leaves the configuration
// as it was, so its output does not change.
func (d *Decoder) clipConfig(s *Sample, v *VideoInfo) av.Config {
	cfg := d.cfg
	w, h := uprightSize(v)
	if d.opts.Transform.Resize == transform.Native {
		// The picture at its own aspect, in the top left of its padded
		// slot.
		cw, ch, pw, ph := d.opts.Transform.Shape(w, h, d.opts.Size)
		cfg.Width, cfg.Height, cfg.Stride, cfg.Plane = cw, ch, pw*3, pw*ph*3
	}
	if s == nil || d.opts.Transform.Identity() {
		return cfg
	}
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
	if d.opts.Transform.Resize == transform.Native {
		return d.decodeImageNative(s, index, data)
	}
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

// decodeImageNative decodes image index of s (data) at its own aspect:
// scaled down so that its long side is at most S (a JPEG DCT-scaled to
// the smallest size that still covers it), into the top left of a
// tensor padded with zeros to the bucket size, flipped when its view
// says so.
func (d *Decoder) decodeImageNative(s *Sample, index int, data []byte) (Tensor, error) {
	size, maxPix := d.opts.Size, d.opts.Limits.MaxImagePixels
	var img tjpeg.Image
	w, h := 0, 0 // the full size, which the shape is chosen from
	if bytes.HasPrefix(data, []byte{0xFF, 0xD8}) {
		hdr, err := tjpeg.DecodeHeader(data)
		if err != nil {
			return Tensor{}, err
		}
		w, h = hdr.Width, hdr.Height
		cw, ch, _, _ := d.opts.Transform.Shape(w, h, size)
		if img, err = tjpeg.Decode(data, tjpeg.Options{MinWidth: cw, MinHeight: ch, MaxPixels: maxPix}); err != nil {
			return Tensor{}, err
		}
	} else {
		var err error
		if img, err = decodeImageRGB(data, maxPix, 0); err != nil {
			return Tensor{}, err
		}
		w, h = img.Width, img.Height
	}
	cw, ch, pw, ph := d.opts.Transform.Shape(w, h, size)
	view := d.imageView(s, index, w, h)
	t := NewTensor([]int{ph, pw, 3})
	if err := av.ScaleRGB(t.Data, cw, ch, pw*3, img.Pix, img.Width*3, img.Width, img.Height, view.Flip); err != nil {
		return Tensor{}, err
	}
	return t, nil
}
