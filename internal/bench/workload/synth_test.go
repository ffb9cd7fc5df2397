package workload

import (
	"context"
	"math"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/datahelix/datahelix/decode"
	"github.com/datahelix/datahelix/internal/costmodel"
	"github.com/datahelix/datahelix/internal/decoding"
	"github.com/datahelix/datahelix/internal/gen"
	"github.com/datahelix/datahelix/internal/reader"
)

func synthFor(t *testing.T, name string, ranks int, seed uint64) *Synth {
	t.Helper()
	ws, err := SelectWorkloads(name)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSynth(ws[0], DefaultCalibration(), ranks, 0, seed)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSynthDeterministic(t *testing.T) {
	a, b := synthFor(t, "howto100m", 8, 5), synthFor(t, "howto100m", 8, 5)
	c := synthFor(t, "howto100m", 8, 6)
	// Draw b in another order: the result must not depend on it.
	for step := int64(9); step >= 0; step-- {
		for r := 7; r >= 0; r-- {
			b.Samples(step, r)
		}
	}
	differ := false
	for step := range int64(10) {
		for r := range 8 {
			x, y := a.Samples(step, r), b.Samples(step, r)
			if !reflect.DeepEqual(x, y) {
				t.Fatalf("step %d rank %d: samples differ between two synths of one seed", step, r)
			}
			differ = differ || !reflect.DeepEqual(x, c.Samples(step, r))
		}
	}
	if !differ {
		t.Error("seeds 5 and 6 drew the same samples")
	}
}

func TestSynthSamplesWellFormed(t *testing.T) {
	s := synthFor(t, "panda70m", 8, 1)
	seen := map[uint64]bool{}
	split := 0
	for step := range int64(40) {
		for r := range 8 {
			xs := s.Samples(step, r)
			if len(xs) != s.Batch() {
				t.Fatalf("got %d samples, want %d", len(xs), s.Batch())
			}
			for _, x := range xs {
				if seen[x.ID] {
					t.Fatalf("sample id %d drawn twice", x.ID)
				}
				seen[x.ID] = true
				if x.Cost < 1 || x.Est < 1 || x.Bytes < 1 || x.Frames != 8 || x.Mem != 8*224*224*3 {
					t.Fatalf("bad sample %+v", x)
				}
				if len(x.Parts) > 1 {
					split++
					if len(x.PartsEst) != len(x.Parts) {
						t.Fatalf("%d parts, %d estimates", len(x.Parts), len(x.PartsEst))
					}
					var sum int64
					for _, p := range x.Parts {
						sum += p
					}
					if sum < x.Cost || sum > x.Cost*3/2 {
						t.Errorf("parts sum to %d for a clip of cost %d: want the split cost, a little above", sum, x.Cost)
					}
				}
			}
		}
	}
	if split == 0 {
		t.Error("no Panda-70M clip was split into keyframe-aligned tasks")
	}
}

func TestSourceOrder(t *testing.T) {
	cases := [][]float64{{1, 1}, {3, 1}, {0.2, 0.3, 0.5}, {1}}
	for _, weights := range cases {
		srcs := make([]Source, len(weights))
		total := 0.0
		for i, w := range weights {
			srcs[i].Weight = w
			total += w
		}
		order := SourceOrder(srcs, 200)
		counts := make([]float64, len(weights))
		for k, s := range order {
			counts[s]++
			for i, w := range weights {
				if want := float64(k+1) * w / total; math.Abs(counts[i]-want) > 1 {
					t.Fatalf("weights %v: after %d shards source %d has %v, want %.2f within 1", weights, k+1, i, counts[i], want)
				}
			}
		}
	}
	if got := SourceOrder([]Source{{Weight: 1}, {Weight: 1}}, 4); !reflect.DeepEqual(got, []int{0, 1, 0, 1}) {
		t.Errorf("equal weights: order %v, want alternating", got)
	}
}

// TestWebDatasetLayout: every loader but torch-ddp reads the runtime
// reader's order with a stream per worker of each rank: rank r's batch
// is positions [r·B, (r+1)·B) of reader.Order's global batch. The
// sources a rank reads follow the shards its streams drew, not its rank:
// on video_image_mix (two equal sources), the ranks are not split into
// even ones reading video and odd ones reading images.
func TestWebDatasetLayout(t *testing.T) {
	s := synthFor(t, "video_image_mix", 8, 1)
	sizes := make([]int, s.datasetShards())
	for i := range sizes {
		sizes[i] = int(s.shardSize(int64(i)))
	}
	o, err := reader.NewOrder(sizes, 8*s.Batch(), 8*s.w.Workers, s.turns(), 1, reader.DefaultShuffleBuffer)
	if err != nil {
		t.Fatal(err)
	}
	var refs []reader.SampleRef
	var epochs []int
	parity := true
	for step := range int64(30) {
		refs, epochs = o.NextBatch(refs[:0], epochs[:0])
		for r := range 8 {
			video := 0
			for i, x := range s.Samples(step, r) {
				k := r*s.Batch() + i
				if want := refs[k].ID(epochs[k]); x.ID != want {
					t.Fatalf("step %d rank %d slot %d: sample %x, want the reader's %x", step, r, i, x.ID, want)
				}
				if x.Frames == 8 {
					video++
				}
			}
			if (video == s.Batch()) != (r%2 == 0) || (video == 0) != (r%2 == 1) {
				parity = false
			}
		}
	}
	if parity {
		t.Error("even ranks read only video and odd ranks only images: the parity artifact")
	}
}

// TestDDPLayout: torch-ddp's ranks each take every N-th sample of one
// global shuffle, so every rank reads both of video_image_mix's sources
// within a few steps; no sample is drawn twice in an epoch, and the
// layout is deterministic.
func TestDDPLayout(t *testing.T) {
	s, again := synthFor(t, "video_image_mix", 8, 1), synthFor(t, "video_image_mix", 8, 1)
	seen := map[uint64]bool{}
	for r := range 8 {
		video, images := 0, 0
		for step := range int64(4) {
			xs := s.SamplesDDP(step, r)
			if !reflect.DeepEqual(xs, again.SamplesDDP(step, r)) {
				t.Fatalf("step %d rank %d: two synths of one seed differ", step, r)
			}
			for _, x := range xs {
				if seen[x.ID] {
					t.Fatalf("sample %x drawn twice", x.ID)
				}
				seen[x.ID] = true
				if x.Frames == 8 {
					video++
				} else {
					images++
				}
			}
		}
		if video == 0 || images == 0 {
			t.Errorf("rank %d read %d video and %d image samples in 4 steps: want both sources", r, video, images)
		}
	}
}

// TestPermute: permute is a bijection of [0, n) for sizes that are and
// are not powers of two, and another key gives another one.
func TestPermute(t *testing.T) {
	for _, n := range []uint64{1, 2, 3, 7, 64, 1000, 4097} {
		seen := make([]bool, n)
		same := true
		for i := range n {
			k := permute(i, n, 42)
			if k >= n || seen[k] {
				t.Fatalf("n=%d: permute(%d) = %d, out of range or taken twice", n, i, k)
			}
			seen[k] = true
			same = same && k == permute(i, n, 43)
		}
		if n > 3 && same {
			t.Errorf("n=%d: keys 42 and 43 give the same permutation", n)
		}
	}
}

// meanRun is the mean length of runs of one class in shard id.
func meanRun(s *Synth, id int64) float64 {
	s.mu.Lock()
	d := s.shard(id, 1<<40)
	s.mu.Unlock()
	p := s.pools[d.source]
	runs := 1
	for o := 1; o < len(d.entries); o++ {
		if p.entries[d.entries[o]].class != p.entries[d.entries[o-1]].class {
			runs++
		}
	}
	return float64(len(d.entries)) / float64(runs)
}

func TestClipRuns(t *testing.T) {
	// HowTo100M: 111 clips per video share a class; a class may follow
	// itself, so observed runs are at least that long.
	if m := meanRun(synthFor(t, "howto100m", 8, 1), 3); m < 80 {
		t.Errorf("howto100m: mean run of one class %.1f clips, want about 111 or more", m)
	}
	// Kinetics: every clip is its own video.
	if m := meanRun(synthFor(t, "kinetics", 8, 1), 3); m > 3 {
		t.Errorf("kinetics: mean run %.1f clips, want independent clips", m)
	}
}

func TestNoisyHasCalibratedMAPE(t *testing.T) {
	for _, mape := range []float64{0.05, 0.16, 0.4} {
		sigma := (&costmodel.Calibration{MAPE: map[string]float64{"all": mape}}).Sigma("")
		var sum float64
		const n = 40000
		for i := range n {
			est := noisy(1_000_000, sigma, hash3(1, 2, uint64(i)))
			sum += math.Abs(float64(est)/1e6 - 1)
		}
		if got := sum / n; math.Abs(got-mape) > 0.02*mape+0.002 {
			t.Errorf("MAPE %.2f: sigma %.4f gives %.4f", mape, sigma, got)
		}
	}
	if noisy(1234, 0, 99) != 1234 {
		t.Error("zero sigma changed the cost")
	}
}

func TestSplitCost(t *testing.T) {
	got := splitCost(1000, []int32{10, 30, 60})
	if want := []int64{100, 300, 600}; !reflect.DeepEqual(got, want) {
		t.Errorf("splitCost = %v, want %v", got, want)
	}
	if got := splitCost(1, []int32{1, 1}); !reflect.DeepEqual(got, []int64{1, 1}) {
		t.Errorf("splitCost of 1 µs = %v, want at least 1 each", got)
	}
}

// TestSyntheticRecordMatchesReal generates a few real samples and checks
// that the records the simulator synthesizes from the same generator
// specifications match what the parser reads, and cost about the same.
func TestSyntheticRecordMatchesReal(t *testing.T) {
	if testing.Short() {
		t.Skip("generates media with ffmpeg")
	}
	if _, err := exec.LookPath("ffmpeg"); err != nil {
		t.Skip("no ffmpeg")
	}
	m := costmodel.New(nil)
	for _, c := range []struct {
		preset string
		n      int
		scale  float64
	}{{"howto100m", 4, 0.5}, {"kinetics", 2, 0.3}, {"imagenet", 4, 0}, {"interleaved", 2, 0}} {
		cfg := gen.Config{Preset: c.preset, Samples: c.n, Shards: 1, Seed: 3, DurationScale: c.scale, Out: filepath.Join(t.TempDir(), c.preset)}
		if _, err := gen.Generate(context.Background(), cfg); err != nil {
			t.Fatal(err)
		}
		ds, err := decode.OpenDataset(cfg.Out, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		for i := range c.n {
			smp, err := ds.ReadSample(0, i)
			if err != nil {
				t.Fatal(err)
			}
			real, err := decoding.ParseRecord(smp, decoding.Limits{})
			if err != nil {
				t.Fatal(err)
			}
			spec, err := specOf(cfg, real)
			if err != nil {
				t.Fatal(err)
			}
			syn, err := syntheticRecord(spec, defaultBitsPerPixel)
			if err != nil {
				t.Fatal(err)
			}
			if real.Modality != syn.Modality || len(real.Images) != len(syn.Images) {
				t.Fatalf("%s %d: modality %v with %d images, synthesized %v with %d", c.preset, i, real.Modality, len(real.Images), syn.Modality, len(syn.Images))
			}
			if v, w := real.Video, syn.Video; v != nil {
				if v.Codec != w.Codec || v.Width != w.Width || v.Height != w.Height || abs(v.Frames-w.Frames) > 1 || !reflect.DeepEqual(v.Keyframes, w.Keyframes) {
					t.Errorf("%s %d: real %s %dx%d %d frames keyframes %v; synthesized %s %dx%d %d frames keyframes %v", c.preset, i,
						v.Codec, v.Width, v.Height, v.Frames, v.Keyframes, w.Codec, w.Width, w.Height, w.Frames, w.Keyframes)
				}
			}
			for j := range real.Images {
				a, b := real.Images[j], syn.Images[j]
				if a.Format != b.Format || a.Width != b.Width || a.Height != b.Height {
					t.Errorf("%s %d image %d: real %s %dx%d, synthesized %s %dx%d", c.preset, i, j, a.Format, a.Width, a.Height, b.Format, b.Width, b.Height)
				}
			}
			ea, eb := float64(m.Estimate(real)), float64(m.Estimate(syn))
			if rel(eb, ea) > 0.3 {
				t.Errorf("%s %d: estimate %v µs from the real record, %v µs synthesized", c.preset, i, ea, eb)
			}
		}
		ds.Close()
	}
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// TestNoiseOnTruth: with the error on the true costs, the planner sees
// the model's prediction, the true costs vary around it with mean 1, and
// the default puts the error on the estimate instead.
func TestNoiseOnTruth(t *testing.T) {
	a, b := synthFor(t, "kinetics", 8, 1), synthFor(t, "kinetics", 8, 1)
	b.NoiseOnTruth = true
	var ratio, n float64
	for step := range int64(100) {
		for r := range 8 {
			xa, xb := a.Samples(step, r), b.Samples(step, r)
			for i := range xa {
				if xb[i].Est != xa[i].Cost {
					t.Fatalf("noise on truth: estimate %d, want the prediction %d", xb[i].Est, xa[i].Cost)
				}
				if xa[i].Est == xa[i].Cost && xb[i].Cost == xb[i].Est {
					t.Fatalf("sample %d carries no error either way", xa[i].ID)
				}
				ratio += float64(xb[i].Cost) / float64(xb[i].Est)
				n++
			}
		}
	}
	if m := ratio / n; math.Abs(m-1) > 0.02 {
		t.Errorf("mean true/predicted = %.4f, want 1 (the provisioning rule's mean cost holds)", m)
	}
}

// TestShardsInBytes checks that shards hold what fits in shard_bytes: a
// 1 GB shard holds hundreds of HD clips and hundreds of thousands of
// texts, and a rank reads its shards r, r+N, ... in order, each to its end.
func TestShardsInBytes(t *testing.T) {
	if got := ShardSamples(1e9, 2e6); got != 500 {
		t.Errorf("ShardSamples(1 GB, 2 MB) = %d, want 500", got)
	}
	if got := ShardSamples(1e3, 1e6); got != 1 {
		t.Errorf("ShardSamples of a sample larger than the shard = %d, want 1", got)
	}
	hd := synthFor(t, "panda70m", 8, 1)
	if n := hd.ShardLens()[0]; n < 200 || n > 1000 {
		t.Errorf("panda70m: %d clips a 1 GB shard, want hundreds", n)
	}
	if n := synthFor(t, "text", 8, 1).ShardLens()[0]; n < 100000 {
		t.Errorf("text: %d documents a 1 GB shard, want hundreds of thousands", n)
	}
	// The order reads every shard at its byte-given length: each sample
	// lies inside its shard, once an epoch.
	seen := map[uint64]bool{}
	for step := range int64(200) {
		for r := range 8 {
			for _, x := range hd.Samples(step, r) {
				shard, o := refOf(x.ID)
				if o >= hd.shardSize(shard) || seen[x.ID] {
					t.Fatalf("step %d rank %d: sample %d of shard %d (of %d samples), seen before %v", step, r, o, shard, hd.shardSize(shard), seen[x.ID])
				}
				seen[x.ID] = true
			}
		}
	}
}
