package plan

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"testing"
)

var printPinned = flag.Bool("print-pinned", false, "print TestPlansPinned's digests instead of checking them")

// pinnedInput draws an input with integer arithmetic only (math/rand/v2's
// PCG), so that it is the same on every machine: heavy-tailed costs
// (a uniform mantissa shifted by up to 9 bits), backlogs and capacities
// spread per rank, deadlines about 4 batches ahead as the runtime plans,
// GPU times whose per-rank means differ up to 4x, and, with nodes, ranks
// grouped 8 to a node with slower links between nodes.
func pinnedInput(seed uint64, n, b int, mode Mode, nodes, noTrain bool) *Input {
	rng := rand.New(rand.NewPCG(seed, uint64(n)<<20|uint64(b)))
	in := &Input{Params: Params{Mode: mode, Seed: seed, Margin: rng.Int64N(2000), NoTrain: noTrain}, Step: int64(rng.IntN(1000)), Batch: b}
	var total int64
	for k := range n * b {
		r := k / b
		cost := (1 + rng.Int64N(1000)) << rng.IntN(10) * 10
		s := Sample{ID: uint64(k)*2654435761 + seed, Owner: r, Cost: cost, Bytes: cost * (20 + rng.Int64N(40))}
		s.Train = (1 + int64(r%4)) * (1_000_000 + rng.Int64N(9_000_000))
		in.Samples = append(in.Samples, s)
		total += cost
	}
	batch := total / int64(n) / 8 // µs of one batch on 8 nominal workers
	for r := range n {
		pr := Progress{
			Capacity:  8*One*8/10 + rng.Int64N(8*One*4/10),
			Backlog:   batch*3*3/4 + rng.Int64N(batch*3/2+1),
			Deadline:  4*batch*12/10 - rng.Int64N(batch/4+1),
			Bandwidth: 10_000*One - rng.Int64N(5_000*One),
			Latency:   5 + rng.Int64N(10),
		}
		if nodes {
			pr.Node, pr.NodeBandwidth, pr.NodeLatency = int64(r/8), 1_000*One+rng.Int64N(1_000*One), 20+rng.Int64N(20)
		}
		in.Ranks = append(in.Ranks, pr)
	}
	return in
}

// planDigest digests everything a plan exports: the digest Hash covers
// and the assignment, lateness, totals, moves (with Receives) and
// exchanges.
func planDigest(p *Plan) uint64 {
	h := uint64(0x9e3779b97f4a7c15)
	mix := func(w uint64) {
		h ^= w
		h *= 0xff51afd7ed558ccd
		h ^= h >> 33
	}
	for _, v := range []int64{p.Step, int64(p.Mode), int64(p.Ranks), int64(p.Batch), int64(p.LateRanks), p.MaxLateness,
		p.MaxExcess, p.Makespan, int64(p.Moved), p.BytesMoved, int64(p.Hash)} {
		mix(uint64(v))
	}
	for k := range p.Assign {
		mix(uint64(p.Assign[k]))
		mix(uint64(p.Order[k]))
	}
	for r := range p.Finish {
		mix(uint64(p.Finish[r]))
		mix(uint64(p.Lateness[r]))
	}
	moves := func(ms []Move) {
		mix(uint64(len(ms)))
		for _, m := range ms {
			mix(uint64(m.Src))
			mix(uint64(m.Dst))
			mix(uint64(m.Bytes))
			mix(uint64(len(m.Samples)))
			for _, k := range m.Samples {
				mix(uint64(k))
			}
		}
	}
	moves(p.Moves)
	for r := range p.Ranks {
		moves(p.Receives(r))
	}
	mix(uint64(len(p.Exchanges)))
	for _, x := range p.Exchanges {
		for _, v := range []int64{int64(x.A), int64(x.B), int64(x.From), int64(x.To), x.Gain, x.Cost, x.TrainGain} {
			mix(uint64(v))
		}
	}
	return h
}

