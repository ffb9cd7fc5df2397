package costmodel

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
)

// ErrBadCalibration reports a calibration or cost model state that cannot
// be used: malformed JSON, negative or non-finite numbers, absurd sizes.
var ErrBadCalibration = errors.New("decode: invalid cost calibration")

// Calibration holds the coefficients a Model starts from, per model
// key ("video/h264", "image/jpeg", "document", "text", ...): microseconds
// per unit of each feature of costFeatures. It defines the reference CPU
// that estimates are expressed in.
type Calibration struct {
	// Machine says where and how the coefficients were measured.
	Machine string `json:"machine,omitempty"`
	// Options are the decode options of the measurement run (the features
	// account for other options; this is a record of what was measured).
	Options Options `json:"options"`
	// Coefficients per model key.
	Coefficients map[string]featureVector `json:"coefficients"`
}

// DefaultCalibration returns the built-in calibration, measured with
// `datahelix costmodel --calibrate-out` on the generated presets (see
// defaultCoefficients for the machine and date).
func DefaultCalibration() *Calibration {
	c := &Calibration{Machine: defaultCalibrationMachine, Options: DefaultOptions(), Coefficients: map[string]featureVector{}}
	for k, v := range defaultCoefficients {
		c.Coefficients[k] = v
	}
	return c
}

// prior returns the coefficients for key: its own, else those of its
// modality's most common member (h264 for video, jpeg for images), else a
// flat 1 ms per sample.
func (c *Calibration) prior(key string) featureVector {
	if c != nil {
		if v, ok := c.Coefficients[key]; ok {
			return v
		}
		for prefix, fallback := range map[string]string{"video/": "video/h264", "image/": "image/jpeg", costKeyDocument: "image/jpeg"} {
			if strings.HasPrefix(key, prefix) {
				if v, ok := c.Coefficients[fallback]; ok {
					return v
				}
			}
		}
	}
	if v, ok := defaultCoefficients[key]; ok {
		return v
	}
	return featureVector{1000}
}

// ReadCalibration parses and validates a calibration in JSON: one object
// as Save writes it. Unknown fields and data after the object are
// refused, and Validate must accept it, so that another JSON file given
// by mistake (a workload, a bench calibration, {}) is an error rather
// than a calibration without coefficients.
func ReadCalibration(r io.Reader) (*Calibration, error) {
	var c Calibration
	dec := json.NewDecoder(io.LimitReader(r, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadCalibration, err)
	}
	if _, err := dec.Token(); err != io.EOF { // More() misses a stray '}' or ']'
		return nil, fmt.Errorf("%w: data after the object", ErrBadCalibration)
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// Validate checks a calibration given to a cost model from outside: it
// holds the coefficients of at least one model key, each finite and not
// negative, under sane options. A nil calibration has no coefficients.
// Every reader of calibration files (ReadCalibration, bench's) uses it.
func (c *Calibration) Validate() error {
	if c == nil || len(c.Coefficients) == 0 {
		return fmt.Errorf("%w: no cost coefficients", ErrBadCalibration)
	}
	return c.validate()
}

// LoadCalibration reads a calibration file.
func LoadCalibration(path string) (*Calibration, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("decode: calibration: %w", err)
	}
	defer f.Close()
	c, err := ReadCalibration(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// Save writes the calibration as indented JSON.
func (c *Calibration) Save(path string) error {
	data, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

// maxCostKeys bounds the model keys a calibration or state may hold.
const maxCostKeys = 256

// validate checks the numbers and sizes of c; a cost model's saved state
// may hold a calibration without coefficients (its fits carry them).
func (c *Calibration) validate() error {
	if len(c.Coefficients) > maxCostKeys {
		return fmt.Errorf("%w: %d model keys, at most %d", ErrBadCalibration, len(c.Coefficients), maxCostKeys)
	}
	for k, v := range c.Coefficients {
		if len(k) == 0 || len(k) > 64 {
			return fmt.Errorf("%w: model key %q", ErrBadCalibration, k)
		}
		for i, x := range v {
			if !finiteNonNegative(x) {
				return fmt.Errorf("%w: %s coefficient %d is %v", ErrBadCalibration, k, i, x)
			}
		}
	}
	return c.Options.validate()
}

func (o Options) validate() error {
	if o.Frames < 0 || o.Frames > 1<<16 || o.Size < 0 || o.Size > 1<<16 || o.MaxTasks < 0 || o.MaxTasks > 1<<10 {
		return fmt.Errorf("%w: options %+v out of range", ErrBadCalibration, o)
	}
	return nil
}

func finiteNonNegative(x float64) bool { return x >= 0 && !math.IsInf(x, 0) && !math.IsNaN(x) }
