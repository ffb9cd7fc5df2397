package decode_test

import (
	"context"
	"fmt"
	"log"

	"github.com/datahelix/datahelix/decode"
	"github.com/datahelix/datahelix/internal/gen/gentest"
)

// Reading a dataset's samples and decoding them into tensors.
func ExampleDecoder() {
	data, err := gentest.TinyDir() // a small generated dataset
	if err != nil {
		log.Fatal(err)
	}
	ds, err := decode.OpenDataset(data, "")
	if err != nil {
		log.Fatal(err)
	}
	defer ds.Close()
	fmt.Println(ds.NumShards(), "shards,", ds.Len(), "samples")
	dec := decode.NewDecoder(decode.Options{Frames: 4, Size: 64})
	for i := range 3 {
		s, err := ds.ReadSample(0, i)
		if err != nil {
			log.Fatal(err)
		}
		out, err := dec.Decode(context.Background(), s)
		if err != nil {
			log.Fatal(err) // a *decode.SampleError: skip the sample, or count it by kind
		}
		for _, t := range out.Tensors {
			fmt.Println(out.Modality, t.Shape)
		}
	}
	// Output:
	// 8 shards, 32 samples
	// video [4 64 64 3]
	// video [4 64 64 3]
	// video [4 64 64 3]
}

// Random crops and flips, and a segment of frames, as --resize
// random-crop --hflip 0.5 --frame-sampling segment set them: a sample
// decodes alike for the same seed, epoch and key, whoever decodes it.
func ExampleSetTransform() {
	data, err := gentest.TinyDir()
	if err != nil {
		log.Fatal(err)
	}
	ds, err := decode.OpenDataset(data, "")
	if err != nil {
		log.Fatal(err)
	}
	defer ds.Close()
	opts := decode.Options{Frames: 4, Size: 64}
	if err := decode.SetTransform(&opts, decode.TransformFlags{Resize: "random-crop", HFlip: "0.5", Frames: "segment"}, 7); err != nil {
		log.Fatal(err)
	}
	dec := decode.NewDecoder(opts)
	s, err := ds.ReadSample(0, 0)
	if err != nil {
		log.Fatal(err)
	}
	out, err := dec.Decode(context.Background(), s)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(out.Modality, out.Tensors[0].Shape)
	err = decode.SetTransform(&opts, decode.TransformFlags{Resize: "random-crop", CropScale: "0.5,2"}, 7)
	fmt.Println(err)
	// Output:
	// video [4 64 64 3]
	// --crop-scale 0.5,2: want MIN,MAX with 0 < MIN <= MAX <= 1 (fractions of the picture's area)
}
