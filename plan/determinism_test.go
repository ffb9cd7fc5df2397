package plan

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime"
	"sync"
	"testing"
)

// determinismInputs draws inputs of every mode and shape, each as the
// allgather buffer every rank would decode.
func determinismInputs(t *testing.T) [][]byte {
	rng := rand.New(rand.NewPCG(11, 12))
	var bufs [][]byte
	for i := range 40 {
		n, b := 1+rng.IntN(40), 1+rng.IntN(16)
		if i%10 == 0 {
			n, b = 256, 32
		}
		o := genOpts{mode: Mode(i % int(numModes)), heavy: i%3 != 0, sigma: 0.4 + rng.Float64(), maxCost: 1000,
			progress: i%2 == 0, capSpread: float64(1 + i%4), deadline: rng.Int64N(50_000), latency: 5, margin: rng.Int64N(500),
			train: i%3 != 1}
		if i%4 == 0 {
			o.bandwidth = One
		}
		bufs = append(bufs, encodeInput(t, genInput(rng, n, b, o)))
	}
	return bufs
}

// planAll decodes and plans every buffer with one Planner, reusing it and
// the plan across inputs in the given order, and returns copies of the
// plans indexed like bufs.
func planAll(bufs [][]byte, order []int) ([]*Plan, error) {
	var pl Planner
	var p Plan
	var in Input
	out := make([]*Plan, len(bufs))
	for _, i := range order {
		if err := DecodeInput(bufs[i], &in); err != nil {
			return nil, err
		}
		if err := pl.Compute(&in, &p); err != nil {
			return nil, err
		}
		out[i] = clonePlan(&p)
	}
	return out, nil
}

// clonePlan copies the exported content of p.
func clonePlan(p *Plan) *Plan {
	c := *p
	c.Assign = append([]int32(nil), p.Assign...)
	c.Order = append([]int32(nil), p.Order...)
	c.Finish = append([]int64(nil), p.Finish...)
	c.Lateness = append([]int64(nil), p.Lateness...)
	c.Exchanges = append([]Exchange(nil), p.Exchanges...)
	c.Moves = nil
	for _, m := range p.Moves {
		m.Samples = append([]int32(nil), m.Samples...)
		c.Moves = append(c.Moves, m)
	}
	c.recv, c.sendAt, c.recvAt, c.moveSamples = nil, nil, nil, nil
	return &c
}

func samePlan(a, b *Plan) error {
	if a.Hash != b.Hash {
		return fmt.Errorf("hash %#x, want %#x", a.Hash, b.Hash)
	}
	if !reflect.DeepEqual(a, b) {
		return fmt.Errorf("plans differ with equal hashes")
	}
	return nil
}

// TestDeterminism plans the same inputs on goroutines locked to distinct
// OS threads, under several GOMAXPROCS, with reused and fresh planners in
// different orders, and requires bit-identical plans and hashes.
func TestDeterminism(t *testing.T) {
	bufs := determinismInputs(t)
	forward := make([]int, len(bufs))
	backward := make([]int, len(bufs))
	for i := range bufs {
		forward[i], backward[i] = i, len(bufs)-1-i
	}
	want, err := planAll(bufs, forward)
	if err != nil {
		t.Fatal(err)
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, procs := range []int{1, 2, 4, 8} {
		runtime.GOMAXPROCS(procs)
		const workers = 4
		var wg sync.WaitGroup
		errs := make([]error, workers)
		for w := range workers {
			wg.Go(func() {
				runtime.LockOSThread() // each worker plans on its own OS thread
				defer runtime.UnlockOSThread()
				order := forward
				if w%2 == 1 {
					order = backward
				}
				got, err := planAll(bufs, order)
				if err != nil {
					errs[w] = err
					return
				}
				for i := range got {
					if err := samePlan(got[i], want[i]); err != nil {
						errs[w] = fmt.Errorf("input %d: %v", i, err)
						return
					}
				}
			})
		}
		wg.Wait()
		for w, err := range errs {
			if err != nil {
				t.Errorf("GOMAXPROCS %d, worker %d: %v", procs, w, err)
			}
		}
	}
	// A fresh Planner per input gives the same plans as a reused one.
	for i, buf := range bufs {
		var in Input
		if err := DecodeInput(buf, &in); err != nil {
			t.Fatal(err)
		}
		p, err := Compute(&in)
		if err != nil {
			t.Fatal(err)
		}
		if err := samePlan(clonePlan(p), want[i]); err != nil {
			t.Errorf("input %d, fresh planner: %v", i, err)
		}
	}
}

// TestHashSeesChanges checks that the hash covers the decode orders, the
// predictions, the step and the mode.
func TestHashSeesChanges(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	in := genInput(rng, 4, 3, genOpts{heavy: true, progress: true})
	p, err := Compute(in)
	if err != nil {
		t.Fatal(err)
	}
	base := p.Hash
	if p.hash() != base {
		t.Fatalf("hash is not a function of the plan")
	}
	for _, c := range []struct {
		name   string
		mutate func(*Plan)
	}{
		{"two samples swap ranks", func(q *Plan) { q.Order[0], q.Order[3] = q.Order[3], q.Order[0] }},
		{"decode order", func(q *Plan) { q.Order[0], q.Order[1] = q.Order[1], q.Order[0] }},
		{"finish", func(q *Plan) { q.Finish[2]++ }},
		{"step", func(q *Plan) { q.Step++ }},
		{"mode", func(q *Plan) { q.Mode = ModeStatic }},
	} {
		q := clonePlan(p)
		c.mutate(q)
		if q.hash() == base {
			t.Errorf("%s: hash unchanged", c.name)
		}
	}
}
