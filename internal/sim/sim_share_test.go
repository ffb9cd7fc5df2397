package sim

import (
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/datahelix/datahelix/gpu"
	"github.com/datahelix/datahelix/internal/step"
	"github.com/datahelix/datahelix/plan"
)

// TestSimSharedCoreTimeline checks processor sharing against timelines
// computed by hand. Two ranks of one worker each, one sample per step,
// one core between them: rank 0's sample costs 30 ms, rank 1's 10 ms.
// Both start at 0 at half a core; rank 1's is done at 20, when rank 0's
// has 20 ms of work left, which it then does alone: ready at 40. A fixed
// halving of every worker would give 60; a core each, 30.
func TestSimSharedCoreTimeline(t *testing.T) {
	samples := func(step int64, rank int) []Sample {
		c := []int64{30000, 10000}[rank]
		return []Sample{{ID: uint64(step*10) + uint64(rank), Bytes: 1000, Cost: c, Est: c}}
	}
	for _, tc := range []struct {
		name  string
		cpus  *CPUShare
		speed []int64
		ready [2]int64 // ms, per rank
	}{
		{"one core shared", &CPUShare{Group: []int{0, 0}, Cores: []int{1}}, nil, [2]int64{40, 20}},
		// Rank 0 at half speed: 60 ms of work, 10 done by 20, 50 alone.
		{"one core shared, rank 0 slowed", &CPUShare{Group: []int{0, 0}, Cores: []int{1}}, []int64{2 * plan.One, plan.One}, [2]int64{70, 20}},
		{"a core each", &CPUShare{Group: []int{0, 1}, Cores: []int{1, 1}}, nil, [2]int64{30, 10}},
		{"two cores for both", &CPUShare{Group: []int{0, 0}, Cores: []int{2}}, nil, [2]int64{30, 10}},
		{"no sharing", nil, nil, [2]int64{30, 10}},
		// Another process's thread takes a third of the core: rank 1's
		// sample is done at 30, when rank 0's has 20 ms left, done at
		// half a core by 70.
		{"one core shared with another process", &CPUShare{Group: []int{0, 0}, Cores: []int{1}, Others: OtherUnit}, nil, [2]int64{70, 30}},
		// One other thread between two pinned workers' cores: three
		// threads on two cores, 2/3 each, until rank 1's is done at 15;
		// the other thread then takes its idle core, and rank 0's last
		// 20 ms run at full speed.
		{"a core each and another process", &CPUShare{Group: []int{0, 1}, Cores: []int{1, 1}, Others: OtherUnit}, nil, [2]int64{35, 15}},
		{"two cores for both and another process", &CPUShare{Group: []int{0, 0}, Cores: []int{2}, Others: OtherUnit}, nil, [2]int64{35, 15}},
		// The other thread takes the idle core, not the shared one.
		{"one core shared, another idle, another process", &CPUShare{Group: []int{0, 0}, Cores: []int{1, 1}, Others: OtherUnit}, nil, [2]int64{40, 20}},
		// Enough idle cores for the others change nothing.
		{"a core each, others on idle cores", &CPUShare{Group: []int{0, 1}, Cores: []int{1, 1, 4}, Others: 3 * OtherUnit}, nil, [2]int64{30, 10}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Run(Config{Loader: step.KindLocal, Ranks: 2, Batch: 1, Steps: 1, Workers: 1,
				GPU: gpu.Model{Base: 10 * time.Millisecond}, Samples: samples, CPUs: tc.cpus, Speed: tc.speed})
			if err != nil {
				t.Fatal(err)
			}
			for r, want := range tc.ready {
				if got := res.Records[r].ReadyUS / 1000; got != want {
					t.Errorf("rank %d ready at %d ms, want %d", r, got, want)
				}
				// The CPU time is the work on a core of its own, shared
				// or not: 30 (60 slowed) and 10 ms.
				want := []int64{30000, 10000}[r]
				if tc.speed != nil {
					want = want * tc.speed[r] / plan.One
				}
				if res.WorkUS[r] != want {
					t.Errorf("rank %d worked %d µs, want %d", r, res.WorkUS[r], want)
				}
			}
		})
	}
}