// pinnedDigests are planDigest of TestPlansPinned's plans, recorded
// before the planner was made faster for 8,192 ranks (issue 27 §5): the
// speed-ups must not change a plan by one bit. A deliberate change of
// the plans rewrites them (go test -run TestPlansPinned -print-pinned).
var pinnedDigests = map[string]uint64{
	"N=1/B=1/helix/nodes=false/notrain=false":            0x43550afbd26edb99, // 0 exchanges
	"N=1/B=1/helix/nodes=true/notrain=false":             0x43550afbd26edb99, // 0 exchanges
	"N=1/B=1/helix/nodes=false/notrain=true":             0x43550afbd26edb99, // 0 exchanges
	"N=1/B=1/helix-nogate/nodes=false/notrain=false":     0xf862090e5273fea0, // 0 exchanges
	"N=1/B=1/helix-nogate/nodes=true/notrain=false":      0xf862090e5273fea0, // 0 exchanges
	"N=1/B=1/helix-nogate/nodes=false/notrain=true":      0xf862090e5273fea0, // 0 exchanges
	"N=1/B=1/static/nodes=false/notrain=false":           0x5259499aa93a71c,  // 0 exchanges
	"N=1/B=1/static/nodes=true/notrain=false":            0x5259499aa93a71c,  // 0 exchanges
	"N=1/B=1/static/nodes=false/notrain=true":            0x5259499aa93a71c,  // 0 exchanges
	"N=1/B=1/oracle/nodes=false/notrain=false":           0xc74f012306876135, // 0 exchanges
	"N=1/B=1/oracle/nodes=true/notrain=false":            0xc74f012306876135, // 0 exchanges
	"N=1/B=1/oracle/nodes=false/notrain=true":            0xc74f012306876135, // 0 exchanges
	"N=1/B=1/local/nodes=false/notrain=false":            0x1d32fc6184e6fdc0, // 0 exchanges
	"N=1/B=1/local/nodes=true/notrain=false":             0x1d32fc6184e6fdc0, // 0 exchanges
	"N=1/B=1/local/nodes=false/notrain=true":             0x1d32fc6184e6fdc0, // 0 exchanges
	"N=2/B=3/helix/nodes=false/notrain=false":            0x3ea7cda49a553f78, // 0 exchanges
	"N=2/B=3/helix/nodes=true/notrain=false":             0xc614689ada1abd94, // 2 exchanges
	"N=2/B=3/helix/nodes=false/notrain=true":             0x3ea7cda49a553f78, // 0 exchanges
	"N=2/B=3/helix-nogate/nodes=false/notrain=false":     0x7386289aa7d73229, // 2 exchanges
	"N=2/B=3/helix-nogate/nodes=true/notrain=false":      0x61dbc24de8152a74, // 2 exchanges
	"N=2/B=3/helix-nogate/nodes=false/notrain=true":      0x7386289aa7d73229, // 2 exchanges
	"N=2/B=3/static/nodes=false/notrain=false":           0xd38e6f2e2cc4b7a9, // 4 exchanges
	"N=2/B=3/static/nodes=true/notrain=false":            0xb7d1ea7c1e4022d7, // 4 exchanges
	"N=2/B=3/static/nodes=false/notrain=true":            0xd38e6f2e2cc4b7a9, // 4 exchanges
	"N=2/B=3/oracle/nodes=false/notrain=false":           0xb5a7d128db2ceaa2, // 2 exchanges
	"N=2/B=3/oracle/nodes=true/notrain=false":            0x1df55476d60fe842, // 2 exchanges
	"N=2/B=3/oracle/nodes=false/notrain=true":            0xb5a7d128db2ceaa2, // 2 exchanges
	"N=2/B=3/local/nodes=false/notrain=false":            0xb5c32970c12fce61, // 0 exchanges
	"N=2/B=3/local/nodes=true/notrain=false":             0xce8704fed7b084ce, // 0 exchanges
	"N=2/B=3/local/nodes=false/notrain=true":             0xb5c32970c12fce61, // 0 exchanges
	"N=8/B=32/helix/nodes=false/notrain=false":           0xbe69d9e2ba868c73, // 41 exchanges
	"N=8/B=32/helix/nodes=true/notrain=false":            0x1ac655dcd510c7df, // 44 exchanges
	"N=8/B=32/helix/nodes=false/notrain=true":            0x98444c9c30cc7a92, // 14 exchanges
	"N=8/B=32/helix-nogate/nodes=false/notrain=false":    0x361f409b9f67c67c, // 53 exchanges
	"N=8/B=32/helix-nogate/nodes=true/notrain=false":     0x90503b9cfcbd6b47, // 56 exchanges
	"N=8/B=32/helix-nogate/nodes=false/notrain=true":     0x38e7d6071ca75cfd, // 28 exchanges
	"N=8/B=32/static/nodes=false/notrain=false":          0x6d9af2d8902dbbd8, // 31 exchanges
	"N=8/B=32/static/nodes=true/notrain=false":           0xe1239c1e434e3423, // 31 exchanges
	"N=8/B=32/static/nodes=false/notrain=true":           0x6d9af2d8902dbbd8, // 31 exchanges
	"N=8/B=32/oracle/nodes=false/notrain=false":          0x9d127235f0261d59, // 53 exchanges
	"N=8/B=32/oracle/nodes=true/notrain=false":           0xc975188f0e4c717e, // 56 exchanges
	"N=8/B=32/oracle/nodes=false/notrain=true":           0x7b72bb89b0cc177a, // 28 exchanges
	"N=8/B=32/local/nodes=false/notrain=false":           0xc70de998832dc6a,  // 0 exchanges
	"N=8/B=32/local/nodes=true/notrain=false":            0xb863c7500a217e27, // 0 exchanges
	"N=8/B=32/local/nodes=false/notrain=true":            0xc70de998832dc6a,  // 0 exchanges
	"N=37/B=7/helix/nodes=false/notrain=false":           0xcc538aa226672ec1, // 100 exchanges
	"N=37/B=7/helix/nodes=true/notrain=false":            0x71cabb986410a6d7, // 83 exchanges
	"N=37/B=7/helix/nodes=false/notrain=true":            0x58c460ea79c7d1e2, // 52 exchanges
	"N=37/B=7/helix-nogate/nodes=false/notrain=false":    0xa43c53f72539c0fe, // 143 exchanges
	"N=37/B=7/helix-nogate/nodes=true/notrain=false":     0x19322efb95a73f4a, // 133 exchanges
	"N=37/B=7/helix-nogate/nodes=false/notrain=true":     0x887c7428651dd2b2, // 93 exchanges
	"N=37/B=7/static/nodes=false/notrain=false":          0xb69f3ff9fba1792,  // 52 exchanges
	"N=37/B=7/static/nodes=true/notrain=false":           0x339e4a536ff0661f, // 80 exchanges
	"N=37/B=7/static/nodes=false/notrain=true":           0xb69f3ff9fba1792,  // 52 exchanges
	"N=37/B=7/oracle/nodes=false/notrain=false":          0xdc370dfa50b80f85, // 143 exchanges
	"N=37/B=7/oracle/nodes=true/notrain=false":           0x4c328f748eda5e2f, // 133 exchanges
	"N=37/B=7/oracle/nodes=false/notrain=true":           0x2174bbc36e6bb116, // 93 exchanges
	"N=37/B=7/local/nodes=false/notrain=false":           0x8538a46d4e92f05e, // 0 exchanges
	"N=37/B=7/local/nodes=true/notrain=false":            0x28c716fc4641b4bf, // 0 exchanges
	"N=37/B=7/local/nodes=false/notrain=true":            0x8538a46d4e92f05e, // 0 exchanges
	"N=64/B=16/helix/nodes=false/notrain=false":          0x11fb9aa45eaec1ed, // 225 exchanges
	"N=64/B=16/helix/nodes=true/notrain=false":           0x450570cc770704f4, // 245 exchanges
	"N=64/B=16/helix/nodes=false/notrain=true":           0x3ef44b149ee54260, // 108 exchanges
	"N=64/B=16/helix-nogate/nodes=false/notrain=false":   0xc0fa48a23e0a8378, // 239 exchanges
	"N=64/B=16/helix-nogate/nodes=true/notrain=false":    0xd45bf7bf2522d869, // 356 exchanges
	"N=64/B=16/helix-nogate/nodes=false/notrain=true":    0x28bf22b7cb34c687, // 144 exchanges
	"N=64/B=16/static/nodes=false/notrain=false":         0xf783384b9d4ab878, // 156 exchanges
	"N=64/B=16/static/nodes=true/notrain=false":          0x55b9b8cea9f57f69, // 324 exchanges
	"N=64/B=16/static/nodes=false/notrain=true":          0xf783384b9d4ab878, // 156 exchanges
	"N=64/B=16/oracle/nodes=false/notrain=false":         0x2beeb1480e62849e, // 239 exchanges
	"N=64/B=16/oracle/nodes=true/notrain=false":          0xcf2c0be3fac84065, // 356 exchanges
	"N=64/B=16/oracle/nodes=false/notrain=true":          0x8694a42ebb440d4f, // 144 exchanges
	"N=64/B=16/local/nodes=false/notrain=false":          0x74185550c79b51e2, // 0 exchanges
	"N=64/B=16/local/nodes=true/notrain=false":           0x51e85525a31f9d56, // 0 exchanges
	"N=64/B=16/local/nodes=false/notrain=true":           0x74185550c79b51e2, // 0 exchanges
	"N=256/B=32/helix/nodes=false/notrain=false":         0x46bbeb56eaad099c, // 1305 exchanges
	"N=256/B=32/helix/nodes=true/notrain=false":          0x76b5496cb12f3166, // 1333 exchanges
	"N=256/B=32/helix/nodes=false/notrain=true":          0xacc206c23dfb310b, // 616 exchanges
	"N=256/B=32/helix-nogate/nodes=false/notrain=false":  0xe261b0db99ece172, // 1580 exchanges
	"N=256/B=32/helix-nogate/nodes=true/notrain=false":   0x7b17fc43316b671c, // 1645 exchanges
	"N=256/B=32/helix-nogate/nodes=false/notrain=true":   0xcd305916d6b99154, // 943 exchanges
	"N=256/B=32/static/nodes=false/notrain=false":        0x20e7eba92da6f791, // 745 exchanges
	"N=256/B=32/static/nodes=true/notrain=false":         0x37ca9861598aa8d4, // 777 exchanges
	"N=256/B=32/static/nodes=false/notrain=true":         0x20e7eba92da6f791, // 745 exchanges
	"N=256/B=32/oracle/nodes=false/notrain=false":        0xa50f45e5cda33fb1, // 1580 exchanges
	"N=256/B=32/oracle/nodes=true/notrain=false":         0xa0892fb75b8f0c89, // 1645 exchanges
	"N=256/B=32/oracle/nodes=false/notrain=true":         0x6e30fd73ff0fd96,  // 943 exchanges
	"N=256/B=32/local/nodes=false/notrain=false":         0xef6852a32eefb724, // 0 exchanges
	"N=256/B=32/local/nodes=true/notrain=false":          0x9ca6a6ee3ae965d7, // 0 exchanges
	"N=256/B=32/local/nodes=false/notrain=true":          0xef6852a32eefb724, // 0 exchanges
	"N=1024/B=32/helix/nodes=false/notrain=false":        0x6d515f7debe14e09, // 196 exchanges
	"N=1024/B=32/helix/nodes=true/notrain=false":         0x741e92d788cdd69e, // 4798 exchanges
	"N=1024/B=32/helix/nodes=false/notrain=true":         0x6d515f7debe14e09, // 196 exchanges
	"N=1024/B=32/helix-nogate/nodes=false/notrain=false": 0x665099152306b45a, // 5824 exchanges
	"N=1024/B=32/helix-nogate/nodes=true/notrain=false":  0x69ca51770d29f623, // 6056 exchanges
	"N=1024/B=32/helix-nogate/nodes=false/notrain=true":  0x2225445d3bcb923,  // 3235 exchanges
	"N=1024/B=32/static/nodes=false/notrain=false":       0x42068b94a02adea3, // 2382 exchanges
	"N=1024/B=32/static/nodes=true/notrain=false":        0xd1b287a45b1d4f6,  // 2602 exchanges
	"N=1024/B=32/static/nodes=false/notrain=true":        0x42068b94a02adea3, // 2382 exchanges
	"N=1024/B=32/oracle/nodes=false/notrain=false":       0x5e2f0558ddeb1eb6, // 5824 exchanges
	"N=1024/B=32/oracle/nodes=true/notrain=false":        0x4390d035dfbb897a, // 6056 exchanges
	"N=1024/B=32/oracle/nodes=false/notrain=true":        0xbfcf818dbe0c3114, // 3235 exchanges
	"N=1024/B=32/local/nodes=false/notrain=false":        0x9355898096864671, // 0 exchanges
	"N=1024/B=32/local/nodes=true/notrain=false":         0xfcfdb4ffe88b5e76, // 0 exchanges
	"N=1024/B=32/local/nodes=false/notrain=true":         0x9355898096864671, // 0 exchanges
	"N=2048/B=64/helix/nodes=false/notrain=false":        0x48287e6300804f1e, // 17242 exchanges
	"N=2048/B=64/helix/nodes=true/notrain=false":         0xd107480b13f53ff5, // 17260 exchanges
	"N=2048/B=64/helix-nogate/nodes=false/notrain=false": 0x3fd4bc96a94a9105, // 19333 exchanges
	"N=2048/B=64/helix-nogate/nodes=true/notrain=false":  0x468c731b671f0168, // 19339 exchanges
	"N=2048/B=64/static/nodes=false/notrain=false":       0xbbdab9b9bcc1e526, // 4939 exchanges
	"N=2048/B=64/static/nodes=true/notrain=false":        0x599a9b4c796f4426, // 5662 exchanges
	"N=2048/B=64/oracle/nodes=false/notrain=false":       0x7e4964c7d2f1822b, // 19333 exchanges
	"N=2048/B=64/oracle/nodes=true/notrain=false":        0xd9a124ac1d0789a4, // 19339 exchanges
	"N=8192/B=16/helix/nodes=false/notrain=false":        0x93afa649250740f3, // 1765 exchanges
	"N=8192/B=16/helix/nodes=true/notrain=false":         0xff5a7d0b7213dd87, // 1774 exchanges
	"N=8192/B=16/helix-nogate/nodes=false/notrain=false": 0xfb5693b1da92e5ba, // 29365 exchanges
	"N=8192/B=16/helix-nogate/nodes=true/notrain=false":  0x7ffaaf39d431efa5, // 28934 exchanges
	"N=8192/B=16/static/nodes=false/notrain=false":       0x3bad3ce1ba7344ce, // 16700 exchanges
	"N=8192/B=16/static/nodes=true/notrain=false":        0xe078ccfb8d267e4c, // 15495 exchanges
	"N=8192/B=16/oracle/nodes=false/notrain=false":       0x500de6d74e223046, // 29365 exchanges
	"N=8192/B=16/oracle/nodes=true/notrain=false":        0x57865afb9afe98bc, // 28934 exchanges
}

