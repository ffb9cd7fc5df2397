package bench

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/datahelix/datahelix/internal/costmodel"
	"github.com/datahelix/datahelix/internal/machine"
)

// ErrCalibration reports a bench calibration file that cannot be used.
// Its text carries no "bench:": LoadCalibration's error puts the file's
// name before it.
var ErrCalibration = errors.New("invalid calibration")

// Calibration is what the simulator draws sample costs from: the cost
// model's coefficients measured on real decodes (true cost = the model's
// prediction from a sample's features), the model's held-out error (the
// estimate the planner sees is the true cost with that error), and the
// compressed bits per pixel of generated images.
type Calibration struct {
	// Source is "measured" (bench calibrate on this machine), "default"
	// (nothing cached: costmodel.DefaultCalibration, not measured here) or
	// the path of a file given with --calibration.
	Source  string          `json:"source"`
	Machine machine.Machine `json:"machine"`
	Created string          `json:"created,omitempty"`
	// Presets are the generator presets the calibration decoded (bench
	// calibrate --presets); CoveredPresets reads it.
	Presets []string `json:"presets,omitempty"`
	// Cost holds the coefficients, in µs of this machine's CPU time.
	Cost *costmodel.Calibration `json:"cost"`
	// MAPE is the held-out mean absolute percentage error of the cost
	// model per model key ("video/h264", "image/jpeg", ...) and "all",
	// as a fraction; "split:video/h264" is that of clips decoded task by
	// task.
	MAPE map[string]float64 `json:"mape"`
	// SynthMAPE is, per preset, the mean relative difference between the
	// estimate from a generated sample's real record and from the record
	// the simulator synthesizes for the same sample: the error of the
	// synthesis itself.
	SynthMAPE map[string]float64 `json:"synth_mape,omitempty"`
	// SplitRatio is, per preset, the CPU time of its clips decoded task
	// by task (split into keyframe-aligned tasks as the splitting
	// loaders do) over the time of decoding them whole.
	SplitRatio map[string]float64 `json:"split_ratio,omitempty"`
	// BitsPerPixel is the compressed size of generated images per format
	// ("jpeg", "png", "webp"), per format and content ("jpeg/life") and
	// per format, content and quality ("jpeg/life/q3").
	BitsPerPixel map[string]float64 `json:"bits_per_pixel"`
	Samples      int                `json:"samples"`  // decoded
	HeldOut      int                `json:"held_out"` // of which evaluated without learning
	Failed       int                `json:"failed"`   // did not decode
	// Failures are the first errors of samples that did not decode.
	Failures []string `json:"failures,omitempty"`
	Note     string   `json:"note,omitempty"`
}

// defaultMAPE is the estimate error assumed without a measurement.
const defaultMAPE = 0.25

// defaultBitsPerPixel were measured on generated LAION- and ImageNet-like
// images (60 + 30 samples, seed 1): mean compressed bits per pixel.
var defaultBitsPerPixel = map[string]float64{"jpeg": 3.0, "png": 12.4, "webp": 2.2}

// DefaultCalibration is the fallback when no calibration is cached: the
// decode package's built-in coefficients (not measured on this machine),
// an assumed 25 % estimate error and default image sizes.
func DefaultCalibration() *Calibration {
	bpp := map[string]float64{}
	for k, v := range defaultBitsPerPixel {
		bpp[k] = v
	}
	return &Calibration{
		Source: "default", Cost: costmodel.DefaultCalibration(), MAPE: map[string]float64{"all": defaultMAPE}, BitsPerPixel: bpp,
		Note: fmt.Sprintf("no calibration cached for this machine and commit: the built-in cost calibration (not measured here), %.0f %% estimate error assumed; run `datahelix bench calibrate`", 100*defaultMAPE),
	}
}

