package costmodel

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/datahelix/datahelix/internal/decoding"

	"github.com/datahelix/datahelix/internal/machine"
)

// ErrBadCalibration reports a calibration or cost model state that cannot
// be used: malformed JSON, negative or non-finite numbers, absurd sizes.
var ErrBadCalibration = errors.New("decode: invalid cost calibration")

// Calibration holds the coefficients a Model starts from, per model
// key ("video/h264", "image/jpeg", "document", "text", ...): microseconds
// per unit of each feature of costFeatures. It defines the reference CPU
// that estimates are expressed in. bench calibrate measures one on this
// machine with what the simulator needs besides (the fields after
// Coefficients), and caches it.
type Calibration struct {
	// Machine says where and how the coefficients were measured.
	Machine string `json:"machine,omitempty"`
	// Options are the decode options of the measurement run (the features
	// account for other options; this is a record of what was measured).
	Options Options `json:"options"`
	// Coefficients per model key.
	Coefficients map[string]featureVector `json:"coefficients"`

	// The fields below are what bench calibrate measures besides the
	// coefficients, which the simulator draws sample costs from: the true
	// cost of a sample is the model's prediction from its features, and
	// the estimate the planner sees is that cost with the model's
	// held-out error. A calibration of the cost model alone leaves them
	// empty.

	// Source is "measured" (bench calibrate on this machine), "default"
	// (nothing cached: the built-in coefficients, not measured here) or
	// the path of a file given with --calibration.
	Source string `json:"source,omitempty"`
	// MeasuredOn is the machine and decoder commit bench calibrate ran
	// on, which its cache file is named after.
	MeasuredOn machine.Machine `json:"measured_on,omitzero"`
	Created    string          `json:"created,omitempty"`
	// Presets are the generator presets the calibration decoded (bench
	// calibrate --presets).
	Presets []string `json:"presets,omitempty"`
	// MAPE is the held-out mean absolute percentage error of the cost
	// model per model key ("video/h264", "image/jpeg", ...) and "all",
	// as a fraction; "split:video/h264" is that of clips decoded task by
	// task.
	MAPE map[string]float64 `json:"mape,omitempty"`
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
	BitsPerPixel map[string]float64 `json:"bits_per_pixel,omitempty"`
	Samples      int                `json:"samples,omitempty"`  // decoded
	HeldOut      int                `json:"held_out,omitempty"` // of which evaluated without learning
	Failed       int                `json:"failed,omitempty"`   // did not decode
	// Failures are the first errors of samples that did not decode.
	Failures []string `json:"failures,omitempty"`
	Note     string   `json:"note,omitempty"`
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
// modality's most common member (h264 for video, jpeg for images, aac for
// audio), else a flat 1 ms per sample.
func (c *Calibration) prior(key string) featureVector {
	if c != nil {
		if v, ok := c.Coefficients[key]; ok {
			return v
		}
		for prefix, fallback := range map[string]string{"video/": "video/h264", "image/": "image/jpeg", costKeyDocument: "image/jpeg", "audio/": "audio/aac"} {
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
	if strings.HasPrefix(key, "audio/") {
		return defaultCoefficients["audio/aac"]
	}
	return featureVector{1000}
}

// ReadCalibration parses and validates a calibration in JSON (at most 4
// MiB): one object as Save writes it. Unknown fields and data after the
// object are refused, and Validate must accept it, so that another JSON
// file given by mistake (a workload, {}) is an error rather than a
// calibration without coefficients.
func ReadCalibration(r io.Reader) (*Calibration, error) {
	var c Calibration
	dec := json.NewDecoder(io.LimitReader(r, 4<<20))
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

// Save writes the calibration as indented JSON, through a temporary file
// renamed into place, making its directory if need be.
func (c *Calibration) Save(path string) error {
	data, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("costmodel: %w", err)
	}
	tmp := fmt.Sprintf("%s.tmp-%d", path, os.Getpid())
	if err := os.WriteFile(tmp, append(data, '\n'), 0o644); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("costmodel: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("costmodel: %w", err)
	}
	return nil
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
	if o.Frames < 0 || o.Frames > 1<<16 || o.Size < 0 || o.Size > 1<<16 || o.MaxTasks < 0 || o.MaxTasks > 1<<10 || o.AudioRate < 0 || o.AudioRate > decoding.MaxAudioRate {
		return fmt.Errorf("%w: options %+v out of range", ErrBadCalibration, o)
	}
	return nil
}

func finiteNonNegative(x float64) bool { return x >= 0 && !math.IsInf(x, 0) && !math.IsNaN(x) }
