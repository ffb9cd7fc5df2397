package workload

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/datahelix/datahelix/decode"
	"github.com/datahelix/datahelix/internal/costmodel"
	"github.com/datahelix/datahelix/internal/decoding"
	"github.com/datahelix/datahelix/internal/gen"
	"github.com/datahelix/datahelix/internal/inspect"
	"github.com/datahelix/datahelix/internal/machine"
	"github.com/datahelix/datahelix/internal/shardindex"
)

// CalibratePresets are the generator presets bench calibrate decodes: all
// but the mixtures (mixed, hdmix), which mix them. A calibration covers every
// preset bench uses when it decoded all of these.
var CalibratePresets = []string{"howto100m", "kinetics", "panda70m", "webvid", "activitynet", "imagenet", "laion", "interleaved", "text"}

// CheckCalibratePresets checks a list of presets to calibrate before
// anything is generated or decoded: at least one, each one of
// CalibratePresets, none twice. The generator's mixed preset is refused
// with the reason: it mixes the others, so calibrating those covers it.
func CheckCalibratePresets(names []string) error {
	if len(names) == 0 {
		return fmt.Errorf("bench calibrate: --presets names no preset")
	}
	for i, p := range names {
		switch {
		case gen.IsMixture(p):
			return fmt.Errorf("bench calibrate: --presets: %s is a mixture of the other presets, not calibrated on its own: calibrating those covers it (%s)", p, strings.Join(CalibratePresets, ", "))
		case !slices.Contains(CalibratePresets, p):
			return fmt.Errorf("bench calibrate: --presets: unknown preset %q (have %s)", p, strings.Join(CalibratePresets, ", "))
		case slices.Contains(names[:i], p):
			return fmt.Errorf("bench calibrate: --presets: %s named twice", p)
		}
	}
	return nil
}

// MissingCalibratePresets returns the CalibratePresets that names leaves
// out, in CalibratePresets' order: a calibration of names alone does not
// cover them.
func MissingCalibratePresets(names []string) []string {
	var out []string
	for _, p := range CalibratePresets {
		if !slices.Contains(names, p) {
			out = append(out, p)
		}
	}
	return out
}

// CalibrateConfig configures Calibrate.
type CalibrateConfig struct {
	// CacheDir holds the generated datasets (CacheDir/bench/data/...),
	// their shard indexes, and nothing else; the caller saves the result.
	CacheDir string
	// Presets to decode (nil: CalibratePresets), as CheckCalibratePresets
	// accepts them; the result records them (Calibration.Presets).
	Presets []string
	// Samples per preset: video presets get Samples, image and text
	// presets 3x as many (they are cheap). 0 means 24.
	Samples int
	Seed    uint64 // of the generated datasets (0 means 1)
	// Repeat decodes each sample this many times and keeps the fastest
	// (0 means 3), as datahelix costmodel does on shared machines.
	Repeat  int
	Machine machine.Machine
	// Log, when set, receives one line per stage.
	Log func(format string, args ...any)
	// Progress, when set, is called as samples are decoded.
	Progress func(preset string, done, total int)
}

// cheapPresets decode in milliseconds: they get 3x the samples.
var cheapPresets = map[string]bool{"imagenet": true, "laion": true, "interleaved": true, "text": true}

// calibrationDataset is the generator configuration of a preset's
// calibration dataset: the presets' own sizes and durations (ActivityNet
// at the generator's default 0.1 duration scale, so that generating it
// stays affordable; the cost features scale with frames).
func calibrationDataset(cfg CalibrateConfig, preset string) gen.Config {
	n := cfg.Samples
	if cheapPresets[preset] {
		n *= 3
	}
	return gen.Config{Preset: preset, Samples: n, Shards: 1, Seed: cfg.Seed}
}

