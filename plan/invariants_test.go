package plan

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// model returns the per-rank deadline, backlog and capacity mode m plans
// with: the reference for Finish.
func model(in *Input, r int) (deadline, backlog, capacity int64) {
	if in.Mode == ModeStatic {
		return 0, 0, One
	}
	p := in.Ranks[r]
	return p.Deadline, p.Backlog, p.Capacity
}

// objective is the lexicographic objective of an assignment, recomputed
// from scratch: late ranks, max lateness, bytes moved. maxExcess is
// reported by the plan but is not part of the objective.
type objective struct {
	late      int
	maxLate   int64
	bytes     int64
	maxExcess int64
	makespan  int64 // not part of the objective either
}

func (o objective) String() string {
	return fmt.Sprintf("{late %d, max lateness %d µs, %d bytes, max excess %d µs}", o.late, o.maxLate, o.bytes, o.maxExcess)
}

// less compares lexicographically.
func (o objective) less(p objective) bool {
	if o.late != p.late {
		return o.late < p.late
	}
	if o.maxLate != p.maxLate {
		return o.maxLate < p.maxLate
	}
	if o.maxExcess != p.maxExcess {
		return o.maxExcess < p.maxExcess // lateness may be negative: slack
	}
	return o.bytes < p.bytes
}

// evaluate recomputes the objective of assign (sample -> rank).
func evaluate(in *Input, assign []int32) objective {
	n := len(in.Ranks)
	work := make([]int64, n)
	var o objective
	for k, r := range assign {
		work[r] += in.Samples[k].Cost
		if int(r) != in.Samples[k].Owner {
			o.bytes += in.Samples[k].Bytes
		}
	}
	for r := range n {
		d, l, c := model(in, r)
		e := l + (work[r]*One+c-1)/c - d
		o.makespan = max(o.makespan, e+d)
		if r == 0 || e > o.maxExcess {
			o.maxExcess = e
		}
		if e > 0 {
			o.late++
			o.maxLate = max(o.maxLate, e)
		}
	}
	return o
}

func identity(in *Input) []int32 {
	a := make([]int32, len(in.Samples))
	for k := range a {
		a[k] = int32(k / in.Batch)
	}
	return a
}

