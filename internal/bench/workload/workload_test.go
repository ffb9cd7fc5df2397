package workload

import (
	"bytes"
	"errors"
	"flag"
	"github.com/datahelix/datahelix/internal/video"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/datahelix/datahelix/gpu"
	"github.com/datahelix/datahelix/internal/sim"
)

var rewriteWorkloads = flag.Bool("rewrite-workloads", false, "rewrite the provisioning reference figures of bench/workloads/*.json")

// The eleven workloads and issue 27's five.
var wantWorkloads = []string{"activitynet", "hd_video_image_1to7", "hetero_cluster", "howto100m", "imagenet", "interleaved", "kinetics", "laion", "noisy_neighbours", "panda70m", "small_batch", "text", "video_fps", "video_image_mix", "video_llm_mix", "webvid"}

func TestWorkloadsParse(t *testing.T) {
	ws, err := Workloads()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, w := range ws {
		names = append(names, w.Name)
	}
	if !slices.Equal(names, wantWorkloads) {
		t.Errorf("workloads = %v, want %v", names, wantWorkloads)
	}
	// The skew labels are measured: TestSkewLabels pins them.
	// One has a slow node, one mixes video and image shards.
	het, _ := SelectWorkloads("hetero_cluster")
	if sd := het[0].Slowdowns(8); !slices.Equal(sd, []float64{1, 1, 1, 1, 2, 2, 2, 2}) {
		t.Errorf("hetero_cluster slowdowns at 8 ranks = %v, want node 1 (ranks 4-7) 2x slower", sd)
	}
	mix, _ := SelectWorkloads("video_image_mix")
	if n := len(mix[0].Sources); n != 2 {
		t.Errorf("video_image_mix has %d sources, want 2", n)
	}
}

// TestWorkloadFilesCanonical keeps the files in the canonical layout the
// -rewrite-workloads flag writes, so a rewrite changes figures only.
func TestWorkloadFilesCanonical(t *testing.T) {
	ws, err := Workloads()
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range ws {
		got, err := os.ReadFile(filepath.Join(workloadDir, w.Name+".json"))
		if err != nil {
			t.Fatal(err)
		}
		want, err := w.MarshalIndented()
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("%s.json is not in canonical form (go test ./internal/bench/workload -run TestWorkloadProvisioning -rewrite-workloads rewrites it)", w.Name)
		}
	}
}

// jsonFields lists the JSON field names of a struct type, recursively.
func jsonFields(t reflect.Type, into map[string]bool) {
	for t.Kind() == reflect.Slice || t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return
	}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		into[name] = true
		jsonFields(f.Type, into)
	}
}