// TestSimSharedCoreEDF follows one rank's two workers on one core under
// EDF (the tiny workload: batch 0 holds 30 and 10 ms, the others two 5 ms
// samples). Both take batch 0 at half speed: the 10 ms sample is done at
// 20, the 30 ms one has 20 left. Worker 1 then decodes batch 1's samples
// (done at 30 and 40) and batch 2's first (50) beside it; at 50 both have
// 5 ms left and finish at 60, readying batches 0 and 2. Batch 3's two
// samples share the core from 60 to 70. The GPU (10 ms a step) takes
// batch 0 at 60 and the others at 70, 80, 90: wall 100 ms. The core never
// idles before 70, the 70 ms of work.
func TestSimSharedCoreEDF(t *testing.T) {
	cfg := tinyConfig(step.KindLocal)
	cfg.CPUs = &CPUShare{Group: []int{0}, Cores: []int{1}}
	res, err := Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	checkTimeline(t, res, []want{{60, 60, 60}, {40, 70, 0}, {60, 80, 0}, {70, 90, 0}}, 100)
}

// TestSimUnsharedGroupsChangeNothing: groups with a core for every worker
// give the very records of a simulation without groups, for every loader,
// on a skewed workload where loaders plan, move and split.
func TestSimUnsharedGroupsChangeNothing(t *testing.T) {
	for _, k := range []step.Kind{step.KindTorch, step.KindLocal, step.KindHelix, step.KindOracle} {
		cfg := skewedConfig(k, 30)
		base, err := Run(cfg)
		if err != nil {
			t.Fatal(err)
		}
		cfg.CPUs = &CPUShare{Group: []int{0, 0, 1, 1}, Cores: []int{4, 5}}
		grouped, err := Run(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(base.Records, grouped.Records) || base.WallUS != grouped.WallUS {
			t.Errorf("%s: records differ with unshared core groups", k)
		}
		// Sharing two cores among four ranks' eight workers must cost
		// time: the same work on a quarter of the cores.
		cfg.CPUs = &CPUShare{Group: []int{0, 1, 0, 1}, Cores: []int{1, 1}}
		shared, err := Run(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if shared.WallUS <= base.WallUS {
			t.Errorf("%s: wall %d µs on 2 shared cores, want more than %d on 8", k, shared.WallUS, base.WallUS)
		}
		again, err := Run(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(shared.Records, again.Records) {
			t.Errorf("%s: shared-core simulation not deterministic", k)
		}
	}
}

// TestSimSharedCoreConservesWork: one core shared by every worker of
// every rank, loaded from the start, decodes the whole job's work back to
// back: the last batch is ready exactly when the core has done all of it.
func TestSimSharedCoreConservesWork(t *testing.T) {
	var total int64
	samples := func(step int64, rank int) []Sample {
		out := make([]Sample, 3)
		for i := range out {
			c := int64(1000 + 777*i + 1301*rank + 97*int(step))
			out[i] = Sample{ID: uint64(step)<<16 | uint64(rank)<<8 | uint64(i), Bytes: 1000, Cost: c, Est: c}
		}
		return out
	}
	const ranks, steps = 3, 4
	for s := int64(0); s < steps; s++ {
		for r := 0; r < ranks; r++ {
			for _, x := range samples(s, r) {
				total += x.Cost
			}
		}
	}
	// A GPU so fast that every batch is late: the core is never idle.
	res, err := Run(Config{Loader: step.KindLocal, Ranks: ranks, Batch: 3, Steps: steps, Workers: 2, Horizon: steps,
		GPU: gpu.Model{Base: time.Microsecond}, Samples: samples,
		CPUs: &CPUShare{Group: []int{0, 0, 0}, Cores: []int{1}}})
	if err != nil {
		t.Fatal(err)
	}
	var last, work int64
	for _, r := range res.Records {
		last = max(last, r.ReadyUS)
	}
	for _, w := range res.WorkUS {
		work += w
	}
	if work != total {
		t.Errorf("the ranks' work adds up to %d µs, want %d", work, total)
	}
	// Rounding of the shared work may add a µs per task.
	if last < total || last > total+int64(ranks*steps*3) {
		t.Errorf("last batch ready at %d µs, want the total work %d µs", last, total)
	}
}

// TestSimOthersTakeTheRest: another process's thread that is always
// ready to run leaves no core idle, so over the run the ranks' work and
// the other threads' CPU time add up to the cores' time; with the ranks
// idle it takes a whole core, and with the ranks busy its share.
func TestSimOthersTakeTheRest(t *testing.T) {
	samples := func(step int64, rank int) []Sample {
		c := int64(3000 + 1000*rank + 500*int(step%3))
		return []Sample{{ID: uint64(step)<<8 | uint64(rank), Bytes: 1000, Cost: c, Est: c}}
	}
	for _, tc := range []struct {
		name   string
		cores  int
		others int64
	}{{"one core, one thread", 1, OtherUnit}, {"two cores, two threads", 2, 2 * OtherUnit}, {"one core, three threads", 1, 3 * OtherUnit}} {
		res, err := Run(Config{Loader: step.KindLocal, Ranks: 2, Batch: 1, Steps: 12, Workers: 1, Horizon: 2,
			GPU: gpu.Model{Base: 8 * time.Millisecond}, Samples: samples,
			CPUs: &CPUShare{Group: []int{0, 0}, Cores: []int{tc.cores}, Others: tc.others}})
		if err != nil {
			t.Fatal(err)
		}
		var work int64
		for _, w := range res.WorkUS {
			work += w
		}
		// A task's completion is rounded up to the µs: it may leave up
		// to a µs of a core unaccounted.
		busy := work + res.OthersUS
		if want := int64(tc.cores) * res.WallUS; busy < want-2*12 || busy > want {
			t.Errorf("%s: work %d + others %d µs = %d, want the cores' %d µs", tc.name, work, res.OthersUS, busy, want)
		}
		if res.OthersUS <= res.WallUS*int64(tc.cores)/4 || res.OthersUS >= int64(tc.cores)*res.WallUS {
			t.Errorf("%s: others took %d µs of %d", tc.name, res.OthersUS, int64(tc.cores)*res.WallUS)
		}
	}
	// Without others, none.
	res, err := Run(Config{Loader: step.KindLocal, Ranks: 2, Batch: 1, Steps: 3, Workers: 1, GPU: gpu.Model{Base: time.Millisecond},
		Samples: samples, CPUs: &CPUShare{Group: []int{0, 0}, Cores: []int{1}}})
	if err != nil || res.OthersUS != 0 {
		t.Errorf("others took %d µs (%v), want none", res.OthersUS, err)
	}
}

// TestOtherThreadsShare checks max-min fair sharing against shares
// worked out by hand: each group's cores and busy workers, the other
// threads; every group's rate and the other threads'.
func TestOtherThreadsShare(t *testing.T) {
	const u = OtherUnit
	type rate struct{ num, den int64 } // compared as fractions
	for _, tc := range []struct {
		name         string
		cores, busy  []int
		others       int64
		groups       []rate
		otherThreads rate
	}{
		// Everything fits: full speed, the shared group's own share.
		{"fits", []int{1, 1, 2}, []int{2, 0, 1}, u, []rate{{1, 2}, {1, 1}, {1, 1}}, rate{1, 1}},
		// Five threads on two cores would run at 2/5, more than the
		// 3-worker group can give its workers: it keeps its core at 1/3
		// each, and the rest share the other, 1/2 each.
		{"a group saturated", []int{1, 1}, []int{3, 1}, u, []rate{{1, 3}, {1, 2}}, rate{1, 2}},
		// Listed the other way round, beside a group of more cores than
		// workers: 1 + 4 workers and 2 others on 3 cores would run at
		// 3/7, more than the 4-worker core gives; it keeps its core at
		// 1/4 each, and the rest share the 2 others: 2/3 each.
		{"saturated group listed last", []int{2, 1}, []int{1, 4}, 2 * u, []rate{{2, 3}, {1, 4}}, rate{2, 3}},
		// One of three saturated: 2 + 3 + 1 workers and 2 others on 3
		// cores, 3/8; the 3-worker core keeps 1/3, and the rest run at
		// 2/5 (the 2-worker core lends its spare 1/5 to the others).
		{"one of three saturated", []int{1, 1, 1}, []int{2, 3, 1}, 2 * u, []rate{{2, 5}, {1, 3}, {2, 5}}, rate{2, 5}},
		// Two saturated: 4 and 5 workers on a core each and 3 others:
		// 1/4, then 2/7 without the 5-worker core, which the 4-worker
		// one cannot give either; the others share the idle core.
		{"two saturated", []int{1, 1, 1}, []int{4, 5, 0}, 3 * u, []rate{{1, 4}, {1, 5}, {1, 1}}, rate{1, 3}},
		// Six threads of 1/3 fill both cores; the 3-worker group at
		// exactly the level is not saturated.
		{"at the level", []int{1, 1}, []int{3, 1}, 2 * u, []rate{{1, 3}, {1, 3}}, rate{1, 3}},
		// A whole idle core and half a thread's worth of others.
		{"idle core", []int{1, 1}, []int{2, 0}, u / 2, []rate{{1, 2}, {1, 1}}, rate{1, 1}},
		// Half a thread on one busy core with one worker: 1/1.5 each.
		{"half a thread", []int{1}, []int{1}, u / 2, []rate{{2, 3}}, rate{2, 3}},
	} {
		o := &otherThreads{n: tc.others}
		for g, c := range tc.cores {
			grp := &cpuGroup{cores: int64(c), shared: true}
			for range tc.busy[g] {
				grp.running = append(grp.running, &simTask{})
			}
			o.groups = append(o.groups, grp)
		}
		o.share()
		if o.num*tc.otherThreads.den != tc.otherThreads.num*o.den {
			t.Errorf("%s: other threads at %d/%d, want %d/%d", tc.name, o.num, o.den, tc.otherThreads.num, tc.otherThreads.den)
		}
		for g, want := range tc.groups {
			if tc.busy[g] == 0 {
				continue
			}
			if got := o.groups[g]; got.num*want.den != want.num*got.den {
				t.Errorf("%s: group %d at %d/%d, want %d/%d", tc.name, g, got.num, got.den, want.num, want.den)
			}
		}
	}
}

// TestOtherThreadsShareReference compares share with max-min fair
// sharing found in floating point, by bisection on the level, for random
// groups: every thread at the level L, a group's workers at most
// cores/busy, all the cores used when the threads want more.
func TestOtherThreadsShareReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 8))
	for i := range 5000 {
		o := &otherThreads{n: 1 + rng.Int64N(12*OtherUnit)}
		var total float64
		for range 1 + rng.IntN(6) {
			g := &cpuGroup{cores: 1 + rng.Int64N(5), shared: true}
			for range rng.IntN(8) {
				g.running = append(g.running, &simTask{})
			}
			o.groups = append(o.groups, g)
			total += float64(g.cores)
		}
		// used is the cores every thread takes at level L.
		used := func(l float64) float64 {
			u := float64(o.n) / OtherUnit * l
			for _, g := range o.groups {
				u += min(float64(len(g.running))*l, float64(g.cores))
			}
			return u
		}
		level := 1.0
		if used(1) > total {
			lo, hi := 0.0, 1.0
			for range 100 {
				if mid := (lo + hi) / 2; used(mid) > total {
					hi = mid
				} else {
					lo = mid
				}
			}
			level = lo
		}
		o.share()
		if got := float64(o.num) / float64(o.den); math.Abs(got-level) > 1e-9 {
			t.Fatalf("case %d: other threads at %v, want %v", i, got, level)
		}
		for k, g := range o.groups {
			if n := len(g.running); n > 0 {
				want := min(level, float64(g.cores)/float64(n))
				if got := float64(g.num) / float64(g.den); math.Abs(got-want) > 1e-9 {
					t.Fatalf("case %d: group %d (%d cores, %d busy) at %v, want %v", i, k, g.cores, n, got, want)
				}
			}
		}
	}
}

func TestSimCPUShareErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		cpus *CPUShare
	}{
		{"groups for fewer ranks", &CPUShare{Group: []int{0}, Cores: []int{1}}},
		{"group out of range", &CPUShare{Group: []int{0, 1}, Cores: []int{1}}},
		{"negative group", &CPUShare{Group: []int{0, -1}, Cores: []int{1}}},
		{"no cores", &CPUShare{Group: []int{0, 0}, Cores: []int{0}}},
		{"negative others", &CPUShare{Group: []int{0, 0}, Cores: []int{1}, Others: -1}},
		{"too many others", &CPUShare{Group: []int{0, 0}, Cores: []int{1}, Others: maxOthers + 1}},
	} {
		cfg := tinyConfig(step.KindLocal)
		cfg.Ranks = 2
		cfg.CPUs = tc.cpus
		if _, err := Run(cfg); err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
}

// TestSimPlannerSeesSharing: as the runtime learns the wall time of its
// decodes over their CPU time, a simulated rank learns what sharing
// cores costs its tasks, and the planner sees the smaller capacity. Four
// ranks of two workers on one core: eight threads share it when all are
// busy, so late plans see each rank's capacity near 2/8 of a core; with a
// core per worker, every plan sees two cores.
func TestSimPlannerSeesSharing(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cpus   *CPUShare
		lo, hi int64 // capacity of the last plan, in plan.One
	}{
		{"one core for all", &CPUShare{Group: []int{0, 0, 0, 0}, Cores: []int{1}}, plan.One / 5, plan.One / 3},
		{"a core per worker", nil, 2 * plan.One, 2 * plan.One},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var last []plan.Progress
			cfg := skewedConfig(step.KindHelix, 30)
			cfg.CPUs = tc.cpus
			cfg.OnPlan = func(step, at int64, in *plan.Input, p *plan.Plan) {
				last = append(last[:0], in.Ranks...)
			}
			_, err := Run(cfg)
			if err != nil {
				t.Fatal(err)
			}
			for r, p := range last {
				if p.Capacity < tc.lo || p.Capacity > tc.hi {
					t.Errorf("rank %d: capacity %d/%d of a core, want within [%d, %d]", r, p.Capacity, plan.One, tc.lo, tc.hi)
				}
			}
		})
	}
}