// checkPlan asserts every invariant of p as the plan of in.
func checkPlan(t *testing.T, in *Input, p *Plan) {
	t.Helper()
	n, b := len(in.Ranks), in.Batch
	if p.Ranks != n || p.Batch != b || p.Step != in.Step || p.Mode != in.Mode {
		t.Fatalf("plan shape {ranks %d, batch %d, step %d, mode %s}, want {%d, %d, %d, %s}", p.Ranks, p.Batch, p.Step, p.Mode, n, b, in.Step, in.Mode)
	}
	if len(p.Assign) != n*b || len(p.Order) != n*b {
		t.Fatalf("len(Assign), len(Order) = %d, %d, want %d", len(p.Assign), len(p.Order), n*b)
	}
	// Every sample assigned exactly once, exactly B per rank, and Order
	// lists each rank's samples in decode order.
	count := make([]int, n)
	for k, r := range p.Assign {
		if r < 0 || int(r) >= n {
			t.Fatalf("sample %d assigned to rank %d of %d", k, r, n)
		}
		count[r]++
	}
	for r, c := range count {
		if c != b {
			t.Fatalf("rank %d has %d samples, want %d", r, c, b)
		}
	}
	seen := make([]bool, n*b)
	for r := range n {
		order := p.DecodeOrder(r)
		for i, k := range order {
			if seen[k] {
				t.Fatalf("sample %d appears twice in Order", k)
			}
			seen[k] = true
			if int(p.Assign[k]) != r {
				t.Fatalf("rank %d decodes sample %d assigned to rank %d", r, k, p.Assign[k])
			}
			if i > 0 {
				prev, cur := in.Samples[order[i-1]], in.Samples[k]
				if prev.Cost < cur.Cost || prev.Cost == cur.Cost && prev.ID > cur.ID {
					t.Fatalf("rank %d decodes sample id %d (cost %d) before id %d (cost %d)", r, prev.ID, prev.Cost, cur.ID, cur.Cost)
				}
			}
		}
	}
	// Predictions.
	want := evaluate(in, p.Assign)
	work := make([]int64, n)
	for k, r := range p.Assign {
		work[r] += in.Samples[k].Cost
	}
	makespan := int64(0)
	for r := range n {
		d, l, c := model(in, r)
		f := l + (work[r]*One+c-1)/c
		if p.Finish[r] != f || p.Lateness[r] != max(f-d, 0) {
			t.Fatalf("rank %d: finish, lateness = %d, %d, want %d, %d", r, p.Finish[r], p.Lateness[r], f, max(f-d, 0))
		}
		makespan = max(makespan, f)
	}
	got := objective{p.LateRanks, p.MaxLateness, p.BytesMoved, p.MaxExcess, p.Makespan}
	if got != want || p.Makespan != makespan {
		t.Fatalf("plan reports %v, makespan %d; recomputed %v, makespan %d", got, p.Makespan, want, makespan)
	}
	// The plan is never worse than leaving every sample with its owner.
	// Where samples carry GPU times, that holds for the plan before their
	// GPU work was evened out — the plan of the same input without GPU
	// times — and checkEvenTrain relates the two.
	before := want
	if hasTrain(in) {
		q := withoutTrain(t, in)
		before = evaluate(in, q.Assign)
		checkEvenTrain(t, in, p, q)
	}
	if base := evaluate(in, identity(in)); base.less(before) {
		t.Fatalf("plan %v is worse than no exchange %v", before, base)
	}
	if in.Mode == ModeLocal && (p.Moved != 0 || len(p.Moves) != 0 || len(p.Exchanges) != 0) {
		t.Fatalf("ModeLocal moved %d samples", p.Moved)
	}
	checkMoves(t, in, p)
	checkExchanges(t, in, p)
}

// checkMoves asserts that Moves, Sends and Receives describe exactly the
// samples away from their owners, in the canonical order.
func checkMoves(t *testing.T, in *Input, p *Plan) {
	t.Helper()
	n, b := len(in.Ranks), in.Batch
	inMove := make([]int, n*b)
	moved, bytes := 0, int64(0)
	for i, m := range p.Moves {
		if i > 0 && (p.Moves[i-1].Src > m.Src || p.Moves[i-1].Src == m.Src && p.Moves[i-1].Dst >= m.Dst) {
			t.Fatalf("moves %d->%d and %d->%d out of order", p.Moves[i-1].Src, p.Moves[i-1].Dst, m.Src, m.Dst)
		}
		if len(m.Samples) == 0 || m.Src == m.Dst {
			t.Fatalf("move %d->%d carries %d samples", m.Src, m.Dst, len(m.Samples))
		}
		sum := int64(0)
		for j, k := range m.Samples {
			if j > 0 && m.Samples[j-1] >= k {
				t.Fatalf("move %d->%d samples not ascending: %v", m.Src, m.Dst, m.Samples)
			}
			if in.Samples[k].Owner != m.Src || int(p.Assign[k]) != m.Dst {
				t.Fatalf("move %d->%d carries sample %d owned by %d assigned to %d", m.Src, m.Dst, k, in.Samples[k].Owner, p.Assign[k])
			}
			inMove[k]++
			sum += in.Samples[k].Bytes
		}
		if sum != m.Bytes {
			t.Fatalf("move %d->%d bytes = %d, want %d", m.Src, m.Dst, m.Bytes, sum)
		}
		moved += len(m.Samples)
		bytes += sum
	}
	for k := range inMove {
		away := int(p.Assign[k]) != in.Samples[k].Owner
		if (inMove[k] == 1) != away || inMove[k] > 1 {
			t.Fatalf("sample %d (owner %d, assigned %d) is in %d moves", k, in.Samples[k].Owner, p.Assign[k], inMove[k])
		}
	}
	if moved != p.Moved || bytes != p.BytesMoved {
		t.Fatalf("Moved, BytesMoved = %d, %d, want %d, %d", p.Moved, p.BytesMoved, moved, bytes)
	}
	var sends, recvs []Move
	for r := range n {
		for _, m := range p.Sends(r) {
			if m.Src != r {
				t.Fatalf("Sends(%d) holds %d->%d", r, m.Src, m.Dst)
			}
			sends = append(sends, m)
		}
		for i, m := range p.Receives(r) {
			if m.Dst != r || i > 0 && p.Receives(r)[i-1].Src >= m.Src {
				t.Fatalf("Receives(%d) holds %d->%d at %d", r, m.Src, m.Dst, i)
			}
			recvs = append(recvs, m)
		}
	}
	if len(sends) != len(p.Moves) || len(recvs) != len(p.Moves) {
		t.Fatalf("Sends and Receives list %d and %d moves, want %d", len(sends), len(recvs), len(p.Moves))
	}
	for _, m := range recvs {
		i := slices.IndexFunc(p.Sends(m.Src), func(s Move) bool { return s.Dst == m.Dst })
		if i < 0 || !slices.Equal(p.Sends(m.Src)[i].Samples, m.Samples) {
			t.Fatalf("receiver %d and sender %d disagree on the samples", m.Dst, m.Src)
		}
	}
}

