// Package costmodel predicts the CPU time a sample takes to prepare from
// its record (decoding.Record), before decoding: one linear model per
// modality and codec or image format, started from a Calibration and
// learning online from measured decode times. Its estimates are integer
// microseconds of a reference CPU, which the planner compares across
// ranks; SpeedFactor says how fast this CPU is against it.
package costmodel

import (
	"math"
	"sort"
	"sync"

	"github.com/datahelix/datahelix/internal/decoding"
	"gonum.org/v1/gonum/mat"
)

// speedOne is the fixed-point scale of relativeSpeed: speedOne means as
// fast as the reference CPU (it equals plan.One).
const speedOne = 1 << 16

// Tuning of the online fit.
const (
	// priorWeight is how many observations' worth of weight the
	// calibration has: the fit leaves it after a few dozen samples.
	priorWeight = 4.0
	// forgetting discounts old observations of a key, so the fit follows
	// slow drift (effective memory about 2000 observations).
	forgetting = 0.9995
	// huberRelative bounds the influence of outliers: an observation
	// whose relative residual exceeds it is down-weighted.
	huberRelative = 0.5
	// speedAlpha is the EWMA weight of the speed factor after its first
	// 1/speedAlpha observations (which are averaged).
	speedAlpha = 0.05
	// speedStep bounds one observation's change of the log speed factor.
	speedStep = 0.7 // ln 2
)

// Model predicts a sample's preparation time in integer microseconds
// from its record. It holds one linear model per key — modality and codec
// (video/h264, video/vp9, ...) or image format (image/jpeg, ...),
// document, text — over the features of costFeatures, fitted online by
// weighted least squares on relative error (so short and long samples
// count alike) with non-negative coefficients, regularized toward the
// calibration it starts from. A speed factor (measured / predicted, a
// robust EWMA) tracks how much slower this rank runs than the model.
//
// Estimate is in reference microseconds (the calibration's CPU, corrected
// by what the model learned); Predict is this rank's expected wall time,
// Estimate times the speed factor. Its methods are safe for concurrent
// use.
type Model struct {
	mu       sync.Mutex
	opts     Options
	cal      *Calibration
	fits     map[string]*costFit
	logSpeed float64 // log of measured / estimated
	speedN   int     // observations behind logSpeed
	observed int     // Observe calls
	warmup   int     // observations before errors count
	errs     map[string]*errStat
}

// costFit is the online least-squares state of one key.
type costFit struct {
	Prior featureVector                             `json:"prior"`
	XTX   [numCostFeatures][numCostFeatures]float64 `json:"xtx"` // Σ w x xᵀ, w = 1/y² (times Huber and forgetting)
	XTY   featureVector                             `json:"xty"` // Σ w x y
	N     float64                                   `json:"n"`   // discounted observation count
	Count int                                       `json:"count"`

	coef  featureVector
	dirty bool
}

// errStat accumulates absolute percentage errors.
type errStat struct {
	Sum   float64 `json:"sum"`
	Count int     `json:"count"`
}

// New returns a model warm-started from cal (DefaultCalibration
// when nil), for DefaultOptions, counting errors after 200
// observations.
func New(cal *Calibration) *Model {
	if cal == nil {
		cal = DefaultCalibration()
	}
	return &Model{opts: DefaultOptions(), cal: cal, fits: map[string]*costFit{}, warmup: 200, errs: map[string]*errStat{}}
}

// SetOptions sets the decode options estimates are for; zero fields take
// DefaultOptions values.
func (m *Model) SetOptions(o Options) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.opts = o.withDefaults()
}

// Options returns the decode options estimates are for.
func (m *Model) Options() Options {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.opts
}

// SetWarmup sets how many observations pass before MAPE counts errors.
func (m *Model) SetWarmup(n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.warmup = max(n, 0)
}

