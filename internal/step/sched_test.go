package step

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestEDFTakesEarliestTask checks EDF against a dumb reference on random
// batches: every task handed out is the minimum, by (step, order, part),
// of those not yet handed out, and every task comes out exactly once.
func TestEDFTakesEarliestTask(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 200; trial++ {
		e := NewEDF(0)
		var pending []Task
		seen := map[[3]int64]bool{}
		steps := 1 + rng.IntN(5)
		for s := 0; s < steps; s++ {
			var ts []Task
			for slot := 0; slot < 1+rng.IntN(6); slot++ {
				parts := 1 + rng.IntN(3)
				for p := 0; p < parts; p++ {
					ts = append(ts, Task{Step: int64(s), Slot: slot, Order: (slot * 7) % 11, Part: p, Parts: parts, Cost: int64(1 + rng.IntN(100))})
				}
			}
			e.Add(int64(s), ts)
			pending = append(pending, ts...)
			// Interleave: take a few tasks before the next batch arrives.
			for k := rng.IntN(4); k > 0; k-- {
				got, ok := e.Next(0)
				if !ok {
					break
				}
				pending = checkMin(t, pending, got)
				seen[[3]int64{got.Step, int64(got.Slot), int64(got.Part)}] = true
			}
		}
		for {
			got, ok := e.Next(1)
			if !ok {
				break
			}
			pending = checkMin(t, pending, got)
		}
		if len(pending) != 0 {
			t.Fatalf("trial %d: %d tasks never handed out", trial, len(pending))
		}
		if w, r := e.Queued(); w != 0 {
			t.Fatalf("trial %d: Queued waiting = %d with nothing queued (running %d)", trial, w, r)
		}
	}
}

func less(a, b Task) bool {
	if a.Step != b.Step {
		return a.Step < b.Step
	}
	if a.Order != b.Order {
		return a.Order < b.Order
	}
	return a.Part < b.Part
}

func checkMin(t *testing.T, pending []Task, got Task) []Task {
	t.Helper()
	at := -1
	for i, p := range pending {
		if p == got {
			at = i
		}
		if less(p, got) {
			t.Fatalf("EDF gave %+v while %+v was due earlier", got, p)
		}
	}
	if at < 0 {
		t.Fatalf("EDF gave %+v, which was not pending (or given twice)", got)
	}
	return append(pending[:at], pending[at+1:]...)
}

func TestEDFMemoryBudget(t *testing.T) {
	e := NewEDF(100)
	mk := func(step int64, slot int, mem int64) Task {
		return Task{Step: step, Slot: slot, Order: slot, Parts: 1, Cost: 10, Mem: mem}
	}
	e.Add(0, []Task{mk(0, 0, 80), mk(0, 1, 80)})
	e.Add(1, []Task{mk(1, 0, 30)})
	// Step 0 is the earliest undelivered batch: it may exceed the budget.
	for i := 0; i < 2; i++ {
		if _, ok := e.Next(0); !ok {
			t.Fatalf("task %d of the earliest batch refused", i)
		}
	}
	if e.InUse() != 160 {
		t.Errorf("in use = %d, want 160", e.InUse())
	}
	if got, ok := e.Next(0); ok {
		t.Fatalf("step 1 task %+v started over budget (160 in use, budget 100)", got)
	}
	e.Release(0)
	if e.InUse() != 0 {
		t.Errorf("in use after release = %d, want 0", e.InUse())
	}
	if got, ok := e.Next(0); !ok || got.Step != 1 {
		t.Errorf("after release: got %+v %v, want the step 1 task", got, ok)
	}
	// A split sample is charged once, on its first part.
	e.Add(2, []Task{{Step: 2, Slot: 0, Part: 0, Parts: 2, Mem: 50}, {Step: 2, Slot: 0, Part: 1, Parts: 2, Mem: 50}})
	e.Release(1)
	e.Next(0)
	e.Next(0)
	if e.InUse() != 50 {
		t.Errorf("split sample charged %d, want 50 once", e.InUse())
	}
}