// checkExchanges replays the exchanges from the owners' assignment and
// checks the gate: under ModeHelix no exchange sends a sample away unless
// its gain beats its transfer cost plus the margin, so the summed gain
// exceeds the plan's total transfer time.
func checkExchanges(t *testing.T, in *Input, p *Plan) {
	t.Helper()
	a := identity(in)
	var gain, cost, trainCost int64
	for i, x := range p.Exchanges {
		if a[x.A] != x.From || a[x.B] != x.To || x.From == x.To {
			t.Fatalf("exchange %d %+v does not match the assignment (%d, %d)", i, x, a[x.A], a[x.B])
		}
		a[x.A], a[x.B] = x.To, x.From
		if x.TrainGain != 0 {
			// evenTrain's exchange: no lateness gain, a GPU time gain.
			if x.Gain != 0 || x.TrainGain < 0 || in.Mode == ModeStatic || in.Mode == ModeLocal {
				t.Fatalf("exchange %d %+v: evening out GPU work under %s", i, x, in.Mode)
			}
			cost += x.Cost
			trainCost += x.Cost
			continue
		}
		if x.Gain <= 0 && in.Mode == ModeHelix {
			t.Fatalf("exchange %d %+v has no gain under ModeHelix", i, x)
		}
		away := int(x.To) != in.Samples[x.A].Owner || int(x.From) != in.Samples[x.B].Owner
		if in.Mode == ModeHelix && away && x.Gain <= x.Cost+in.Margin {
			t.Fatalf("exchange %d %+v passed the gate with gain %d <= cost %d + margin %d", i, x, x.Gain, x.Cost, in.Margin)
		}
		gain += x.Gain
		cost += x.Cost
	}
	if !slices.Equal(a, p.Assign) {
		t.Fatalf("replaying the exchanges does not give Assign")
	}
	if total := transferTime(in, p.Assign); total != cost {
		t.Fatalf("exchanges sum to transfer cost %d µs, the plan's transfers take %d µs", cost, total)
	}
	if in.Mode == ModeHelix && cost-trainCost > 0 && gain <= cost-trainCost {
		t.Fatalf("exchanges gain %d µs in total but cost %d µs of transfers", gain, cost-trainCost)
	}
}

// trainSquares is the sum over ranks of the squared GPU work, in ms² (the
// quantity evenTrain lowers with every exchange).
func trainSquares(in *Input, assign []int32) float64 {
	load := make([]float64, len(in.Ranks))
	for k, r := range assign {
		load[r] += float64(in.Samples[k].Train) / 1e6
	}
	sq := 0.0
	for _, l := range load {
		sq += l * l
	}
	return sq
}

