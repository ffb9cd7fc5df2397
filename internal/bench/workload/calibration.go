package workload

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/datahelix/datahelix/internal/costmodel"
	"github.com/datahelix/datahelix/internal/machine"
)

// ErrCalibration reports a bench calibration file that cannot be used.
// Its text carries no "bench:": LoadCalibration's error puts the file's
// name before it.
var ErrCalibration = errors.New("invalid calibration")

// defaultMAPE is the estimate error assumed without a measurement.
const defaultMAPE = 0.25

// defaultBitsPerPixel were measured on generated LAION- and ImageNet-like
// images (60 + 30 samples, seed 1): mean compressed bits per pixel.
var defaultBitsPerPixel = map[string]float64{"jpeg": 3.0, "png": 12.4, "webp": 2.2}

// DefaultCalibration is the fallback when no calibration is cached: the
// decode package's built-in coefficients (not measured on this machine),
// an assumed 25 % estimate error and default image sizes.
func DefaultCalibration() *costmodel.Calibration {
	bpp := map[string]float64{}
	for k, v := range defaultBitsPerPixel {
		bpp[k] = v
	}
	c := costmodel.DefaultCalibration()
	c.Source, c.MAPE, c.BitsPerPixel = "default", map[string]float64{"all": defaultMAPE}, bpp
	c.Note = fmt.Sprintf("no calibration cached for this machine and commit: the built-in cost calibration (not measured here), %.0f %% estimate error assumed; run `datahelix bench calibrate`", 100*defaultMAPE)
	return c
}

// validate checks that c holds what the simulator draws from, besides
// the coefficients costmodel's Validate checks.
func validate(c *costmodel.Calibration) error {
	if err := c.Validate(); err != nil {
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
func CoveredPresets(c *costmodel.Calibration) []string {
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
func UncoveredPresets(c *costmodel.Calibration, ws []*Workload) []string {
	if c.Source == "default" {
		return nil
	}
	covered := CoveredPresets(c)
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
func CoverageWarning(c *costmodel.Calibration, ws []*Workload) string {
	miss := UncoveredPresets(c, ws)
	if len(miss) == 0 {
		return ""
	}
	covered := "no preset"
	if cp := CoveredPresets(c); len(cp) > 0 {
		covered = strings.Join(cp, ", ")
	}
	return fmt.Sprintf("the calibration measured %s, not %s of the selected workloads: their costs use coefficients not measured on them, and its error is that of the presets measured (run datahelix bench calibrate for every preset)",
		covered, strings.Join(miss, ", "))
}

// ReadCalibration parses a calibration in JSON as costmodel's
// ReadCalibration does, and checks that it holds what the simulator
// draws from (a calibration of the cost model alone does not).
func ReadCalibration(r io.Reader) (*costmodel.Calibration, error) {
	c, err := costmodel.ReadCalibration(r)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCalibration, err)
	}
	if err := validate(c); err != nil {
		return nil, err
	}
	return c, nil
}

// LoadCalibration reads a calibration written by Save.
func LoadCalibration(path string) (*costmodel.Calibration, error) {
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

// calibrationPrefix starts the names of cached calibrations. Files of
// the layout before bench's calibration and the cost model's were one
// type ("calibration-<key>.json", the coefficients under "cost") have
// another name: this binary never reads them, and calibrates again.
const calibrationPrefix = "calibration2-"

// CalibrationPath is where the calibration of machine m is cached under
// the cache directory.
func CalibrationPath(cacheDir string, m machine.Machine) string {
	return filepath.Join(cacheDir, "bench", calibrationPrefix+m.Key()+".json")
}

// CachedCalibration returns the calibration cached for machine m: the
// one for its hardware and decoder commit; else the newest one for its
// hardware, with a Note naming the decoder commit it measured; else
// DefaultCalibration. A cached file that does not parse is an error, not
// a silent fallback.
func CachedCalibration(cacheDir string, m machine.Machine) (*costmodel.Calibration, error) {
	p := CalibrationPath(cacheDir, m)
	if _, err := os.Stat(p); err == nil {
		return loadCached(p)
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("bench: calibration: %w", err)
	}
	hw, _, _ := strings.Cut(m.Key(), "-")
	matches, _ := filepath.Glob(filepath.Join(cacheDir, "bench", calibrationPrefix+hw+"-*.json"))
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
	c.Note = fmt.Sprintf("measured on this machine with the decoder of commit %.12s, not the current %.12s (rerun datahelix bench calibrate)", c.MeasuredOn.DecodeCommit, m.DecodeCommit)
	return c, nil
}

// loadCached is LoadCalibration of a file in the cache, whose error says
// how to get past it: the user did not name the file.
func loadCached(path string) (*costmodel.Calibration, error) {
	c, err := LoadCalibration(path)
	if err != nil {
		return nil, fmt.Errorf("%w (a cached calibration: rerun datahelix bench calibrate to replace it, or delete the file)", err)
	}
	return c, nil
}