// Calibrate measures the decode cost model on this machine: for each
// preset it generates (once, cached) a small dataset with the generator,
// decodes every sample with the real decoder (thread CPU time, the
// fastest of Repeat decodes), and every clip a second time task by task
// as the splitting loaders do (measureSplit), lets one cost model learn
// from the first two thirds of each preset's samples and measures the
// held-out error on the rest ("split:" keys for split clips), then learns
// from those too and returns the coefficients. It
// also measures the compressed bits per pixel of the generated images and
// how far the records the simulator synthesizes from the generator's
// specifications are from the real ones (SynthMAPE).
func Calibrate(ctx context.Context, cfg CalibrateConfig) (*costmodel.Calibration, error) {
	if cfg.Presets == nil {
		cfg.Presets = CalibratePresets
	}
	if err := CheckCalibratePresets(cfg.Presets); err != nil {
		return nil, err
	}
	if cfg.Samples <= 0 {
		cfg.Samples = 24
	}
	if cfg.Seed == 0 {
		cfg.Seed = 1
	}
	if cfg.Repeat <= 0 {
		cfg.Repeat = 3
	}
	logf := cfg.Log
	if logf == nil {
		logf = func(string, ...any) {}
	}
	opts := costmodel.DefaultOptions()
	m := costmodel.New(costmodel.DefaultCalibration())
	m.SetOptions(opts)
	dec := decoding.NewDecoder(decoding.Options{Frames: opts.Frames, Size: opts.Size})
	cal := &costmodel.Calibration{Source: "measured", MeasuredOn: cfg.Machine, Created: time.Now().UTC().Format(time.RFC3339), Presets: slices.Clone(cfg.Presets),
		MAPE: map[string]float64{}, SynthMAPE: map[string]float64{}, BitsPerPixel: map[string]float64{},
		SplitRatio: map[string]float64{}}
	var held []inspect.CostObservation
	type acc struct{ bits, px float64 }
	bpp := map[string]*acc{}
	type decoded struct {
		gc  gen.Config
		obs []inspect.CostObservation
	}
	var all []decoded
	var allSplits []splitObservation
	splitErrs := map[string][]float64{}
	for _, p := range cfg.Presets {
		gc := calibrationDataset(cfg, p)
		dir := filepath.Join(cfg.CacheDir, "bench", "data", gen.CacheName(fmt.Sprintf("%s-n%d-seed%d", p, gc.Samples, gc.Seed)))
		t0 := time.Now()
		made, err := gen.Ensure(ctx, gc, dir)
		if err != nil {
			return nil, fmt.Errorf("bench calibrate: generate %s: %w", p, err)
		}
		if made {
			logf("generated %d %s samples into %s in %.0fs", gc.Samples, p, dir, time.Since(t0).Seconds())
		}
		ds, err := decode.OpenDataset(dir, shardindex.Dir(cfg.CacheDir))
		if err != nil {
			return nil, fmt.Errorf("bench calibrate: %w", err)
		}
		var progress func(done, total int)
		if cfg.Progress != nil {
			progress = func(done, total int) { cfg.Progress(p, done, total) }
		}
		rep, err := inspect.EvaluateCostModel(ctx, ds, dec, m, inspect.CostEvalOptions{Warmup: max(gc.Samples*2/3, 1), Repeat: cfg.Repeat}, progress)
		var splits []splitObservation
		if err == nil {
			splits, err = measureSplit(ctx, ds, dec, rep.Observations, cfg.Repeat)
		}
		ds.Close()
		if err != nil {
			return nil, fmt.Errorf("bench calibrate: decode %s: %w", p, err)
		}
		if len(splits) > 0 {
			var whole, split float64
			for _, o := range splits {
				whole += float64(o.whole)
				split += float64(o.micros)
			}
			cal.SplitRatio[p] = split / whole
			for k, es := range learnSplit(m, opts, splits) {
				splitErrs[k] = append(splitErrs[k], es...)
			}
			allSplits = append(allSplits, splits...)
			logf("%s: %d clips decoded task by task (at most %d tasks): %.2fx the CPU time of decoding them whole", p, len(splits), calibrateSplitTasks, cal.SplitRatio[p])
		}
		cal.Failed += len(rep.Failed)
		for _, f := range rep.Failed {
			if len(cal.Failures) < 20 {
				cal.Failures = append(cal.Failures, p+": "+f)
			}
		}
		all = append(all, decoded{gc, rep.Observations})
		for _, o := range rep.Observations {
			cal.Samples++
			if o.HeldOut {
				cal.HeldOut++
				held = append(held, o)
			}
			spec, err := specOf(gc, o.Record)
			if err != nil || len(spec.Images) != len(o.Record.Images) {
				continue
			}
			for i, im := range o.Record.Images {
				for _, k := range spec.Images[i].bppKeys() {
					a := bpp[k]
					if a == nil {
						a = &acc{}
						bpp[k] = a
					}
					a.bits += 8 * float64(im.Bytes)
					a.px += float64(im.Width) * float64(im.Height)
				}
			}
		}
		logf("%s: %d samples decoded (%d held out, %d failed)", p, len(rep.Observations), rep.HeldOut, len(rep.Failed))
	}
	// Held-out error per key and overall, of predictions made before
	// the model saw the sample.
	sum, cnt := map[string]float64{}, map[string]int{}
	for _, o := range held {
		e := math.Abs(float64(o.Predicted-o.Micros)) / float64(o.Micros)
		for _, k := range []string{m.Key(o.Record), "all"} {
			sum[k] += e
			cnt[k]++
		}
	}
	for k, s := range sum {
		cal.MAPE[k] = s / float64(cnt[k])
	}
	if _, ok := cal.MAPE["all"]; !ok {
		cal.MAPE["all"] = defaultMAPE
		cal.Note = "no held-out samples: estimate error assumed"
	}
	for k, es := range splitErrs {
		sum := 0.0
		for _, e := range es {
			sum += e
		}
		cal.MAPE["split:"+k] = sum / float64(len(es))
	}
	for _, o := range held {
		m.Observe(o.Record, o.Micros)
	}
	learnHeldOutSplit(m, opts, allSplits)
	learned := m.Calibration(fmt.Sprintf("%s, thread CPU time, fastest of %d, %d samples of %d presets", cfg.Machine, cfg.Repeat, cal.Samples, len(cfg.Presets)))
	cal.Machine, cal.Options, cal.Coefficients = learned.Machine, learned.Options, learned.Coefficients
	for f, d := range defaultBitsPerPixel {
		cal.BitsPerPixel[f] = d
	}
	for k, a := range bpp {
		if a.px > 0 {
			cal.BitsPerPixel[k] = a.bits / a.px
		}
	}
	// The synthesis error, with the final coefficients and image sizes.
	final := costmodel.New(cal)
	final.SetOptions(opts)
	for _, d := range all {
		var sum float64
		n := 0
		for _, o := range d.obs {
			if e, ok := synthError(final, d.gc, o.Record, cal.BitsPerPixel); ok {
				sum += e
				n++
			}
		}
		if n > 0 {
			cal.SynthMAPE[d.gc.Preset] = sum / float64(n)
			logf("%s: synthesized records estimate %.1f %% away from the real ones", d.gc.Preset, 100*cal.SynthMAPE[d.gc.Preset])
		}
	}
	return cal, validate(cal)
}

// synthError is the relative difference between the cost estimate of a
// generated sample's real record and of the record the simulator
// synthesizes from the generator's specification of the same sample.
func synthError(m *costmodel.Model, gc gen.Config, real *decoding.Record, bpp map[string]float64) (float64, bool) {
	spec, err := specOf(gc, real)
	if err != nil {
		return 0, false
	}
	syn, err := syntheticRecord(spec, bpp)
	if err != nil {
		return 0, false
	}
	a, b := float64(m.Estimate(real)), float64(m.Estimate(syn))
	return math.Abs(b-a) / a, true
}

// specOf returns the generator's specification of a generated sample,
// from its key (the sample's index).
func specOf(gc gen.Config, rec *decoding.Record) (*genSpec, error) {
	i, err := strconv.Atoi(filepath.Base(rec.Key))
	if err != nil {
		return nil, fmt.Errorf("bench: sample key %q is not an index", rec.Key)
	}
	return drawSpec(gc.Preset, gc.Seed, gc.DurationScale, i)
}
