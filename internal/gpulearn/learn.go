// Package gpulearn learns a GPU's step time (a gpu.Model) from the steps
// a real trainer measures, for the loader that predicts its GPU's needs
// from them (spmd's Config.LearnGPU).
package gpulearn

import (
	"math"
	"slices"
	"sync"
	"time"

	"github.com/datahelix/datahelix/gpu"
	"gonum.org/v1/gonum/mat"
)

// learnWindow is the number of recent steps a Learner fits.
const learnWindow = 64

// Learner learns a GPU's step Model from measured steps by least squares
// on what each batch held: step ≈ Base + PerSample·samples +
// PerFrame·frames + PerToken·tokens, over the last learnWindow steps. A
// coefficient the fit makes negative is dropped (set to 0) and the rest
// refitted, and a quantity that did not vary over the window keeps its
// prior coefficient, folded out of the fit. It replaces a hand-set model
// when a real trainer reports its steps.
//
// Measured steps include the wait in the gradient allreduce for the
// slowest rank, so the fit learns the job's step as this rank sees it.
type Learner struct {
	mu     sync.Mutex
	prior  gpu.Model
	model  gpu.Model
	stale  bool // obs changed since model was fitted
	obs    []observation
	next   int
	errSum float64 // sum of |predicted-measured|/measured, after warm-up
	errN   int
}

type observation struct {
	c gpu.Contents
	d time.Duration
}

// New returns a Learner that answers prior until it has fitted.
func New(prior gpu.Model) *Learner { return &Learner{prior: prior, model: prior} }

// Observe records that a step of contents c took d and scores the
// model's prediction of it (once the window is a quarter full). It is
// cheap: the fit waits for the next Model, off the training loop's path.
func (l *Learner) Observe(c gpu.Contents, d time.Duration) {
	if d <= 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.obs) >= learnWindow/4 {
		p := l.fitted().StepTime(c)
		l.errSum += math.Abs(float64(p-d)) / float64(d)
		l.errN++
	}
	o := observation{c, d}
	if len(l.obs) < learnWindow {
		l.obs = append(l.obs, o)
	} else {
		l.obs[l.next] = o
		l.next = (l.next + 1) % learnWindow
	}
	l.stale = true
}

// Model returns the fit of the steps observed so far.
func (l *Learner) Model() gpu.Model {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.fitted()
}

// fitted refits the model if steps came since the last fit; l.mu held.
func (l *Learner) fitted() gpu.Model {
	if l.stale {
		l.model, l.stale = fit(l.obs, l.prior), false
	}
	return l.model
}

// MAPE is the mean absolute percentage error of the model's prediction
// of each step before it saw it (0..1); ok is false before any.
func (l *Learner) MAPE() (mape float64, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.errN == 0 {
		return 0, false
	}
	return l.errSum / float64(l.errN), true
}

// fit is the least-squares model of obs, prior for what obs cannot tell.
func fit(obs []observation, prior gpu.Model) gpu.Model {
	if len(obs) < 2 {
		return prior
	}
	feature := func(o observation, j int) float64 {
		return [3]float64{float64(o.c.Samples), float64(o.c.Frames), float64(o.c.Tokens)}[j]
	}
	priorCoef := [3]time.Duration{prior.PerSample, prior.PerFrame, prior.PerToken}
	coef := priorCoef
	// Columns that vary over the window are fitted; the others keep
	// the prior's coefficient.
	var active []int
	for j := range 3 {
		first := feature(obs[0], j)
		for _, o := range obs[1:] {
			if feature(o, j) != first {
				active = append(active, j)
				break
			}
		}
	}
	for {
		if len(obs) < len(active)+1 {
			return prior
		}
		x := mat.NewDense(len(obs), len(active)+1, nil)
		y := mat.NewVecDense(len(obs), nil)
		for i, o := range obs {
			x.Set(i, 0, 1)
			fixed := 0.0
			for j := range 3 {
				if !slices.Contains(active, j) {
					fixed += feature(o, j) * float64(coef[j])
				}
			}
			for k, j := range active {
				x.Set(i, k+1, feature(o, j))
			}
			y.SetVec(i, float64(o.d)-fixed)
		}
		var b mat.VecDense
		if err := b.SolveVec(x, y); err != nil {
			return prior
		}
		drop := -1
		for k := range active {
			if b.AtVec(k+1) < 0 {
				drop = k
				break
			}
		}
		if drop < 0 {
			m := gpu.Model{Base: time.Duration(max(b.AtVec(0), 0))}
			for k, j := range active {
				coef[j] = time.Duration(b.AtVec(k + 1))
			}
			m.PerSample, m.PerFrame, m.PerToken = coef[0], coef[1], coef[2]
			return m
		}
		coef[active[drop]] = 0
		active = append(active[:drop:drop], active[drop+1:]...)
	}
}
