package costmodel

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/datahelix/datahelix/decode"
	"github.com/datahelix/datahelix/internal/decoding"
	"github.com/datahelix/datahelix/internal/transform"
	"github.com/datahelix/datahelix/internal/video"
	"gonum.org/v1/gonum/mat"
)

// syntheticVideo returns a random clip record: 240p to 1080p, 2 to 120 s
// at 25 fps, GOPs of 12 to 250 frames, frame sizes proportional to pixels
// (keyframes 5x larger).
func syntheticVideo(rng *rand.Rand, codec string) *decoding.Record {
	sizes := [][2]int{{426, 240}, {640, 360}, {854, 480}, {1280, 720}, {1920, 1080}}
	wh := sizes[rng.IntN(len(sizes))]
	frames := 50 + rng.IntN(3000)
	gop := 12 + rng.IntN(238)
	v := &video.Track{Container: "mp4", Codec: codec, Width: wh[0], Height: wh[1], Timescale: 12800, Duration: int64(frames) * 512, Frames: frames}
	per := uint32(wh[0] * wh[1] / 40)
	for i := 0; i < frames; i++ {
		b := per/2 + uint32(rng.IntN(int(per)))
		if i%gop == 0 {
			v.Keyframes = append(v.Keyframes, i)
			b *= 5
		}
		v.FrameBytes = append(v.FrameBytes, b)
		v.FramePTS = append(v.FramePTS, int64(i)*512)
		v.Bytes += int64(b)
	}
	return &decoding.Record{Key: "clip", Modality: decode.ModalityVideo, Bytes: v.Bytes, Video: v}
}

func syntheticImage(rng *rand.Rand) *decoding.Record {
	w, h := 200+rng.IntN(3800), 200+rng.IntN(2000)
	im := decoding.ImageInfo{Format: "jpeg", Width: w, Height: h, Bytes: w * h / 8, Progressive: rng.IntN(4) == 0, Subsampling: "420"}
	return &decoding.Record{Key: "img", Modality: decode.ModalityImage, Bytes: int64(im.Bytes), Images: []decoding.ImageInfo{im}}
}

// trueCost is the synthetic ground truth: a linear cost with coefficients
// unlike the default calibration's, times multiplicative noise.
func trueCost(rng *rand.Rand, r *decoding.Record, slow, noise float64) int64 {
	truth := map[string]featureVector{
		"video/h264": {3000, 1800, 900, 2500, 1000, 100},
		"video/vp9":  {2500, 6000, 500, 2500, 1000, 400},
		"image/jpeg": {200, 9000, 1000, 3000, 4000, 100},
	}
	key, x := costFeatures(r, DefaultOptions())
	c := 0.0
	for i, b := range truth[key] {
		c += b * x[i]
	}
	return int64(c * slow * math.Exp(noise*rng.NormFloat64()))
}

// heldOutMAPE returns the mean absolute percentage error of Predict on n
// fresh samples, without learning from them.
func heldOutMAPE(m *Model, rng *rand.Rand, gen func() *decoding.Record, slow, noise float64, n int) float64 {
	sum := 0.0
	for i := 0; i < n; i++ {
		r := gen()
		y := float64(trueCost(rng, r, slow, noise))
		sum += math.Abs(float64(m.Predict(r))-y) / y
	}
	return sum / float64(n)
}

