package loader

import (
	"crypto/md5"
	"fmt"
	"sync"
	"testing"

	"github.com/datahelix/datahelix/internal/gen/gentest"
	"github.com/datahelix/datahelix/internal/transform"
)

// TestTransformsSameWhoeverDecodes: with a random crop, flips and
// segment sampling, every sample of the tiny dataset (a sample id names
// its epoch) gets byte-identical tensors under torch, local and helix,
// although helix decodes some on other ranks than their owners (the
// epoch travels with the moved sample); a key seen in two epochs gets
// other tensors in each.
func TestTransformsSameWhoeverDecodes(t *testing.T) {
	data := gentest.Tiny(t)
	for _, f := range []transform.Flags{
		{Resize: "random-crop", CropScale: "0.2,0.9", HFlip: "0.5", Frames: "segment", Stride: "2"},
		{Resize: "short-side", HFlip: "0.5", Frames: "fps", FPS: "3"},
		{Resize: "native", PadTo: "4", HFlip: "0.5", Frames: "segment"},
	} {
		spec, err := transform.Parse(f)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(spec.String(), func(t *testing.T) { sameWhoeverDecodes(t, data, spec) })
	}
}

func sameWhoeverDecodes(t *testing.T, data string, spec transform.Spec) {
	var want map[uint64][16]byte
	for _, k := range []Kind{KindTorch, KindLocal, KindHelix} {
		cfg := testConfig(k)
		cfg.Steps = 8 // 64 samples: both epochs of the 32
		cfg.Decode.Frames = 6
		cfg.Decode.Transform = spec
		frames := map[int]bool{} // the clips' F
		shapes := map[[2]int]bool{}
		var mu sync.Mutex
		got := map[uint64][16]byte{}
		byKey := map[string]map[[16]byte]bool{}
		moved := 0
		eachBatch(t, 4, data, cfg, func(rank int, b *Batch) error {
			mu.Lock()
			defer mu.Unlock()
			for _, s := range b.Samples {
				h := md5.New()
				for _, tn := range s.Tensors {
					fmt.Fprint(h, tn.Shape)
					h.Write(tn.Data)
				}
				var sum [16]byte
				h.Sum(sum[:0])
				got[s.ID] = sum
				if byKey[s.Key] == nil {
					byKey[s.Key] = map[[16]byte]bool{}
				}
				if len(s.Tensors) > 0 {
					byKey[s.Key][sum] = true
				}
				if rank != s.Owner {
					moved++
				}
				if len(s.Tensors) == 1 && len(s.Tensors[0].Shape) == 4 {
					frames[s.Tensors[0].Shape[0]] = true
				}
				for _, tn := range s.Tensors {
					if n := len(tn.Shape); n >= 3 {
						shapes[[2]int{tn.Shape[n-3], tn.Shape[n-2]}] = true
					}
				}
			}
			return nil
		})
		if len(got) != 64 {
			t.Fatalf("%s: %d distinct samples, want 64", k, len(got))
		}
		if k == KindHelix {
			t.Logf("helix decoded %d samples on another rank than their owner", moved)
			if moved == 0 {
				t.Error("helix moved no sample: the test shows nothing about the exchange")
			}
		}
		if spec.Temporal == transform.Rate && len(frames) < 2 {
			t.Errorf("%s: every clip has the same F %v under fps sampling, want several", k, frames)
		}
		if spec.Resize == transform.Native && len(shapes) < 2 {
			t.Errorf("%s: every picture has the same shape %v under native resizing, want several", k, shapes)
		}
		if want == nil {
			want = got
			twice := 0
			for _, sums := range byKey {
				if len(sums) > 1 {
					twice++
				}
			}
			if twice < 10 {
				t.Errorf("%d keys got other tensors in their second epoch, want most of them", twice)
			}
			continue
		}
		for id, sum := range want {
			if got[id] != sum {
				t.Errorf("%s: sample %x: tensors differ from torch's", k, id)
			}
		}
	}
}