// transferTime is the summed predicted transfer time of every sample away
// from its owner, charged as the gate charges it.
func transferTime(in *Input, assign []int32) int64 {
	total := int64(0)
	for k, r := range assign {
		total += arrivalTime(in, int32(k), r)
	}
	return total
}

// arrivalTime is the predicted transfer time of sample k from its owner
// to rank r: 0 at the owner.
func arrivalTime(in *Input, k, r int32) int64 {
	o := in.Samples[k].Owner
	if int(r) == o {
		return 0
	}
	po, pr := in.Ranks[o], in.Ranks[r]
	bw := min(po.Bandwidth, pr.Bandwidth)
	return max(po.Latency, pr.Latency) + (in.Samples[k].Bytes*One+bw-1)/bw
}

func TestInvariantsRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var pl Planner
	var p Plan
	iters := 400
	if testing.Short() {
		iters = 100
	}
	for it := range iters {
		n, b := 1+rng.IntN(12), 1+rng.IntN(10)
		if it%20 == 0 {
			n, b = 1+rng.IntN(200), 1+rng.IntN(48) // larger, and past the 64-sample sort
			if it%40 == 0 {
				b = 65 + rng.IntN(30)
			}
		}
		o := genOpts{
			mode:     Mode(rng.IntN(int(numModes))),
			heavy:    rng.IntN(2) == 0,
			maxCost:  rng.Int64N(1000),
			progress: rng.IntN(2) == 0,
			deadline: rng.Int64N(100_000),
			latency:  rng.Int64N(100),
			margin:   rng.Int64N(1000),
		}
		if rng.IntN(4) == 0 {
			o.bandwidth = One // 1 byte/µs: the gate binds
		}
		o.train = rng.IntN(2) == 0
		in := genInput(rng, n, b, o)
		if err := pl.Compute(in, &p); err != nil {
			t.Fatalf("iteration %d: %v", it, err)
		}
		checkPlan(t, in, &p)
	}
}

// hasTrain reports whether some sample of in carries a GPU time.
func hasTrain(in *Input) bool {
	for k := range in.Samples {
		if in.Samples[k].Train > 0 {
			return true
		}
	}
	return false
}

