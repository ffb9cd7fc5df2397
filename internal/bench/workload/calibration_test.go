package workload

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/datahelix/datahelix/internal/costmodel"
	"github.com/datahelix/datahelix/internal/machine"
)

func testCalibration() *costmodel.Calibration {
	c := DefaultCalibration()
	c.Source, c.Note = "measured", ""
	c.MeasuredOn = machine.Machine{Host: "h", CPU: "c", Cores: 2, OS: "linux", Arch: "amd64", Commit: "abc", DecodeCommit: "0123456789abcdef"}
	c.MAPE["video/h264"] = 0.12
	c.BitsPerPixel["jpeg/life/q3"] = 3.5
	c.Presets = slices.Clone(CalibratePresets)
	return c
}

// TestCalibrationCoverage checks which presets of the selected workloads
// a calibration did not measure: from its presets, from its synthesized
// errors for a file that predates them, none for the default.
func TestCalibrationCoverage(t *testing.T) {
	all, err := Workloads()
	if err != nil {
		t.Fatal(err)
	}
	pick := func(names ...string) []*Workload {
		var out []*Workload
		for _, w := range all {
			if slices.Contains(names, w.Name) {
				out = append(out, w)
			}
		}
		return out
	}
	textOnly := testCalibration()
	textOnly.Presets = []string{"text"}
	old := testCalibration()
	old.Presets, old.SynthMAPE = nil, map[string]float64{"kinetics": 0.1, "laion": 0.2}
	tests := []struct {
		name string
		cal  *costmodel.Calibration
		ws   []*Workload
		want []string
	}{
		{"full", testCalibration(), all, nil},
		{"text only, text", textOnly, pick("text"), nil},
		{"text only, video", textOnly, pick("kinetics", "text", "hetero_cluster"), []string{"kinetics"}},
		{"text only, mix", textOnly, pick("video_image_mix"), []string{"webvid", "laion"}},
		{"old file", old, pick("kinetics", "laion", "imagenet", "text"), []string{"imagenet", "text"}},
		{"default", DefaultCalibration(), all, nil},
	}
	for _, tt := range tests {
		got := UncoveredPresets(tt.cal, tt.ws)
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s: uncovered %v, want %v", tt.name, got, tt.want)
		}
		w := CoverageWarning(tt.cal, tt.ws)
		if (w == "") != (len(tt.want) == 0) {
			t.Errorf("%s: warning %q with uncovered %v", tt.name, w, tt.want)
		}
		for _, p := range tt.want {
			if !strings.Contains(w, p) || !strings.Contains(w, "bench calibrate") {
				t.Errorf("%s: warning %q does not name %s and the fix", tt.name, w, p)
			}
		}
	}
	dup := testCalibration()
	dup.Presets = []string{"text", "text"}
	if err := validate(dup); err == nil || !strings.Contains(err.Error(), "presets") {
		t.Errorf("presets listed twice: %v, want an error", err)
	}
}

func TestCalibrationRoundTrip(t *testing.T) {
	c := testCalibration()
	p := filepath.Join(t.TempDir(), "cal.json")
	if err := c.Save(p); err != nil {
		t.Fatal(err)
	}
	got, err := LoadCalibration(p)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, c) {
		t.Errorf("round trip changed the calibration:\n%+v\n%+v", got, c)
	}
	sigma := func(mape float64) float64 {
		return (&costmodel.Calibration{MAPE: map[string]float64{"all": mape}}).Sigma("")
	}
	if got.Sigma("video/h264") != sigma(0.12) || got.Sigma("image/png") != sigma(defaultMAPE) {
		t.Error("Sigma does not use the key's MAPE, else the overall one")
	}
}

func TestReadCalibrationRejects(t *testing.T) {
	good := func() string {
		c := testCalibration()
		p := filepath.Join(t.TempDir(), "c.json")
		c.Save(p)
		data, _ := os.ReadFile(p)
		return string(data)
	}
	cases := []struct{ name, old, new, want string }{
		{"not json", "{", "[", "invalid calibration"},
		{"negative mape", `"video/h264": 0.12`, `"video/h264": -0.12`, "mape[video/h264]"},
		{"no overall mape", `"all": 0.25`, `"al": 0.25`, "no overall mape"},
		{"bits per pixel", `"jpeg/life/q3": 3.5`, `"jpeg/life/q3": 300`, "bits_per_pixel[jpeg/life/q3]"},
		{"missing format", `"png":`, `"pgn":`, "no bits_per_pixel for png"},
		{"unknown field", `"coefficients": {`, `"coefficient": {`, `unknown field "coefficient"`},
		{"negative coefficient", `"text": [`, `"text": [-1,`, "coefficient 0 is -1"},
	}
	for _, c := range cases {
		data := good()
		bad := strings.Replace(data, c.old, c.new, 1)
		if bad == data {
			t.Fatalf("%s: %q not in the calibration", c.name, c.old)
		}
		_, err := ReadCalibration(strings.NewReader(bad))
		if !errors.Is(err, ErrCalibration) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want ErrCalibration containing %q", c.name, err, c.want)
		}
	}
	// Other JSON given as a calibration: the same check as decode's
	// (datahelix costmodel --calibration).
	workload, err := workloadFS.ReadFile("workloads/kinetics.json")
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(good()), &m); err != nil {
		t.Fatal(err)
	}
	delete(m, "coefficients")
	noCost, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	others := []struct{ name, data, want string }{
		{"no cost", string(noCost), "no cost coefficients"},
		{"empty object", "{}", "no cost coefficients"},
		{"empty coefficients", `{"coefficients":{},"mape":{"all":0.1},"bits_per_pixel":{"jpeg":1,"png":1,"webp":1}}`, "no cost coefficients"},
		{"cost model only", `{"coefficients":{"text":[1,2,3,0,0,0,0,0]}}`, "no overall mape"},
		{"workload", string(workload), `unknown field "name"`},
		{"trailing data", good() + "{}", "data after the object"},
		{"stray brace", good() + "}", "data after the object"},
	}
	for _, c := range others {
		_, err := ReadCalibration(strings.NewReader(c.data))
		if !errors.Is(err, ErrCalibration) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want ErrCalibration containing %q", c.name, err, c.want)
		}
	}
	p := filepath.Join(t.TempDir(), "bad.json")
	os.WriteFile(p, []byte("{}"), 0o644)
	if _, err := LoadCalibration(p); err == nil || !strings.Contains(err.Error(), p) {
		t.Errorf("LoadCalibration error %v does not name the file", err)
	}
}

