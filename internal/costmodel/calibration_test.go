package costmodel

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/datahelix/datahelix/decode"
	"github.com/datahelix/datahelix/internal/decoding"
)

// TestReadCalibrationRejectsOtherFiles checks that JSON that is not a
// calibration (an empty object, a workload, a bench calibration of the old layout, no
// coefficients, trailing data) is refused with ErrBadCalibration and a
// message saying why, instead of read as a calibration without
// coefficients.
func TestReadCalibrationRejectsOtherFiles(t *testing.T) {
	good, err := json.Marshal(DefaultCalibration())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, data, want string }{
		{"empty object", `{}`, "no cost coefficients"},
		{"empty coefficients", `{"machine":"m","coefficients":{}}`, "no cost coefficients"},
		{"null", `null`, "no cost coefficients"},
		{"workload", `{"name":"kinetics","skew":"skewed","batch":16}`, `unknown field "name"`},
		{"bench calibration of the old layout", `{"source":"measured","cost":` + string(good) + `}`, `unknown field "cost"`},
		{"trailing data", string(good) + ` {}`, "data after the object"},
		{"stray brace", string(good) + ` }`, "data after the object"},
		{"stray bracket", string(good) + "\n]]", "data after the object"},
		{"negative", `{"coefficients":{"text":[-1,0,0,0,0,0]}}`, "text coefficient 0 is -1"},
	}
	for _, tt := range tests {
		_, err := ReadCalibration(strings.NewReader(tt.data))
		if !errors.Is(err, ErrBadCalibration) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err %v, want ErrBadCalibration containing %q", tt.name, err, tt.want)
		}
	}
	c, err := ReadCalibration(bytes.NewReader(good))
	if err != nil {
		t.Fatalf("the default calibration: %v, want it read back", err)
	}
	if len(c.Coefficients) == 0 {
		t.Errorf("the default calibration read back without coefficients")
	}
	p := filepath.Join(t.TempDir(), "empty.json")
	if err := os.WriteFile(p, []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadCalibration(p); err == nil || !strings.HasPrefix(err.Error(), p+": ") || !strings.Contains(err.Error(), "no cost coefficients") {
		t.Errorf("LoadCalibration(%s) = %v, want an error naming the file and saying no cost coefficients", p, err)
	}
}

// TestValidateNil checks that a missing calibration is refused with the
// same message as an empty one (bench's reader relies on it).
func TestValidateNil(t *testing.T) {
	var c *Calibration
	if err := c.Validate(); !errors.Is(err, ErrBadCalibration) || !strings.Contains(err.Error(), "no cost coefficients") {
		t.Errorf("nil calibration: %v, want no cost coefficients", err)
	}
}

// FuzzReadCalibration feeds arbitrary bytes to the calibration reader: a
// calibration it accepts has coefficients and gives a cost model positive
// estimates.
func FuzzReadCalibration(f *testing.F) {
	good, _ := json.Marshal(DefaultCalibration())
	f.Add(good)
	f.Add([]byte(`{"coefficients":{"text":[1,2,3,4,5,6]}}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"coefficients":{"video/h264":[1e308,1e308,1e308,1e308,1e308,1e308]},"options":{"Frames":8}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ReadCalibration(bytes.NewReader(data))
		if err != nil {
			if !errors.Is(err, ErrBadCalibration) {
				t.Fatalf("error %v is not an ErrBadCalibration", err)
			}
			return
		}
		if len(c.Coefficients) == 0 {
			t.Fatal("accepted a calibration without coefficients")
		}
		m := New(c)
		for _, r := range []*decoding.Record{{Modality: decode.ModalityText, Bytes: 600, Text: &decoding.TextInfo{Bytes: 600, Tokens: 100}}, {Modality: decode.ModalityImage, Bytes: 9000, Images: []decoding.ImageInfo{{Format: "jpeg", Width: 640, Height: 480, Bytes: 9000}}}} {
			if e := m.Estimate(r); e < 1 {
				t.Fatalf("Estimate(%+v) = %d", r, e)
			}
		}
	})
}

func TestSigmaForMAPE(t *testing.T) {
	for _, mape := range []float64{0.01, 0.05, 0.163, 0.5, 1.5} {
		sigma := sigmaForMAPE(mape)
		if got := mapeOfSigma(sigma); math.Abs(got-mape) > 1e-6 {
			t.Errorf("MAPE %v: sigma %v gives back %v", mape, sigma, got)
		}
	}
	// Small errors: E|e^{σZ}-1| ≈ σ sqrt(2/π).
	if got, want := sigmaForMAPE(0.01), 0.01/math.Sqrt(2/math.Pi); math.Abs(got-want) > 1e-4 {
		t.Errorf("sigma for 1 %% = %v, want about %v", got, want)
	}
	if sigmaForMAPE(0) != 0 || sigmaForMAPE(-1) != 0 {
		t.Error("no error must give sigma 0")
	}
}