func TestCostModelLearns(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	codecs := []string{"h264", "vp9"}
	gen := func() *decoding.Record {
		if rng.IntN(3) == 0 {
			return syntheticImage(rng)
		}
		return syntheticVideo(rng, codecs[rng.IntN(2)])
	}
	m := New(nil)
	const noise = 0.1
	before := heldOutMAPE(m, rng, gen, 1.5, noise, 300)
	for i := 0; i < 200; i++ {
		r := gen()
		m.Observe(r, trueCost(rng, r, 1.5, noise))
	}
	after := heldOutMAPE(m, rng, gen, 1.5, noise, 300)
	t.Logf("held-out MAPE %.3f before learning, %.3f after 200 samples", before, after)
	// With 10 % log-normal noise the best possible MAPE is about 8 %.
	if after > 0.15 || after > before/2 {
		t.Errorf("held-out MAPE %.3f after 200 samples (%.3f before), want <= 0.15 and halved", after, before)
	}
	for key, f := range m.fits {
		for i, c := range f.coef {
			if c < 0 {
				t.Errorf("%s coefficient %d = %v < 0", key, i, c)
			}
		}
	}
	if s := m.SpeedFactor(); s <= 0 || math.IsNaN(s) {
		t.Errorf("SpeedFactor() = %v", s)
	}
	// Prequential MAPE counts only observations after the warm-up.
	m.SetWarmup(200)
	if got := m.MAPE(); !math.IsNaN(got) {
		t.Errorf("MAPE() = %v before any post-warm-up observation, want NaN", got)
	}
	for i := 0; i < 100; i++ {
		r := gen()
		m.Observe(r, trueCost(rng, r, 1.5, noise))
	}
	if got := m.MAPE(); !(got < 0.15) {
		t.Errorf("prequential MAPE() = %v, want < 0.15", got)
	}
	var count int
	for _, e := range m.Errors() {
		count += e.Count
	}
	if count != 100 {
		t.Errorf("Errors() count %d observations, want 100", count)
	}
}

func TestCostModelSpeedFactorTracksSlowdown(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	gen := func() *decoding.Record { return syntheticVideo(rng, "h264") }
	m := New(nil)
	for i := 0; i < 300; i++ {
		r := gen()
		m.Observe(r, trueCost(rng, r, 1, 0.05))
	}
	s1 := m.SpeedFactor()
	// The rank becomes 2x slower (another job shares its cores).
	for i := 0; i < 80; i++ {
		r := gen()
		m.Observe(r, trueCost(rng, r, 2, 0.05))
	}
	t.Logf("speed factor %.3f before, %.3f after the slowdown", s1, m.SpeedFactor())
	if ratio := m.SpeedFactor() / s1; ratio < 1.7 || ratio > 2.3 {
		t.Errorf("speed factor moved by %.2fx after a 2x slowdown, want about 2x", ratio)
	}
	if got := heldOutMAPE(m, rng, gen, 2, 0.05, 200); got > 0.12 {
		t.Errorf("held-out MAPE after the slowdown %.3f, want <= 0.12", got)
	}
	if rs := m.relativeSpeed(); math.Abs(float64(rs)*m.SpeedFactor()/speedOne-1) > 1e-3 {
		t.Errorf("relativeSpeed() = %d, not speedOne/SpeedFactor()", rs)
	}
}

func TestCostModelOutliers(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	gen := func() *decoding.Record { return syntheticVideo(rng, "vp9") }
	m := New(nil)
	for i := 0; i < 300; i++ {
		r := gen()
		y := trueCost(rng, r, 1, 0.05)
		if i%20 == 7 {
			y *= 10 // a preempted worker
		}
		m.Observe(r, y)
	}
	if got := heldOutMAPE(m, rng, gen, 1, 0.05, 200); got > 0.12 {
		t.Errorf("held-out MAPE with 5%% outliers %.3f, want <= 0.12", got)
	}
}

// nnlsReference solves min ½βᵀHβ - gᵀβ, β >= 0, by trying every set of
// free variables: the unconstrained optimum on the set, kept when it is
// feasible and best.
func nnlsReference(h *mat.SymDense, g *mat.VecDense) (featureVector, float64) {
	n := numCostFeatures
	best, bestObj := featureVector{}, 0.0
	for set := 1; set < 1<<n; set++ {
		var idx []int
		for i := 0; i < n; i++ {
			if set&(1<<i) != 0 {
				idx = append(idx, i)
			}
		}
		hs := mat.NewDense(len(idx), len(idx), nil)
		gs := mat.NewVecDense(len(idx), nil)
		for a, i := range idx {
			gs.SetVec(a, g.AtVec(i))
			for b, j := range idx {
				hs.Set(a, b, h.At(i, j))
			}
		}
		var x mat.VecDense
		if err := x.SolveVec(hs, gs); err != nil {
			continue
		}
		var beta featureVector
		feasible := true
		for a, i := range idx {
			beta[i] = x.AtVec(a)
			feasible = feasible && beta[i] >= 0
		}
		if obj := quadObjective(h, g, beta); feasible && obj < bestObj {
			best, bestObj = beta, obj
		}
	}
	return best, bestObj
}

