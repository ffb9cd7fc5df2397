package spmd_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"time"

	"github.com/datahelix/datahelix/collective"
	"github.com/datahelix/datahelix/decode"
	"github.com/datahelix/datahelix/gpu"
	"github.com/datahelix/datahelix/internal/gen/gentest"
	"github.com/datahelix/datahelix/spmd"
)

// A training loop on one rank. Under mpirun, comm is the MPI world
// (collective.Init) and every rank runs this same loop; the loader
// measures the GPU's progress from the time between Next calls.
func ExampleLoader() {
	data, err := gentest.TinyDir() // a small generated dataset
	if err != nil {
		log.Fatal(err)
	}
	comm := collective.NewLocal(1)[0]
	ds, err := decode.OpenDataset(data, "")
	if err != nil {
		log.Fatal(err)
	}
	defer ds.Close()
	ctx := context.Background()
	loader, err := spmd.NewLoader(ctx, comm, ds, spmd.Config{
		Loader: spmd.KindHelix, Batch: 4, Steps: 3, Workers: 2, Seed: 1,
		Decode: decode.Options{Frames: 4, Size: 64},
		GPU:    gpu.Model{Base: 10 * time.Millisecond},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer loader.Close()
	for {
		batch, err := loader.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			log.Fatal(err) // under MPI, return it so the job aborts
		}
		// Forward and backward passes go here; each sample carries
		// contiguous uint8 tensors ([F,S,S,3] per clip, [S,S,3] per image).
		tensors := 0
		for _, s := range batch.Samples {
			tensors += len(s.Tensors)
		}
		fmt.Printf("step %d: %d samples, %d tensors, %d dropped\n", batch.Step, len(batch.Samples), tensors, len(batch.Dropped))
	}
	// Output:
	// step 0: 4 samples, 3 tensors, 0 dropped
	// step 1: 4 samples, 4 tensors, 0 dropped
	// step 2: 4 samples, 2 tensors, 0 dropped
}