// Validate checks the calibration's numbers.
func (c *Calibration) Validate() error {
	if err := c.Cost.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrCalibration, err)
	}
	if len(c.Presets) > maxCostPresets {
		return fmt.Errorf("%w: %d presets, at most %d", ErrCalibration, len(c.Presets), maxCostPresets)
	}
	for i, p := range c.Presets {
		if p == "" || len(p) > 64 || slices.Contains(c.Presets[:i], p) {
			return fmt.Errorf("%w: presets: %q", ErrCalibration, p)
		}
	}
	for k, v := range c.MAPE {
		if !(v >= 0 && v < 10) {
			return fmt.Errorf("%w: mape[%s] = %v", ErrCalibration, k, v)
		}
	}
	if _, ok := c.MAPE["all"]; !ok {
		return fmt.Errorf("%w: no overall mape", ErrCalibration)
	}
	for _, f := range []string{"jpeg", "png", "webp"} {
		if _, ok := c.BitsPerPixel[f]; !ok {
			return fmt.Errorf("%w: no bits_per_pixel for %s", ErrCalibration, f)
		}
	}
	for k, v := range c.BitsPerPixel {
		if !(v > 0 && v < 100) {
			return fmt.Errorf("%w: bits_per_pixel[%s] = %v", ErrCalibration, k, v)
		}
	}
	return nil
}

// maxCostPresets bounds the presets a calibration file may list.
const maxCostPresets = 64

// CoveredPresets returns the generator presets c measured: Presets, or,
// for a file written before calibrations recorded them, the presets with
// a synthesized-record error (bench calibrate measures one for every
// preset it decodes). The default calibration measured none.
func (c *Calibration) CoveredPresets() []string {
	if c.Presets != nil {
		return c.Presets
	}
	var out []string
	for _, p := range CalibratePresets {
		if _, ok := c.SynthMAPE[p]; ok {
			out = append(out, p)
		}
	}
	return out
}

// UncoveredPresets returns the presets that workloads ws draw samples from
// and c did not measure, each once, in CalibratePresets' order (others
// after, sorted). It is nil for the default calibration, which measured
// nothing here and says so in its note.
func (c *Calibration) UncoveredPresets(ws []*Workload) []string {
	if c.Source == "default" {
		return nil
	}
	covered := c.CoveredPresets()
	var out []string
	for _, w := range ws {
		for _, s := range w.Sources {
			if !slices.Contains(covered, s.Preset) && !slices.Contains(out, s.Preset) {
				out = append(out, s.Preset)
			}
		}
	}
	slices.SortFunc(out, func(a, b string) int {
		ia, ib := slices.Index(CalibratePresets, a), slices.Index(CalibratePresets, b)
		if ia < 0 {
			ia = len(CalibratePresets)
		}
		if ib < 0 {
			ib = len(CalibratePresets)
		}
		if ia != ib {
			return ia - ib
		}
		return strings.Compare(a, b)
	})
	return out
}

// CoverageWarning is one line saying which presets of workloads ws the
// calibration did not measure, "" when it measured all of them (or is the
// default calibration). Their samples are priced with coefficients
// measured on other presets or built in, and the held-out error is that
// of the presets measured.
func (c *Calibration) CoverageWarning(ws []*Workload) string {
	miss := c.UncoveredPresets(ws)
	if len(miss) == 0 {
		return ""
	}
	covered := "no preset"
	if cp := c.CoveredPresets(); len(cp) > 0 {
		covered = strings.Join(cp, ", ")
	}
	return fmt.Sprintf("the calibration measured %s, not %s of the selected workloads: their costs use coefficients not measured on them, and its error is that of the presets measured (run datahelix bench calibrate for every preset)",
		covered, strings.Join(miss, ", "))
}