// TestWorkloadFieldsDocumented: every field of the workload files is
// explained in workloads/README.md.
func TestWorkloadFieldsDocumented(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(workloadDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	fields := map[string]bool{}
	jsonFields(reflect.TypeOf(Workload{}), fields)
	for k := range sourceStats {
		fields[k] = true
	}
	var names []string
	for f := range fields {
		names = append(names, f)
	}
	sort.Strings(names)
	for _, f := range names {
		if !strings.Contains(string(readme), "`"+f+"`") {
			t.Errorf("field %q is not documented in workloads/README.md", f)
		}
	}
	if len(names) < 25 {
		t.Errorf("found only %d fields: %v", len(names), names)
	}
}

// TestWorkloadProvisioning recomputes the provisioning rule of every file
// (8 ranks, default calibration, seed 1) and compares it with the figures
// the file states; -rewrite-workloads writes them instead.
func TestWorkloadProvisioning(t *testing.T) {
	ws, err := Workloads()
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range ws {
		s, err := NewSynth(w, DefaultCalibration(), ReferenceRanks, 0, 1)
		if err != nil {
			t.Fatal(err)
		}
		cost, _, _ := s.Means()
		g := w.GPUStep(cost, w.Batch, ReferenceRanks)
		gms := float64(g) / float64(time.Millisecond)
		// The rule by hand: 1.2 x B x c / (W x mean 1/slowdown).
		inv := 0.0
		for _, sd := range w.Slowdowns(ReferenceRanks) {
			inv += 1 / sd
		}
		inv /= ReferenceRanks
		if n := w.Cluster.Noisy; n != nil {
			inv *= 1 - n.Share + n.Share/n.Slowdown
		}
		hand := w.Provision.Ratio * float64(w.Batch) * cost / (float64(w.Workers) * inv) / 1000
		if m := w.GPU.Model; m != nil {
			// 6 N FLOPs per token, B x tokens per sample tokens, at MFU x peak.
			hand = 6 * m.Params * float64(w.Batch) * m.TokensPerSample / (m.PeakTFLOPS * 1e12 * m.MFU) * 1000
			_, _, tokens := s.Means()
			if rel(m.TokensPerSample, tokens) > 0.05 {
				t.Errorf("%s: gpu.model.tokens_per_sample %v, the preset draws %.1f", w.Name, m.TokensPerSample, tokens)
			}
		}
		if math.Abs(hand-gms) > 1e-6*hand+1e-6 {
			t.Errorf("%s: GPUStep = %v ms, the rule by hand gives %v ms", w.Name, gms, hand)
		}
		if *rewriteWorkloads {
			w.Provision.ReferenceMeanCostUS = math.Round(cost*10) / 10
			w.Provision.ReferenceGPUStepMS = math.Round(gms*1000) / 1000
			data, err := w.MarshalIndented()
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(workloadDir, w.Name+".json"), data, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		p := w.Provision
		// The files round to 0.1 µs and 1 µs; allow that rounding on top of 0.1 %.
		if math.Abs(p.ReferenceMeanCostUS-cost) > 0.05+0.001*cost || math.Abs(p.ReferenceGPUStepMS-gms) > 0.0005+0.001*gms {
			t.Errorf("%s: file states mean cost %v µs, GPU step %v ms; the rule gives %.1f µs, %.3f ms (if the decode package's default calibration changed, rerun with -rewrite-workloads)",
				w.Name, p.ReferenceMeanCostUS, p.ReferenceGPUStepMS, cost, gms)
		}
	}
}

func rel(a, b float64) float64 { return math.Abs(a-b) / math.Max(math.Abs(b), 1e-12) }

// TestWorkloadStats checks every stated statistic of a source against
// 2000 draws of its preset, within 15 %.
func TestWorkloadStats(t *testing.T) {
	ws, err := Workloads()
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, w := range ws {
		for _, src := range w.Sources {
			if len(src.Stats) == 0 {
				continue
			}
			got := drawnStats(t, src, 2000)
			for k, want := range src.Stats {
				checked++
				if rel(got[k], want) > 0.15 {
					t.Errorf("%s/%s: %s = %.2f drawn, file states %.2f", w.Name, src.Preset, k, got[k], want)
				} else {
					t.Logf("%s/%s: %s = %.2f drawn, file states %.2f", w.Name, src.Preset, k, got[k], want)
				}
			}
		}
	}
	if checked < 12 {
		t.Errorf("checked %d statistics, want every source to state some", checked)
	}
}

// drawnStats computes the statistics of n draws of a source's preset.
func drawnStats(t *testing.T, src Source, n int) map[string]float64 {
	t.Helper()
	var dur, height, images, words float64
	var videos, pics int
	var longs []float64
	for i := range n {
		s, err := drawSpec(src.Preset, 1, src.DurationScale, i)
		if err != nil {
			t.Fatal(err)
		}
		if s.Video != nil {
			videos++
			dur += s.Video.Seconds
			height += float64(s.Video.Height)
		}
		for _, im := range s.Images {
			longs = append(longs, float64(max(im.Width, im.Height)))
		}
		if len(s.Images) > 0 {
			pics++
			images += float64(len(s.Images))
		}
		for _, w := range s.Words {
			words += float64(w)
		}
	}
	out := map[string]float64{"mean_words": words / float64(n)}
	if videos > 0 {
		out["mean_duration_s"] = dur / float64(videos)
		out["mean_height_px"] = height / float64(videos)
	}
	if pics > 0 {
		out["mean_images"] = images / float64(pics)
		sort.Float64s(longs)
		out["median_long_side_px"] = longs[len(longs)/2]
	}
	return out
}

func TestParseWorkloadErrors(t *testing.T) {
	base, err := os.ReadFile(filepath.Join(workloadDir, "kinetics.json"))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, old, new, want string
	}{
		{"unknown field", `"batch": 16`, `"batch": 16, "bogus": 1`, "unknown field"},
		{"skew", `"skew": "uniform"`, `"skew": "lopsided"`, "skew"},
		{"batch", `"batch": 16`, `"batch": 0`, "batch 0"},
		{"workers", `"workers": 8`, `"workers": -1`, "workers"},
		{"ratio", `"ratio": 1.2`, `"ratio": 12`, "provisioning.ratio"},
		{"shard bytes", `"shard_bytes": 1000000000`, `"shard_bytes": 10`, "shard_bytes"},
		{"gpu shares", `"base_share": 0.2`, `"base_share": 0.3`, "add up"},
		{"preset", `"preset": "kinetics"`, `"preset": "youtube"`, "unknown preset"},
		{"missing cite", `"batch": "16 clips`, `"batch_x": "16 clips`, "cite.batch"},
		{"unknown cite", `"batch": "16 clips`, `"batch_x": "x", "batch": "16 clips`, "cite.batch_x"},
		{"stat", `"mean_duration_s": 10`, `"mean_fps": 10`, "mean_fps"},
		{"slowdown", `"cpu_slowdown": 1`, `"cpu_slowdown": 0.5`, "cpu_slowdown"},
		{"clips per video", `"clips_per_video": 1`, `"clips_per_video": 0`, "clips_per_video"},
		{"frames", `"frames_per_clip": 8`, `"frames_per_clip": 1025`, "frames_per_clip 1025: want 1..1024"},
		{"no frames", `"frames_per_clip": 8`, `"frames_per_clip": 0`, "frames_per_clip 0: want 1..1024"},
		{"size", `"output_size": 224`, `"output_size": 4097`, "output_size 4097: want 8..4096"},
		{"tiny size", `"output_size": 224`, `"output_size": 7`, "output_size 7: want 8..4096"},
		// Each bound alone holds; the decoded clip would not fit a worker.
		{"clip bytes", "\"frames_per_clip\": 8,\n  \"output_size\": 224", "\"frames_per_clip\": 64,\n  \"output_size\": 4096",
			"frames_per_clip 64 output_size 4096: one decoded clip would be 3221225472 bytes (F x S x S x 3), want at most 1073741824 (1 GiB)"},
		// Names that failed after the whole run (too long for a file
		// name) or that --workloads reads otherwise.
		{"long name", `"name": "kinetics"`, `"name": "` + strings.Repeat("k", 300) + `"`, `name "kkkkkkkkkkkkkkkkkkkk"... of 300 bytes: want at most 64`},
		{"name all", `"name": "kinetics"`, `"name": "all"`, `name "all": --workloads reads all`},
		{"name .json", `"name": "kinetics"`, `"name": "kin.json"`, `name "kin.json": --workloads reads all and names ending in .json otherwise`},
		{"trailing data", "", "{}", "after the object"},
		{"stray brace", "", "}", "after the object"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			data := string(base) + c.new
			if c.old != "" {
				data = strings.Replace(string(base), c.old, c.new, 1)
			}
			if data == string(base) {
				t.Fatalf("%q not found in kinetics.json", c.old)
			}
			_, err := ParseWorkload("k.json", []byte(data))
			if err == nil {
				t.Fatalf("ParseWorkload accepted %s", c.name)
			}
			if !errors.Is(err, ErrWorkload) && !strings.Contains(err.Error(), "preset") {
				t.Errorf("error %v does not wrap ErrWorkload", err)
			}
			if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "k.json") {
				t.Errorf("error %q, want it to name k.json and contain %q", err, c.want)
			}
		})
	}
}