// TestEDFStartsAtTheFirstStepAdded: a resumed run's first batch (step 5
// here) is the earliest undelivered one, so a sample over the budget still
// starts; the next batch waits for its release.
func TestEDFStartsAtTheFirstStepAdded(t *testing.T) {
	e := NewEDF(10)
	e.Add(5, []Task{{Step: 5, Parts: 1, Cost: 1, Mem: 80}})
	e.Add(6, []Task{{Step: 6, Parts: 1, Cost: 1, Mem: 80}})
	if got, ok := e.Next(0); !ok || got.Step != 5 {
		t.Fatalf("first batch of a resumed run: got %+v %v, want its task despite the budget", got, ok)
	}
	if got, ok := e.Next(0); ok {
		t.Fatalf("step 6 task %+v started over budget", got)
	}
	e.Release(5)
	if got, ok := e.Next(0); !ok || got.Step != 6 || e.InUse() != 80 {
		t.Errorf("after releasing step 5: got %+v %v, in use %d; want the step 6 task, 80", got, ok, e.InUse())
	}
}

func TestTorchRoundRobinPrefetchInOrder(t *testing.T) {
	const w = 2
	tr := NewTorch(w, 2)
	batch := func(step int64) []Task {
		return []Task{{Step: step, Slot: 1, Order: 1, Parts: 1, Cost: 5}, {Step: step, Slot: 0, Order: 0, Parts: 1, Cost: 7}}
	}
	for s := int64(0); s < 6; s++ {
		tr.Add(s, batch(s))
	}
	// 2 workers x prefetch 2: batches 0..3 dispatched, 0 and 2 to worker
	// 0, 1 and 3 to worker 1; batches 4, 5 wait.
	var got0, got1 []Task
	for {
		a, ok := tr.Next(0)
		if !ok {
			break
		}
		got0 = append(got0, a)
	}
	for {
		a, ok := tr.Next(1)
		if !ok {
			break
		}
		got1 = append(got1, a)
	}
	wantSteps := func(name string, got []Task, steps ...int64) {
		t.Helper()
		if len(got) != 2*len(steps) {
			t.Fatalf("%s got %d tasks, want %d", name, len(got), 2*len(steps))
		}
		for i, s := range steps {
			if got[2*i].Step != s || got[2*i+1].Step != s || got[2*i].Order != 0 || got[2*i+1].Order != 1 {
				t.Errorf("%s: tasks %d,%d = %+v %+v, want step %d in sampler order", name, 2*i, 2*i+1, got[2*i], got[2*i+1], s)
			}
		}
	}
	wantSteps("worker 0", got0, 0, 2)
	wantSteps("worker 1", got1, 1, 3)
	// Handing batch 0 to the training loop dispatches batch 4 to worker 0.
	tr.Release(0)
	if a, ok := tr.Next(1); ok {
		t.Errorf("worker 1 got %+v; batch 4 belongs to worker 0", a)
	}
	if a, ok := tr.Next(0); !ok || a.Step != 4 {
		t.Errorf("worker 0 got %+v %v, want batch 4", a, ok)
	}
	if tr.Worker(5) != 1 {
		t.Errorf("Worker(5) = %d, want 1", tr.Worker(5))
	}
}

// TestTorchStartsAtTheFirstStepAdded checks a resumed iterator: batches
// added from step 8 on are dispatched from 8, round-robin from worker 0,
// with the prefetch window counted from 8, whether or not the loader has
// first released the steps before the checkpoint.
func TestTorchStartsAtTheFirstStepAdded(t *testing.T) {
	for _, releaseFirst := range []bool{false, true} {
		tr := NewTorch(2, 2)
		if releaseFirst {
			tr.Release(7)
		}
		for s := int64(8); s < 14; s++ {
			tr.Add(s, []Task{{Step: s, Parts: 1, Cost: 3}})
		}
		var got [2][]int64
		for w := range 2 {
			for {
				x, ok := tr.Next(w)
				if !ok {
					break
				}
				got[w] = append(got[w], x.Step)
			}
		}
		want := [2][]int64{{8, 10}, {9, 11}}
		for w := range 2 {
			if !slices.Equal(got[w], want[w]) {
				t.Errorf("release first %v: worker %d got steps %v, want %v", releaseFirst, w, got[w], want[w])
			}
		}
		if waiting, _ := tr.Queued(); waiting != 2*3 {
			t.Errorf("release first %v: waiting %d, want 6 (batches 12 and 13 not dispatched)", releaseFirst, waiting)
		}
		tr.Release(8)
		if x, ok := tr.Next(0); !ok || x.Step != 12 {
			t.Errorf("release first %v: after releasing 8, worker 0 got %+v %v, want batch 12", releaseFirst, x, ok)
		}
		if tr.Worker(13) != 1 {
			t.Errorf("release first %v: Worker(13) = %d, want 1", releaseFirst, tr.Worker(13))
		}
	}
}
