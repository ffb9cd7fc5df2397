package loader

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/datahelix/datahelix/collective"
	"github.com/datahelix/datahelix/decode"
	"github.com/datahelix/datahelix/internal/gen/gentest"
)

// countingSource is a decode.Source that is not a *decode.Dataset: the
// loader must read through the interface alone.
type countingSource struct {
	ds    *decode.Dataset
	reads atomic.Int64
}

func (c *countingSource) NumShards() int         { return c.ds.NumShards() }
func (c *countingSource) ShardName(i int) string { return c.ds.ShardName(i) }
func (c *countingSource) ShardLen(i int) int     { return c.ds.ShardLen(i) }
func (c *countingSource) ReadSample(shard, index int) (*decode.Sample, error) {
	c.reads.Add(1)
	return c.ds.ReadSample(shard, index)
}

// stepKeys runs n in-process ranks of cfg over the tiny dataset (through
// a countingSource when wrap) and returns each step's global batch,
// sorted, and each rank's State after its last step.
func stepKeys(t *testing.T, n int, cfg Config, wrap bool) ([][]string, [][]byte) {
	t.Helper()
	keys := make([][][]string, n)
	states := make([][]byte, n)
	counting := make([]*countingSource, n)
	var wrapper func(int, *decode.Dataset) decode.Source
	if wrap {
		wrapper = func(rank int, ds *decode.Dataset) decode.Source {
			counting[rank] = &countingSource{ds: ds}
			return counting[rank]
		}
	}
	runLoadersOn(t, n, gentest.Tiny(t), wrapper, cfg, func(rank int, b *Batch) error {
		var ks []string
		for _, s := range b.Samples {
			ks = append(ks, s.Key)
		}
		for _, d := range b.Dropped {
			ks = append(ks, d.Key)
		}
		keys[rank] = append(keys[rank], ks)
		return nil
	}, func(rank int, l *Loader) { states[rank] = l.State() })
	for r, cs := range counting {
		if cs != nil && cs.reads.Load() == 0 {
			t.Errorf("rank %d: no sample read through the Source", r)
		}
	}
	var global [][]string
	for s := range keys[0] {
		var g []string
		for r := range n {
			g = append(g, keys[r][s]...)
		}
		slices.Sort(g)
		global = append(global, g)
	}
	return global, states
}

// TestLoaderStateResumesTheSameBatches: the State a loader gives after
// some steps, as Config.Restore of a new run, continues with the global
// batches of the uninterrupted run; any decode.Source serves, and a
// state of another seed is refused with ErrState naming it.
func TestLoaderStateResumesTheSameBatches(t *testing.T) {
	cfg := Config{Loader: KindHelix, Batch: 2, Steps: 7, Workers: 1, Seed: 5, Decode: decode.Options{Frames: 2, Size: 32}, StepHint: time.Millisecond}
	whole, _ := stepKeys(t, 2, cfg, true)
	first := cfg
	first.Steps = 3
	_, states := stepKeys(t, 2, first, false)
	if string(states[0]) != string(states[1]) {
		t.Fatalf("the ranks' states differ: %s vs %s", states[0], states[1])
	}
	resumed := cfg
	resumed.Restore = states[0] // every rank's, as they are equal
	rest, _ := stepKeys(t, 2, resumed, false)
	if len(rest) != 4 {
		t.Fatalf("the resumed run delivered %d steps, want 4", len(rest))
	}
	for i, g := range rest {
		if !slices.Equal(g, whole[3+i]) {
			t.Errorf("step %d: resumed %v, whole run %v", 3+i, g, whole[3+i])
		}
	}
	other := cfg
	other.Seed = 6
	data := gentest.Tiny(t)
	ds, err := decode.OpenDataset(data, "")
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	other.Restore = states[0]
	if _, err := NewLoader(context.Background(), collective.NewLocal(1)[0], ds, other); !errors.Is(err, ErrState) {
		t.Errorf("a state of seed 5 in a run of seed 6: %v, want ErrState", err)
	}
}