func TestSelectWorkloads(t *testing.T) {
	ws, err := SelectWorkloads("text, kinetics")
	if err != nil {
		t.Fatal(err)
	}
	if len(ws) != 2 || ws[0].Name != "text" || ws[1].Name != "kinetics" {
		t.Errorf("got %d workloads, want text then kinetics", len(ws))
	}
	if _, err := SelectWorkloads("kinetics,nope"); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("unknown workload: err = %v, want it named", err)
	}
	// Empty items are refused, as in --sections and --loaders.
	for _, spec := range []string{"kinetics,,text", "kinetics,", ",kinetics", " "} {
		if _, err := SelectWorkloads(spec); err == nil || !errors.Is(err, ErrWorkload) {
			t.Errorf("%q: got %v, want ErrWorkload", spec, err)
		}
	}
	p := filepath.Join(t.TempDir(), "mine.json")
	data, _ := os.ReadFile(filepath.Join(workloadDir, "text.json"))
	os.WriteFile(p, data, 0o644)
	if ws, err := SelectWorkloads(p); err != nil || ws[0].Name != "text" {
		t.Errorf("workload from a file: %v", err)
	}
}

// TestSelectWorkloadsRefusesSameName checks that two workloads with one
// name are refused, naming both sources: the report tells workloads apart
// by name, so an edited copy of a built-in that kept "name" would have
// its comparison row, summary share and figures taken from the other.
func TestSelectWorkloadsRefusesSameName(t *testing.T) {
	dir := t.TempDir()
	data, err := os.ReadFile(filepath.Join(workloadDir, "kinetics.json"))
	if err != nil {
		t.Fatal(err)
	}
	cp, cp2, renamed := filepath.Join(dir, "kin_variant.json"), filepath.Join(dir, "other.json"), filepath.Join(dir, "kin2.json")
	for _, p := range []string{cp, cp2} {
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(renamed, bytes.Replace(data, []byte(`"name": "kinetics"`), []byte(`"name": "kin2"`), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		spec string
		want string // "" when accepted
	}{
		{"kinetics,kinetics", "built-in kinetics is listed twice"},
		{"kinetics, text, kinetics", "built-in kinetics is listed twice"},
		{"kinetics," + cp, "two workloads named kinetics (built-in kinetics and " + cp + `): give the copy its own "name"`},
		{cp + ",kinetics", "two workloads named kinetics (" + cp + ` and built-in kinetics): give the copy its own "name"`},
		{cp + "," + cp, cp + " is listed twice"},
		{cp + "," + cp2, "two workloads named kinetics (" + cp + " and " + cp2 + `): give each file its own "name"`},
		{"kinetics," + renamed, ""},
	} {
		ws, err := SelectWorkloads(tt.spec)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: %v, want accepted", tt.spec, err)
		case tt.want == "" && len(ws) != 2:
			t.Errorf("%s: got %d workloads, want 2", tt.spec, len(ws))
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want) || !errors.Is(err, ErrWorkload)):
			t.Errorf("%s: got error %v, want ErrWorkload saying %q", tt.spec, err, tt.want)
		}
	}
}