func TestCachedCalibration(t *testing.T) {
	dir := t.TempDir()
	m := testCalibration().MeasuredOn
	c, err := CachedCalibration(dir, m)
	if err != nil || c.Source != "default" || !strings.Contains(c.Note, "bench calibrate") {
		t.Fatalf("empty cache: %v, source %q note %q; want the default saying so", err, c.Source, c.Note)
	}
	older := testCalibration()
	older.MeasuredOn.DecodeCommit = "fedcba9876543210"
	if err := older.Save(CalibrationPath(dir, older.MeasuredOn)); err != nil {
		t.Fatal(err)
	}
	c, err = CachedCalibration(dir, m)
	if err != nil || c.Source != "measured" || !strings.Contains(c.Note, "fedcba987654") {
		t.Fatalf("same hardware, other decoder: %v, note %q; want it used and said", err, c.Note)
	}
	exact := testCalibration()
	exact.MAPE["all"] = 0.11
	if err := exact.Save(CalibrationPath(dir, m)); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	os.Chtimes(CalibrationPath(dir, older.MeasuredOn), now.Add(time.Hour), now.Add(time.Hour))
	c, err = CachedCalibration(dir, m)
	if err != nil || c.MAPE["all"] != 0.11 || c.Note != "" {
		t.Fatalf("exact match: %v, mape %v note %q; want the exact one", err, c.MAPE["all"], c.Note)
	}
	other := m
	other.Host = "elsewhere"
	if c, _ := CachedCalibration(dir, other); c.Source != "default" {
		t.Errorf("other hardware got calibration %q, want the default", c.Source)
	}
	os.WriteFile(CalibrationPath(dir, m), []byte("garbage"), 0o644)
	if _, err := CachedCalibration(dir, m); err == nil {
		t.Error("a corrupt cached calibration was silently ignored")
	} else if msg := err.Error(); !strings.Contains(msg, CalibrationPath(dir, m)) || !strings.Contains(msg, "rerun datahelix bench calibrate") || !strings.Contains(msg, "delete the file") {
		t.Errorf("corrupt cached calibration: %q, want the file and how to replace or delete it", msg)
	}
	// The same for the newest one of the same hardware.
	os.Remove(CalibrationPath(dir, m))
	os.WriteFile(CalibrationPath(dir, older.MeasuredOn), []byte("{"), 0o644)
	if _, err := CachedCalibration(dir, m); err == nil || !strings.Contains(err.Error(), "rerun datahelix bench calibrate") {
		t.Errorf("corrupt calibration of another decoder: %v, want how to replace it", err)
	}
}

func TestMachineKey(t *testing.T) {
	a := machine.Machine{Host: "h", CPU: "c", Cores: 2, OS: "linux", Arch: "amd64", Commit: "1111", DecodeCommit: "aaaaaaaaaaaaaaaa"}
	b := a
	b.Commit = "2222" // commits outside decode/ keep the calibration
	if a.Key() != b.Key() {
		t.Errorf("keys %s and %s differ for the same decoder", a.Key(), b.Key())
	}
	b.DecodeCommit = "bbbbbbbbbbbbbbbb"
	ha, _, _ := strings.Cut(a.Key(), "-")
	hb, _, _ := strings.Cut(b.Key(), "-")
	if a.Key() == b.Key() || ha != hb {
		t.Errorf("keys %s, %s: want the same hardware part and different decoder parts", a.Key(), b.Key())
	}
	b.Cores = 4
	if hc, _, _ := strings.Cut(b.Key(), "-"); hc == ha {
		t.Error("a different core count gave the same hardware key")
	}
	if m := machine.This(t.Context()); m.Cores < 1 || m.OS == "" || m.GoVersion == "" {
		t.Errorf("ThisMachine = %+v", m)
	}
}

func FuzzReadCalibration(f *testing.F) {
	p := filepath.Join(f.TempDir(), "c.json")
	testCalibration().Save(p)
	data, _ := os.ReadFile(p)
	f.Add(data)
	f.Add([]byte(`{"cost":{"coefficients":{}},"mape":{"all":0.1},"bits_per_pixel":{"jpeg":1,"png":1,"webp":1}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ReadCalibration(bytes.NewReader(data))
		if err != nil {
			return
		}
		// An accepted calibration must price samples without panicking.
		if s := c.Sigma("video/h264"); !(s >= 0) || math.IsInf(s, 0) {
			t.Fatalf("sigma %v", s)
		}
		spec := &genSpec{Kind: "image", Images: []genImage{{Width: 640, Height: 480, Format: "jpg", Quality: 3, Content: "life"}}}
		rec, err := syntheticRecord(spec, c.BitsPerPixel)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Bytes <= 0 {
			t.Fatalf("record bytes %d", rec.Bytes)
		}
	})
}
