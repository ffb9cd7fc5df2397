package costmodel

import (
	"math/rand/v2"
	"testing"

	"github.com/datahelix/datahelix/internal/decoding"
	"github.com/datahelix/datahelix/internal/transform"
)

// TestTransformPricing: a crop lowers the scaled pixels of a clip and
// raises the DCT scale a JPEG must keep (a small crop of a large photo
// needs more of its pixels to cover S x S); squash prices as before.
func TestTransformPricing(t *testing.T) {
	jpeg := decoding.ImageInfo{Format: "jpeg", Width: 4000, Height: 3000}
	squash := decodedImagePixels(jpeg, 224, transform.Spec{})
	crop := decodedImagePixels(jpeg, 224, transform.Spec{Resize: transform.RandomCrop, Scale: [2]float64{0.08, 0.12}})
	if squash != 500*375 {
		t.Errorf("squash: got %v decoded pixels, want 500x375 (1/8)", squash)
	}
	if crop <= squash {
		t.Errorf("a 10%% crop decodes %v pixels, want more than squash's %v", crop, squash)
	}
	if fw, fh := cropFraction(transform.Spec{Resize: transform.ShortSide}, 640, 480); fw != 0.75 || fh != 1 {
		t.Errorf("short-side of 640x480: got %v, %v, want 0.75, 1", fw, fh)
	}
	v := syntheticVideo(rand.New(rand.NewPCG(1, 2)), "h264").Video
	v.Width, v.Height = 1280, 720
	_, x := videoCostFeatures(v, Options{Frames: 8, Size: 224, MaxTasks: 1}, 0, "k")
	_, y := videoCostFeatures(v, Options{Frames: 8, Size: 224, MaxTasks: 1, Transform: transform.Spec{Resize: transform.ShortSide}}, 0, "k")
	if want := x[4] * 720 / 1280; y[4] < want*0.999 || y[4] > want*1.001 {
		t.Errorf("short-side scales %v megapixels, want %v", y[4], want)
	}
}