func TestGPUModelSplitsStep(t *testing.T) {
	w := &Workload{Batch: 16, GPU: GPUShape{BaseShare: 0.2, FrameShare: 0.4, TokenShare: 0.4}}
	g := 100 * time.Millisecond
	m := w.GPUModel(g, 16, 3, 500)
	// At the mean batch (16 samples, 48 frames, 8000 tokens) the model
	// gives g back.
	got := m.Base + 48*m.PerFrame + 8000*m.PerToken
	if d := got - g; d < -time.Microsecond || d > time.Microsecond {
		t.Errorf("step at the mean batch = %v, want %v (model %+v)", got, g, m)
	}
	// A share whose quantity is absent goes to the base.
	m = w.GPUModel(g, 16, 3, 0)
	if m.PerToken != 0 || m.Base != 60*time.Millisecond {
		t.Errorf("no tokens: model %+v, want base 60ms and no per-token time", m)
	}
}

func FuzzParseWorkload(f *testing.F) {
	for _, n := range []string{"kinetics", "video_image_mix", "hetero_cluster"} {
		data, err := os.ReadFile(filepath.Join(workloadDir, n+".json"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		w, err := ParseWorkload("fuzz.json", data)
		if err != nil {
			return
		}
		// An accepted spec must be usable: slowdowns and the rule.
		sd := w.Slowdowns(8)
		if len(sd) != 8 {
			t.Fatalf("slowdowns %v", sd)
		}
		if g := w.GPUStep(1000, w.Batch, 8); g <= 0 {
			t.Fatalf("GPU step %v for a valid spec", g)
		}
	})
}

// TestLockstepFactor checks the factor on a hand-made job: two ranks, one
// training 2 clips of 8 frames a step, the other 2 images (1 frame each),
// and a GPU whose step is 1 ms plus 1 ms per frame. The mean batch holds
// 2 x 4.5 frames (10 ms); the slowest rank's step is always 17 ms.
func TestLockstepFactor(t *testing.T) {
	m := gpu.Model{Base: time.Millisecond, PerFrame: time.Millisecond}
	samples := func(step int64, rank int) []sim.Sample {
		f := 8
		if rank == 1 {
			f = 1
		}
		return []sim.Sample{{Frames: f}, {Frames: f}}
	}
	if got, want := LockstepFactor(m, samples, 2, 10, 2, 4.5, 0), 17.0/10; math.Abs(got-want) > 1e-12 {
		t.Errorf("LockstepFactor = %v, want %v", got, want)
	}
	// Equal batches on every rank: no correction.
	even := func(step int64, rank int) []sim.Sample { return []sim.Sample{{Frames: 8}, {Frames: 8}} }
	if got := LockstepFactor(m, even, 2, 10, 2, 8, 0); got != 1 {
		t.Errorf("LockstepFactor on equal batches = %v, want 1", got)
	}
	// The rule's model takes g on the mean batch and reports the factor
	// without applying it.
	w := &Workload{GPU: GPUShape{BaseShare: 0.2, FrameShare: 0.8}}
	g := 100 * time.Millisecond
	pm, f := w.ProvisionedModel(g, samples, 2, 10, 2, 4.5, 0)
	mean := pm.StepTime(gpu.Contents{Samples: 2, Frames: 9})
	if math.Abs(float64(mean-g)) > float64(time.Microsecond) || f <= 1 {
		t.Errorf("provisioned model %+v: mean-batch step %v, want g = %v (factor %v)", pm, mean, g, f)
	}
}

// workloadDir is where the workload files live, in the top-level bench
// package that embeds them.
var workloadDir = filepath.Join("..", "..", "..", "bench", "workloads")

// TestWithRatio checks that the provisioning ratio scales the GPU step
// (g grows with the ratio) without touching the original workload, and
// leaves a model's fixed step alone.
func TestWithRatio(t *testing.T) {
	ws, err := SelectWorkloads("kinetics,text")
	if err != nil {
		t.Fatal(err)
	}
	k, text := ws[0], ws[1]
	g := k.GPUStep(1000, 16, 8)
	if g2 := k.WithRatio(2.4).GPUStep(1000, 16, 8); g2 != 2*g {
		t.Errorf("ratio 2.4: step %v, want twice the 1.2 step %v", g2, g)
	}
	if k.Provision.Ratio != ProvisionRatio {
		t.Errorf("WithRatio changed the original: ratio %v", k.Provision.Ratio)
	}
	if a, b := text.GPUStep(16, 32, 8), text.WithRatio(2).GPUStep(16, 32, 8); a != b {
		t.Errorf("text (a model's step): %v at 1.2, %v at 2; want the model's step either way", a, b)
	}
}

// TestFPSFrames checks fps sampling: a clip's frames follow its duration,
// between 1 and F.
func TestFPSFrames(t *testing.T) {
	w := &Workload{Frames: 32, FPS: 2}
	for _, tt := range []struct {
		dur  int64 // s
		want int
	}{{0, 1}, {1, 2}, {5, 10}, {16, 32}, {60, 32}} {
		v := &video.Track{Timescale: 1000, Duration: tt.dur * 1000}
		if got := w.ClipFrames(v); got != tt.want {
			t.Errorf("%d s at 2 fps: %d frames, want %d", tt.dur, got, tt.want)
		}
	}
	w.FPS = 0
	if got := w.ClipFrames(&video.Track{Timescale: 1000, Duration: 5000}); got != 32 {
		t.Errorf("no fps: %d frames, want F = 32", got)
	}
}
