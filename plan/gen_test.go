package plan

import (
	"math"
	"math/rand/v2"
)

// genOpts shapes a random input.
type genOpts struct {
	mode      Mode
	heavy     bool    // lognormal costs instead of uniform
	sigma     float64 // of the lognormal; 0 means 1.2
	maxCost   int64   // uniform costs are in [0, maxCost]
	progress  bool    // random deadlines, backlogs, capacities, links
	capSpread float64 // with progress: capacities in 8*One*[1/spread, 1]; 0 means 0.5 to 8.5
	deadline  int64   // every rank's deadline when !progress
	bandwidth int64   // every rank's bandwidth when !progress (0: 10 GB/s)
	latency   int64
	margin    int64
	// train gives every sample a GPU time: lognormal around 20 ms, the
	// ranks' means spread 3x apart (a rank of long clips next to one of
	// images), so that evenTrain has work to do.
	train bool
}

// genInput draws an input of n ranks and batch b from rng.
func genInput(rng *rand.Rand, n, b int, o genOpts) *Input {
	in := &Input{Params: Params{Mode: o.mode, Seed: rng.Uint64(), Margin: o.margin}, Step: int64(rng.IntN(1000)), Batch: b}
	bw := o.bandwidth
	if bw == 0 {
		bw = 10_000 * One
	}
	for range n {
		pr := Progress{Deadline: o.deadline, Capacity: 8 * One, Bandwidth: bw, Latency: o.latency}
		if o.progress {
			pr = Progress{
				Deadline:  rng.Int64N(2_000_000),
				Backlog:   rng.Int64N(500_000),
				Capacity:  One/2 + rng.Int64N(8*One),
				Bandwidth: 100*One + rng.Int64N(20_000*One),
				Latency:   rng.Int64N(50),
			}
		}
		if o.progress && o.capSpread > 0 {
			pr.Capacity = int64(8 * One * (1/o.capSpread + (1-1/o.capSpread)*rng.Float64()))
		}
		in.Ranks = append(in.Ranks, pr)
	}
	perm := rng.Perm(n * b) // distinct ids in a random order
	for k := range n * b {
		s := Sample{ID: uint64(perm[k])*7919 + 13, Owner: k / b}
		if o.heavy {
			sigma := o.sigma
			if sigma == 0 {
				sigma = 1.2
			}
			c := math.Exp(11 + sigma*rng.NormFloat64()) // median ~60 ms
			s.Cost = int64(min(c, float64(maxCost)))
			s.Bytes = int64(min(float64(s.Cost)*40*math.Exp(0.5*rng.NormFloat64()), float64(maxBytes)))
		} else {
			s.Cost = rng.Int64N(o.maxCost + 1)
			s.Bytes = rng.Int64N(1 << 20)
		}
		if o.train {
			rankMean := 10e6 * (1 + 2*float64(mix64(uint64(k/b)+in.Seed)%1000)/1000) // ns
			s.Train = int64(min(rankMean*math.Exp(0.6*rng.NormFloat64()), float64(maxTrain)))
		}
		in.Samples = append(in.Samples, s)
	}
	return in
}