// TestPlansPinned plans inputs of every mode and of sizes up to 8,192
// ranks with one reused Planner, and compares each plan's digest with
// the one recorded.
func TestPlansPinned(t *testing.T) {
	if testing.Short() {
		t.Skip("plans 8,192 ranks")
	}
	var pl Planner
	var p Plan
	shapes := [][2]int{{1, 1}, {2, 3}, {8, 32}, {37, 7}, {64, 16}, {256, 32}, {1024, 32}, {2048, 64}, {8192, 16}}
	seen := 0
	for i, nb := range shapes {
		for mode := range numModes {
			for _, v := range []struct{ nodes, noTrain bool }{{false, false}, {true, false}, {false, true}} {
				if nb[0] >= 2048 && (mode == ModeLocal || v.noTrain) {
					continue
				}
				name := fmt.Sprintf("N=%d/B=%d/%s/nodes=%v/notrain=%v", nb[0], nb[1], mode, v.nodes, v.noTrain)
				in := pinnedInput(uint64(i+1), nb[0], nb[1], mode, v.nodes, v.noTrain)
				if err := pl.Compute(in, &p); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				got := planDigest(&p)
				if *printPinned {
					fmt.Printf("\t%q: %#x, // %d exchanges\n", name, got, len(p.Exchanges))
					continue
				}
				seen++
				if want, ok := pinnedDigests[name]; !ok || got != want {
					t.Errorf("%s: plan digest %#x, want %#x (%d exchanges)", name, got, want, len(p.Exchanges))
				}
			}
		}
	}
	if !*printPinned && seen != len(pinnedDigests) {
		t.Errorf("planned %d inputs, %d digests recorded", seen, len(pinnedDigests))
	}
}
