package gen

import (
	"math/rand/v2"
	"testing"

	"github.com/datahelix/datahelix/decode"
)

// TestMaxSizeScaleWithinDecodeLimits draws many samples of every preset
// at MaxSizeScale and checks each picture is one datahelix decodes
// (decode.DefaultLimits), so that gen never writes a dataset whose
// samples run refuses; at 4x, the bound before, every panda70m clip
// was over the limit.
func TestMaxSizeScaleWithinDecodeLimits(t *testing.T) {
	lim := decode.DefaultLimits()
	for name, p := range presets {
		r := rand.New(rand.NewPCG(1, 2))
		var clipPx, imagePx int64
		for range 20000 {
			s := p.spec(r, scales{dur: 1, size: MaxSizeScale})
			if v := s.Video; v != nil {
				clipPx = max(clipPx, int64(v.Width)*int64(v.Height))
			}
			for _, im := range s.Images {
				imagePx = max(imagePx, int64(im.Width)*int64(im.Height))
			}
		}
		if clipPx > lim.MaxPixels || imagePx > lim.MaxImagePixels {
			t.Errorf("%s at size scale %v: largest clip %d pixels (limit %d), image %d (limit %d)",
				name, MaxSizeScale, clipPx, lim.MaxPixels, imagePx, lim.MaxImagePixels)
		}
	}
}