func quadObjective(h *mat.SymDense, g *mat.VecDense, beta featureVector) float64 {
	obj := 0.0
	for i := range beta {
		obj -= g.AtVec(i) * beta[i]
		for j := range beta {
			obj += 0.5 * beta[i] * h.At(i, j) * beta[j]
		}
	}
	return obj
}

func TestProjectedDescentMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	n := numCostFeatures
	for iter := 0; iter < 300; iter++ {
		a := mat.NewDense(n+3, n, nil)
		for i := 0; i < n+3; i++ {
			for j := 0; j < n; j++ {
				a.Set(i, j, rng.NormFloat64())
			}
		}
		var h mat.SymDense
		h.SymOuterK(1, a.T())
		for i := 0; i < n; i++ {
			h.SetSym(i, i, h.At(i, i)+0.01)
		}
		g := mat.NewVecDense(n, nil)
		for i := 0; i < n; i++ {
			g.SetVec(i, rng.NormFloat64()*5)
		}
		got := projectedDescent(&h, g, featureVector{})
		_, wantObj := nnlsReference(&h, g)
		for i, v := range got {
			if v < 0 {
				t.Fatalf("coefficient %d = %v < 0", i, v)
			}
		}
		if obj := quadObjective(&h, g, got); obj > wantObj+1e-6*math.Max(1, math.Abs(wantObj)) {
			t.Fatalf("objective %v, reference optimum %v", obj, wantObj)
		}
	}
}

func TestCostModelSaveRestore(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	m := New(nil)
	m.SetOptions(Options{Frames: 16, Size: 112, MaxTasks: 2})
	m.SetWarmup(10)
	var recs []*decoding.Record
	for i := 0; i < 60; i++ {
		r := syntheticVideo(rng, "h264")
		if i%2 == 1 {
			r = syntheticImage(rng)
		}
		recs = append(recs, r)
		m.Observe(r, trueCost(rng, r, 1.2, 0.1))
	}
	path := filepath.Join(t.TempDir(), "model.json")
	if err := m.Save(path); err != nil {
		t.Fatal(err)
	}
	back, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if back.Options() != m.Options() || back.SpeedFactor() != m.SpeedFactor() || back.MAPE() != m.MAPE() {
		t.Errorf("restored options %+v speed %v MAPE %v; want %+v %v %v", back.Options(), back.SpeedFactor(), back.MAPE(), m.Options(), m.SpeedFactor(), m.MAPE())
	}
	for _, r := range recs {
		if a, b := m.Estimate(r), back.Estimate(r); a != b {
			t.Fatalf("Estimate %d after restore, %d before", b, a)
		}
	}
	// Both continue identically.
	for _, r := range recs[:10] {
		y := trueCost(rng, r, 1.2, 0.1)
		m.Observe(r, y)
		back.Observe(r, y)
	}
	if a, b := m.Predict(recs[0]), back.Predict(recs[0]); a != b {
		t.Errorf("Predict diverged after restore: %d vs %d", b, a)
	}
	a, _ := json.Marshal(m)
	b, _ := json.Marshal(back)
	if !bytes.Equal(a, b) {
		t.Errorf("states differ after the same observations")
	}
}

func TestCostModelStateRejected(t *testing.T) {
	good, err := json.Marshal(New(nil))
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]string{
		"not json":      "{",
		"version":       `{"version":9}`,
		"no cal":        `{"version":1}`,
		"negative coef": `{"version":1,"calibration":{"coefficients":{"text":[-1,0,0,0,0,0]}}}`,
		"nan speed":     `{"version":1,"calibration":{},"log_speed":1e999}`,
		"bad fit":       `{"version":1,"calibration":{},"fits":{"text":{"xtx":[[1,5],[5,1]],"n":1}}}`,
		"huge options":  `{"version":1,"calibration":{},"options":{"Frames":99999999}}`,
	}
	for name, s := range tests {
		m := New(nil)
		if err := m.UnmarshalJSON([]byte(s)); !errors.Is(err, ErrBadCalibration) {
			t.Errorf("%s: err %v, want ErrBadCalibration", name, err)
		}
		if got, _ := json.Marshal(m); !bytes.Equal(got, good) {
			t.Errorf("%s: the rejected state changed the model", name)
		}
	}
}

