package costmodel

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
)

// costModelState is the saved form of a Model.
type costModelState struct {
	Version     int                 `json:"version"`
	Options     Options             `json:"options"`
	Calibration *Calibration        `json:"calibration"`
	Fits        map[string]*costFit `json:"fits"`
	LogSpeed    float64             `json:"log_speed"`
	SpeedN      int                 `json:"speed_n"`
	Observed    int                 `json:"observed"`
	Warmup      int                 `json:"warmup"`
	Errors      map[string]*errStat `json:"errors"`
}

const costModelVersion = 1

// MarshalJSON saves the model's whole state: options, calibration, the
// least-squares statistics of every key, the speed factor and the error
// counts.
func (m *Model) MarshalJSON() ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return json.Marshal(costModelState{Version: costModelVersion, Options: m.opts, Calibration: m.cal, Fits: m.fits,
		LogSpeed: m.logSpeed, SpeedN: m.speedN, Observed: m.observed, Warmup: m.warmup, Errors: m.errs})
}

// UnmarshalJSON restores a state saved by MarshalJSON, validating it: a
// state from another version, with non-finite or negative statistics or
// absurd sizes is rejected with ErrBadCalibration and leaves m unchanged.
func (m *Model) UnmarshalJSON(data []byte) error {
	var s costModelState
	if err := json.Unmarshal(data, &s); err != nil {
		return fmt.Errorf("%w: cost model state: %v", ErrBadCalibration, err)
	}
	if err := s.validate(); err != nil {
		return err
	}
	if s.Calibration.Coefficients == nil {
		s.Calibration.Coefficients = map[string]featureVector{}
	}
	if s.Fits == nil {
		s.Fits = map[string]*costFit{}
	}
	if s.Errors == nil {
		s.Errors = map[string]*errStat{}
	}
	for _, f := range s.Fits {
		f.coef, f.dirty = f.Prior, true
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.opts, m.cal, m.fits = s.Options.withDefaults(), s.Calibration, s.Fits
	m.logSpeed, m.speedN, m.observed, m.warmup, m.errs = s.LogSpeed, s.SpeedN, s.Observed, s.Warmup, s.Errors
	return nil
}

func (s *costModelState) validate() error {
	bad := func(what string, args ...any) error {
		return fmt.Errorf("%w: cost model state: "+what, append([]any{ErrBadCalibration}, args...)...)
	}
	if s.Version != costModelVersion {
		return bad("version %d, want %d", s.Version, costModelVersion)
	}
	if s.Calibration == nil {
		return bad("no calibration")
	}
	if err := s.Calibration.validate(); err != nil {
		return err
	}
	if err := s.Options.validate(); err != nil {
		return err
	}
	if len(s.Fits) > maxCostKeys || len(s.Errors) > maxCostKeys {
		return bad("%d fits and %d error keys, at most %d", len(s.Fits), len(s.Errors), maxCostKeys)
	}
	if math.IsNaN(s.LogSpeed) || math.Abs(s.LogSpeed) > 20 || s.SpeedN < 0 || s.Observed < 0 || s.Warmup < 0 {
		return bad("speed or counters out of range")
	}
	for k, f := range s.Fits {
		if f == nil || len(k) == 0 || len(k) > 64 || !finiteNonNegative(f.N) || f.Count < 0 {
			return bad("fit %q", k)
		}
		for i := range f.Prior {
			ok := finiteNonNegative(f.Prior[i]) && !math.IsNaN(f.XTY[i]) && !math.IsInf(f.XTY[i], 0)
			for j := range f.XTX[i] {
				// Symmetric and Cauchy-Schwarz bounded, as sums of x xᵀ are.
				v := f.XTX[i][j]
				ok = ok && !math.IsNaN(v) && !math.IsInf(v, 0) && v == f.XTX[j][i] && v*v <= f.XTX[i][i]*f.XTX[j][j]*(1+1e-9)
			}
			if !ok || f.XTX[i][i] < 0 {
				return bad("fit %q statistics", k)
			}
		}
	}
	for k, e := range s.Errors {
		if e == nil || len(k) > 64 || e.Count < 0 || !finiteNonNegative(e.Sum) {
			return bad("errors of %q", k)
		}
	}
	return nil
}

// Save writes the model's state to a JSON file.
func (m *Model) Save(path string) error {
	data, err := m.MarshalJSON()
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

// Load restores a model saved with Save.
func Load(path string) (*Model, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("decode: cost model: %w", err)
	}
	m := New(nil)
	if err := m.UnmarshalJSON(data); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}
