package step

import (
	"fmt"

	"github.com/datahelix/datahelix/plan"
)

// Params are what every step of a loader shares, the same on every rank.
type Params struct {
	Kind   Kind
	Batch  int    // B: samples per rank per step
	Seed   uint64 // the job's seed, which breaks the planner's ties
	Margin int64  // the transfer-cost gate's margin, µs
}

// Block returns rank's contribution to the allgather of step s: the
// loader's parameters, the rank's progress (from state) and its own B
// samples.
func (p Params) Block(s int64, rank int, state RankState, own []Item) *plan.Block {
	b := &plan.Block{
		Params:   plan.Params{Mode: p.Kind.PlanMode(), Seed: p.Seed, Margin: p.Margin, NoTrain: p.Kind == KindHelixNoTrain},
		Step:     s,
		Rank:     rank,
		Progress: state.Progress(),
		Samples:  make([]plan.Sample, len(own)),
	}
	for i, it := range own {
		b.Samples[i] = plan.Sample{ID: it.ID, Owner: rank, Bytes: it.Bytes, Cost: it.Est, Train: it.Train}
	}
	return b
}

// Stepper computes the plans of a planned loader's steps. It keeps the
// planner's scratch space between steps; it is not safe for concurrent
// use.
type Stepper struct {
	planner plan.Planner
	in      plan.Input
	pl      plan.Plan
}

// Plan decodes the blocks of step s's allgather (every rank's, in rank
// order, as plan.AppendBlock writes them) and computes the step's plan:
// its moves (plan.Plan.Sends, Receives) and each rank's decode order
// (plan.Plan.DecodeOrder, indices into the input's samples). The input
// and plan returned are the Stepper's, valid until its next call.
func (st *Stepper) Plan(s int64, gathered []byte) (*plan.Input, *plan.Plan, error) {
	if err := plan.DecodeInput(gathered, &st.in); err != nil {
		return nil, nil, fmt.Errorf("step %d: the ranks' blocks disagree: %w", s, err)
	}
	if st.in.Step != s {
		return nil, nil, fmt.Errorf("step %d: the ranks' blocks are of step %d", s, st.in.Step)
	}
	if err := st.planner.Compute(&st.in, &st.pl); err != nil {
		return nil, nil, fmt.Errorf("step %d: plan: %w", s, err)
	}
	return &st.in, &st.pl, nil
}

// Order returns the decode order of a rank's own samples (indices into
// items) for a loader that does not plan: the sampler's for torch, the
// largest estimate first for the others.
func (k Kind) Order(items []Item) []int {
	if k.Torch() {
		return SamplerOrder(len(items))
	}
	return LocalOrder(items)
}