func TestDecodedImagePixels(t *testing.T) {
	tests := []struct {
		im   decoding.ImageInfo
		want float64
	}{
		{decoding.ImageInfo{Format: "jpeg", Width: 500, Height: 375}, 313 * 235},    // 5/8
		{decoding.ImageInfo{Format: "jpeg", Width: 3840, Height: 2160}, 480 * 270},  // 1/8
		{decoding.ImageInfo{Format: "jpeg", Width: 300, Height: 200}, 300 * 200},    // too small to scale
		{decoding.ImageInfo{Format: "png", Width: 3840, Height: 2160}, 3840 * 2160}, // no DCT scaling
		{decoding.ImageInfo{Format: "jpeg", Width: 1000, Height: 230}, 1000 * 230},  // one side too short
		{decoding.ImageInfo{Format: "jpeg", Width: 2000, Height: 1000}, 500 * 250},  // 2/8
		{decoding.ImageInfo{Format: "jpeg", Width: 0, Height: 0}, 0},
	}
	for _, tt := range tests {
		if got := decodedImagePixels(tt.im, 224, transform.Spec{}); got != tt.want {
			t.Errorf("decodedImagePixels(%+v) = %v, want %v", tt.im, got, tt.want)
		}
	}
}

// FuzzCostModelState feeds arbitrary JSON to the state loader: a state it
// accepts must give finite, positive estimates.
func FuzzCostModelState(f *testing.F) {
	rng := rand.New(rand.NewPCG(1, 1))
	m := New(nil)
	for i := 0; i < 30; i++ {
		r := syntheticVideo(rng, "h264")
		m.Observe(r, trueCost(rng, r, 1, 0.1))
	}
	seed, _ := json.Marshal(m)
	f.Add(seed)
	fresh, _ := json.Marshal(New(nil))
	f.Add(fresh)
	probe := syntheticVideo(rng, "h264")
	f.Fuzz(func(t *testing.T, data []byte) {
		m := New(nil)
		if err := m.UnmarshalJSON(data); err != nil {
			return
		}
		if e := m.Estimate(probe); e < 1 {
			t.Fatalf("Estimate = %d", e)
		}
		m.Observe(probe, 1000)
		if p := m.Predict(probe); p < 1 {
			t.Fatalf("Predict = %d", p)
		}
	})
}

func TestDefaultCalibration(t *testing.T) {
	c := DefaultCalibration()
	if err := c.validate(); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"video/h264", "video/hevc", "video/vp9", "video/vp8", "video/av1", "image/jpeg", "image/png", "image/webp", "document", "text"} {
		v, ok := c.Coefficients[key]
		if !ok {
			t.Errorf("no coefficients for %s", key)
			continue
		}
		sum := 0.0
		for _, x := range v {
			sum += x
		}
		if sum <= 0 {
			t.Errorf("%s coefficients %v all zero", key, v)
		}
	}
	// A calibration survives its own JSON round trip.
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(c); err != nil {
		t.Fatal(err)
	}
	back, err := ReadCalibration(&buf)
	if err != nil || len(back.Coefficients) != len(c.Coefficients) || back.Coefficients["video/h264"] != c.Coefficients["video/h264"] {
		t.Errorf("round trip: %+v, %v", back, err)
	}
	if _, err := ReadCalibration(bytes.NewReader([]byte(`{"coefficients":{"text":[1,2,"x"]}}`))); !errors.Is(err, ErrBadCalibration) {
		t.Errorf("malformed calibration: err %v, want ErrBadCalibration", err)
	}
}
