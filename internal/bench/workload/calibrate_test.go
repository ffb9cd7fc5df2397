package workload

import (
	"os"
	"slices"
	"strings"
	"testing"
)

func TestCheckCalibratePresets(t *testing.T) {
	tests := []struct {
		names []string
		want  string // in the error; "" for none
	}{
		{CalibratePresets, ""},
		{[]string{"text"}, ""},
		{[]string{"kinetics", "text"}, ""},
		{nil, "names no preset"},
		{[]string{"nope"}, `unknown preset "nope" (have howto100m, kinetics,`},
		{[]string{"text", "nope"}, `unknown preset "nope"`},
		{[]string{"mixed"}, "mixed is a mixture of the other presets"},
		{[]string{"text", "text"}, "text named twice"},
	}
	for _, tt := range tests {
		err := CheckCalibratePresets(tt.names)
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("CheckCalibratePresets(%q) = %v, want %q", tt.names, err, tt.want)
		}
		if err != nil && strings.Contains(err.Error(), "[") {
			t.Errorf("CheckCalibratePresets(%q) = %v: a list printed as a Go slice", tt.names, err)
		}
	}
	if got, want := MissingCalibratePresets([]string{"text", "kinetics"}), []string{"howto100m", "panda70m", "webvid", "activitynet", "imagenet", "laion", "interleaved"}; !slices.Equal(got, want) {
		t.Errorf("MissingCalibratePresets = %v, want %v", got, want)
	}
	if got := MissingCalibratePresets(CalibratePresets); got != nil {
		t.Errorf("MissingCalibratePresets(all) = %v, want none", got)
	}
}

// TestCalibrateChecksPresetsFirst checks that a bad preset anywhere in
// the list fails before any preset is generated or decoded.
func TestCalibrateChecksPresetsFirst(t *testing.T) {
	for _, names := range [][]string{{"text", "nope"}, {"text", "mixed"}} {
		dir := t.TempDir()
		_, err := Calibrate(t.Context(), CalibrateConfig{CacheDir: dir, Presets: names, Samples: 3, Repeat: 1})
		if err == nil {
			t.Fatalf("Calibrate(%q) succeeded", names)
		}
		if ents, _ := os.ReadDir(dir); len(ents) > 0 {
			t.Errorf("Calibrate(%q) = %v after writing %d entries into its cache: want it refused first", names, err, len(ents))
		}
	}
}