// ReadCalibration parses and validates a calibration in JSON (at most
// 4 MiB): one object as Save writes it, without unknown fields (another
// JSON file given by mistake is refused, not read as empty).
func ReadCalibration(r io.Reader) (*Calibration, error) {
	var c Calibration
	if err := decodeOneObject(io.LimitReader(r, 4<<20), &c); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCalibration, err)
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// LoadCalibration reads a calibration written by Save.
func LoadCalibration(path string) (*Calibration, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("bench: calibration: %w", err)
	}
	defer f.Close()
	c, err := ReadCalibration(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// Save writes the calibration as indented JSON, through a temporary file
// renamed into place.
func (c *Calibration) Save(path string) error {
	data, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	tmp := fmt.Sprintf("%s.tmp-%d", path, os.Getpid())
	if err := os.WriteFile(tmp, append(data, '\n'), 0o644); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("bench: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("bench: %w", err)
	}
	return nil
}

// CalibrationPath is where the calibration of machine m is cached under
// the cache directory.
func CalibrationPath(cacheDir string, m machine.Machine) string {
	return filepath.Join(cacheDir, "bench", "calibration-"+m.Key()+".json")
}

// CachedCalibration returns the calibration cached for machine m: the
// one for its hardware and decoder commit; else the newest one for its
// hardware, with a Note naming the decoder commit it measured; else
// DefaultCalibration. A cached file that does not parse is an error, not
// a silent fallback.
func CachedCalibration(cacheDir string, m machine.Machine) (*Calibration, error) {
	p := CalibrationPath(cacheDir, m)
	if _, err := os.Stat(p); err == nil {
		return loadCached(p)
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("bench: calibration: %w", err)
	}
	hw, _, _ := strings.Cut(m.Key(), "-")
	matches, _ := filepath.Glob(filepath.Join(cacheDir, "bench", "calibration-"+hw+"-*.json"))
	var newest string
	var when time.Time
	for _, f := range matches {
		if st, err := os.Stat(f); err == nil && (newest == "" || st.ModTime().After(when)) {
			newest, when = f, st.ModTime()
		}
	}
	if newest == "" {
		return DefaultCalibration(), nil
	}
	c, err := loadCached(newest)
	if err != nil {
		return nil, err
	}
	c.Note = fmt.Sprintf("measured on this machine with the decoder of commit %.12s, not the current %.12s (rerun datahelix bench calibrate)", c.Machine.DecodeCommit, m.DecodeCommit)
	return c, nil
}

// loadCached is LoadCalibration of a file in the cache, whose error says
// how to get past it: the user did not name the file.
func loadCached(path string) (*Calibration, error) {
	c, err := LoadCalibration(path)
	if err != nil {
		return nil, fmt.Errorf("%w (a cached calibration: rerun datahelix bench calibrate to replace it, or delete the file)", err)
	}
	return c, nil
}

// Sigma returns the shape of the multiplicative log-normal error of
// estimates for model key: the one whose mean absolute percentage error
// is the measured MAPE of the key (else the overall one).
func (c *Calibration) Sigma(key string) float64 {
	e, ok := c.MAPE[key]
	if !ok {
		e = c.MAPE["all"]
	}
	return sigmaForMAPE(e)
}

// mapeOfSigma is E|e^{σZ} - 1| for a standard normal Z, by the midpoint
// rule on [-8, 8].
func mapeOfSigma(sigma float64) float64 {
	const n, lim = 4000, 8.0
	h := 2 * lim / n
	s := 0.0
	for i := range n {
		z := -lim + (float64(i)+0.5)*h
		s += math.Abs(math.Exp(sigma*z)-1) * math.Exp(-z*z/2)
	}
	return s * h / math.Sqrt(2*math.Pi)
}

// sigmaForMAPE inverts mapeOfSigma by bisection (it is increasing).
func sigmaForMAPE(mape float64) float64 {
	if !(mape > 0) {
		return 0
	}
	lo, hi := 0.0, 3.0
	if mape >= mapeOfSigma(hi) {
		return hi
	}
	for range 60 {
		mid := (lo + hi) / 2
		if mapeOfSigma(mid) < mape {
			lo = mid
		} else {
			hi = mid
		}
	}
	return (lo + hi) / 2
}

// MAPEKeys returns the model keys with a measured error, sorted.
func (c *Calibration) MAPEKeys() []string {
	keys := make([]string, 0, len(c.MAPE))
	for k := range c.MAPE {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