// Estimate returns the sample's preparation cost in reference
// microseconds (at least 1).
func (m *Model) Estimate(r *decoding.Record) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	key, x := costFeatures(r, m.opts)
	return toMicros(m.fit(key).predict(x))
}

// Predict returns the sample's expected preparation time on this rank in
// microseconds: Estimate times the speed factor.
func (m *Model) Predict(r *decoding.Record) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	key, x := costFeatures(r, m.opts)
	return toMicros(m.fit(key).predict(x) * math.Exp(m.logSpeed))
}

func toMicros(us float64) int64 {
	if !(us >= 1) { // also NaN
		return 1
	}
	return int64(math.Min(math.Round(us), 1<<53))
}

// Observe feeds the measured preparation time of a sample. The error of
// the prediction made before learning from it is recorded (after the
// warm-up), then the speed factor and the sample's model are updated.
// Non-positive measurements are ignored.
func (m *Model) Observe(r *decoding.Record, measuredMicros int64) {
	if measuredMicros <= 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	key, x := costFeatures(r, m.opts)
	f := m.fit(key)
	y := float64(measuredMicros)
	est := math.Max(f.predict(x), 1)
	m.observed++
	if m.observed > m.warmup {
		e := m.errs[key]
		if e == nil {
			e = &errStat{}
			m.errs[key] = e
		}
		e.Sum += math.Abs(est*math.Exp(m.logSpeed)-y) / y
		e.Count++
	}
	// Speed factor: robust EWMA of log(measured / estimated).
	alpha := math.Max(1/float64(m.speedN+1), speedAlpha)
	step := math.Max(-speedStep, math.Min(speedStep, math.Log(y/est)-m.logSpeed))
	m.logSpeed += alpha * step
	m.speedN++
	f.add(x, y/math.Exp(m.logSpeed), est)
}

// fit returns the model of key, creating it from the calibration.
func (m *Model) fit(key string) *costFit {
	f := m.fits[key]
	if f == nil {
		f = &costFit{Prior: m.cal.prior(key)}
		f.coef = f.Prior
		m.fits[key] = f
	}
	if f.dirty {
		f.solve()
	}
	return f
}

func (f *costFit) predict(x featureVector) float64 {
	s := 0.0
	for i := range x {
		s += f.coef[i] * x[i]
	}
	return s
}

// add accumulates one observation with target y (reference µs); est is
// the current prediction, for down-weighting outliers.
func (f *costFit) add(x featureVector, y, est float64) {
	w := 1 / (y * y)
	if r := math.Abs(y-est) / y; f.Count >= 20 && r > huberRelative {
		w *= huberRelative / r
	}
	for i := range f.XTX {
		f.XTY[i] = f.XTY[i]*forgetting + w*x[i]*y
		for j := i; j < len(x); j++ {
			v := f.XTX[i][j]*forgetting + w*x[i]*x[j]
			f.XTX[i][j], f.XTX[j][i] = v, v
		}
	}
	f.N = f.N*forgetting + 1
	f.Count++
	f.dirty = true
}

// solve finds the coefficients minimising Σ w (y - x·β)² plus a ridge
// penalty pulling β toward the prior, worth priorWeight average
// observations per feature, subject to β >= 0: the unconstrained
// solution by Cholesky (gonum), and projected coordinate descent on the
// same quadratic when that has negative coefficients.
func (f *costFit) solve() {
	f.dirty = false
	if f.N <= 0 {
		f.coef = f.Prior
		return
	}
	const n = numCostFeatures
	var trace float64
	for i := 0; i < n; i++ {
		trace += f.XTX[i][i]
	}
	h := mat.NewSymDense(n, nil)
	g := mat.NewVecDense(n, nil)
	for i := 0; i < n; i++ {
		// The ridge scales with the feature's own average weight, with a
		// floor so that features never observed stay at the prior.
		p := priorWeight*f.XTX[i][i]/f.N + 1e-9*trace/n + 1e-300
		for j := i; j < n; j++ {
			h.SetSym(i, j, f.XTX[i][j])
		}
		h.SetSym(i, i, f.XTX[i][i]+p)
		g.SetVec(i, f.XTY[i]+p*f.Prior[i])
	}
	var beta featureVector
	var chol mat.Cholesky
	ok := chol.Factorize(h)
	if ok {
		var b mat.VecDense
		if err := chol.SolveVecTo(&b, g); err != nil {
			ok = false
		} else {
			for i := range beta {
				beta[i] = b.AtVec(i)
				ok = ok && finiteNonNegative(beta[i])
			}
		}
	}
	if !ok {
		beta = projectedDescent(h, g, beta)
	}
	f.coef = beta
}