// TestSimStartup: 20 ms of start-up work on the tiny workload's two
// workers keeps both busy for 10 ms, then the local timeline runs 10 ms
// later: batch 0's samples (30 and 10 ms) from 10, worker 1 on batches 1
// and 2 from 20 to 40, batch 0 ready at 40, batch 3 at 45. The GPU takes
// batch 0 at 40 and the others at 50, 60, 70. The first record's CPU
// time is everything finished by its delivery, start-up included:
// 20 + 40 + 10 + 10 ms; the second holds batch 3's 10 ms.
func TestSimStartup(t *testing.T) {
	cfg := tinyConfig(step.KindLocal)
	cfg.StartUS = []int64{20000}
	res, err := Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	checkTimeline(t, res, []want{{40, 40, 40}, {30, 50, 0}, {40, 60, 0}, {45, 70, 0}}, 80)
	var cpu, dec []int64
	for _, r := range res.Records {
		cpu, dec = append(cpu, r.CPUUS), append(dec, r.DecodeCPUUS)
	}
	if want := []int64{80000, 10000, 0, 0}; !slices.Equal(cpu, want) {
		t.Errorf("cpu_us per step %v, want %v", cpu, want)
	}
	// The decodes' part leaves the start-up work out.
	if want := []int64{60000, 10000, 0, 0}; !slices.Equal(dec, want) {
		t.Errorf("decode_cpu_us per step %v, want %v", dec, want)
	}
	if res.WorkUS[0] != 90000 {
		t.Errorf("work %d µs, want 90000", res.WorkUS[0])
	}
	cfg.StartUS = []int64{1, 2}
	if _, err := Run(cfg); err == nil {
		t.Error("start-up works for 2 ranks of 1: no error")
	}
}
