package eval

import "github.com/datahelix/datahelix/internal/sim"

// DefaultOverheads are what a planned loader's own work costs the
// simulation per step (sim.Overheads; the allgather's wall time follows
// the simulated network), from the microbenchmarks measured on the 2-core
// development machine:
//
//   - the plan: datahelix bench plan --batch 16 gave a CPU p50 of 23 µs at
//     8 ranks, 182 µs at 64 and 679 µs at 512, and plan's BenchmarkCompute
//     about 16 ms at 8192 x 16: 0.08 to 0.18 µs per sample of the world's
//     batch; 0.2 µs (200 ns) is charged, every rank computing the plan;
//   - the exchange's copies: datahelix bench exchange moved 16 samples
//     (4.7 MB) in 0.47 to 0.71 ms a message on shared memory, about
//     130 µs of CPU per MB, charged to the sender and the receiver.
//
// They were free before (issue 27 §3); a machine's own figures can
// replace them.
var DefaultOverheads = sim.Overheads{PlanNSPerSample: 200, ExchangeUSPerMB: 130}