// projectedDescent minimises ½βᵀHβ - gᵀβ over β >= 0 by cyclic coordinate
// descent, starting from start clamped to the feasible set.
func projectedDescent(h *mat.SymDense, g *mat.VecDense, start featureVector) featureVector {
	beta := start
	for i := range beta {
		if !finiteNonNegative(beta[i]) {
			beta[i] = 0
		}
	}
	for sweep := 0; sweep < 1000; sweep++ {
		change, size := 0.0, 0.0
		for i := range beta {
			hii := h.At(i, i)
			if hii <= 0 {
				continue
			}
			r := g.AtVec(i)
			for j := range beta {
				if j != i {
					r -= h.At(i, j) * beta[j]
				}
			}
			v := math.Max(0, r/hii)
			change += math.Abs(v - beta[i])
			size += v
			beta[i] = v
		}
		if change <= 1e-12*size {
			break
		}
	}
	return beta
}

// SpeedFactor returns measured / estimated time on this rank (a robust
// EWMA): above 1 the rank runs slower than its estimates.
func (m *Model) SpeedFactor() float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return math.Exp(m.logSpeed)
}

// relativeSpeed returns this rank's speed relative to the reference CPU in
// fixed point (speedOne = as fast), the inverse of SpeedFactor: what a
// planner multiplies by its worker count to get a capacity.
func (m *Model) relativeSpeed() int64 {
	return max(1, int64(math.Round(speedOne/m.SpeedFactor())))
}

// MAPE returns the mean absolute percentage error of the predictions made
// before each observation after the warm-up — every one was made on a
// sample the model had not learned from — as a fraction (0.1 = 10 %), or
// NaN before any such observation.
func (m *Model) MAPE() float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var s errStat
	for _, e := range m.errs {
		s.Sum += e.Sum
		s.Count += e.Count
	}
	return s.mape()
}

func (e errStat) mape() float64 {
	if e.Count == 0 {
		return math.NaN()
	}
	return e.Sum / float64(e.Count)
}

// KeyError is the prediction error of one model key.
type KeyError struct {
	Key   string
	Count int
	MAPE  float64
}

// Errors returns MAPE per model key, sorted by key.
func (m *Model) Errors() []KeyError {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]KeyError, 0, len(m.errs))
	for k, e := range m.errs {
		out = append(out, KeyError{Key: k, Count: e.Count, MAPE: e.mape()})
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Key < out[b].Key })
	return out
}

// Key returns the model key a record's cost is predicted with, such as
// "video/h264" or "image/jpeg".
func (m *Model) Key(r *decoding.Record) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	key, _ := costFeatures(r, m.opts)
	return key
}

// Calibration returns the coefficients learned so far, scaled by the speed
// factor (as measured on this rank), as a calibration to warm-start later
// runs from.
func (m *Model) Calibration(machine string) *Calibration {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := &Calibration{Machine: machine, Options: m.opts, Coefficients: map[string]featureVector{}}
	s := math.Exp(m.logSpeed)
	for k, v := range m.cal.Coefficients {
		c.Coefficients[k] = v
	}
	for k := range m.fits {
		coef := m.fit(k).coef
		for i := range coef {
			coef[i] *= s
		}
		c.Coefficients[k] = coef
	}
	return c
}