// withoutTrain plans in with every GPU time zeroed: the plan as it stood
// before evenTrain, which is the only phase that reads them.
func withoutTrain(t *testing.T, in *Input) *Plan {
	t.Helper()
	bare := *in
	bare.Samples = slices.Clone(in.Samples)
	for k := range bare.Samples {
		bare.Samples[k].Train = 0
	}
	q, err := Compute(&bare)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// checkEvenTrain checks plan p of in against q, the plan of the same
// input without GPU times (the plan before evenTrain). p's exchanges
// start with q's; the others are evenTrain's and are made only when q has
// no late rank and only in the modes that even out GPU work. Replayed one
// by one from q's assignment, each must lower the larger GPU load of its
// pair by its TrainGain and keep both ranks' excess — under ModeHelix
// plus the arrival time of the sample each receives — within evenTrain's
// level, max(E, min(E/2, -Margin)) for q's largest excess E. So the plan
// has q's late ranks and maximum lateness, and its most loaded GPU is
// never heavier than q's.
func checkEvenTrain(t *testing.T, in *Input, p, q *Plan) {
	t.Helper()
	extra := len(p.Exchanges) - len(q.Exchanges)
	if extra < 0 || !slices.Equal(p.Exchanges[:len(q.Exchanges)], q.Exchanges) {
		t.Fatalf("the plan's first %d exchanges differ from the plan without GPU times", len(q.Exchanges))
	}
	if extra > 0 && (q.LateRanks > 0 || in.Mode == ModeStatic || in.Mode == ModeLocal) {
		t.Fatalf("%d exchanges evened out GPU work under %s with %d late ranks", extra, in.Mode, q.LateRanks)
	}
	n := len(in.Ranks)
	level := max(q.MaxExcess, min(q.MaxExcess/2, -in.Margin))
	assign := slices.Clone(q.Assign)
	work, load := make([]int64, n), make([]int64, n)
	for k, r := range assign {
		work[r] += in.Samples[k].Cost
		load[r] += in.Samples[k].Train
	}
	excess := func(r int32) int64 {
		d, l, c := model(in, int(r))
		return l + (work[r]*One+c-1)/c - d
	}
	// Only the gate charges the arrival of a sample against its level.
	arrival := func(k, r int32) int64 {
		if in.Mode != ModeHelix {
			return 0
		}
		return arrivalTime(in, k, r)
	}
	maxLoad := slices.Max(load)
	for i, x := range p.Exchanges[len(q.Exchanges):] {
		if x.Gain != 0 || x.TrainGain <= 0 {
			t.Fatalf("evenTrain exchange %d %+v: want Gain 0 and a positive TrainGain", i, x)
		}
		a, b := in.Samples[x.A], in.Samples[x.B]
		beforeMax := max(load[x.From], load[x.To])
		assign[x.A], assign[x.B] = x.To, x.From
		work[x.From] += b.Cost - a.Cost
		work[x.To] += a.Cost - b.Cost
		load[x.From] += b.Train - a.Train
		load[x.To] += a.Train - b.Train
		if got := beforeMax - max(load[x.From], load[x.To]); got != x.TrainGain || got <= 0 {
			t.Fatalf("evenTrain exchange %d %+v lowers the pair's larger GPU load by %d ns", i, x, got)
		}
		if e := excess(x.To) + arrival(x.A, x.To); e > level {
			t.Fatalf("evenTrain exchange %d %+v leaves rank %d at excess %d µs with its arrival, above the level %d", i, x, x.To, e, level)
		}
		if e := excess(x.From) + arrival(x.B, x.From); e > level {
			t.Fatalf("evenTrain exchange %d %+v leaves rank %d at excess %d µs with its arrival, above the level %d", i, x, x.From, e, level)
		}
	}
	if !slices.Equal(assign, p.Assign) {
		t.Fatalf("replaying the exchanges from the plan without GPU times does not give Assign")
	}
	if p.LateRanks != q.LateRanks || p.MaxLateness != q.MaxLateness || p.MaxExcess > max(level, q.MaxExcess) {
		t.Fatalf("evening out GPU work changed the decode objective: late %d, max lateness %d, max excess %d; before %d, %d, %d",
			p.LateRanks, p.MaxLateness, p.MaxExcess, q.LateRanks, q.MaxLateness, q.MaxExcess)
	}
	if slices.Max(load) > maxLoad {
		t.Fatalf("most loaded GPU has %d ns, %d before evening out", slices.Max(load), maxLoad)
	}
	if extra > 0 && trainSquares(in, p.Assign) >= trainSquares(in, q.Assign) {
		t.Fatalf("%d exchanges evening out GPU work did not lower the squared loads", extra)
	}
}

func TestEqualCostsAndRanksMoveNothing(t *testing.T) {
	for _, mode := range []Mode{ModeHelix, ModeHelixNoGate, ModeStatic, ModeOracle, ModeLocal} {
		for _, deadline := range []int64{0, 1_000, 1 << 30} {
			in := &Input{Params: Params{Mode: mode}, Batch: 5}
			for r := range 7 {
				in.Ranks = append(in.Ranks, Progress{Deadline: deadline, Backlog: 300, Capacity: 3 * One, Bandwidth: One * 1000, Latency: 1})
				for i := range 5 {
					in.Samples = append(in.Samples, Sample{ID: uint64(100*r + i), Owner: r, Bytes: int64(1000 * (i + 1)), Cost: 4_000})
				}
			}
			p, err := Compute(in)
			if err != nil {
				t.Fatal(err)
			}
			checkPlan(t, in, p)
			if p.Moved != 0 {
				t.Errorf("mode %s, deadline %d: moved %d samples, want 0", mode, deadline, p.Moved)
			}
		}
	}
}
