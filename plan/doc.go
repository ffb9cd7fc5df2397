// Package plan is the deterministic, coordinator-free assignment planner.
// Every rank feeds it the same allgathered input — each rank's progress
// and the lightweight records of the B samples it read — and gets the same
// plan: which rank decodes and trains on each sample (exactly B per rank,
// so the global batch is unchanged), each rank's decode order, predicted
// finish and lateness, the messages to exchange, and a 64-bit hash the
// ranks compare. It does no I/O and imports nothing of the project but
// the constants of its limits (internal/planlimits).
//
// Every rank, every step, for the batch H steps ahead:
//
//	blk := plan.Block{Params: params, Step: step, Rank: rank, Progress: prog, Samples: mine}
//	send, err := plan.AppendBlock(send[:0], &blk)   // plan.BlockSize(B) bytes
//	err = comm.Allgather(send, recv)                  // N blocks in rank order
//	err = plan.DecodeInput(recv, &in)                 // names a rank that disagrees
//	err = planner.Compute(&in, &p)                    // reuses memory: 0 allocations
//	for _, m := range p.Sends(rank)    { pack m.Samples in order; one Isend of m.Bytes to m.Dst }
//	for _, m := range p.Receives(rank) { one Irecv of m.Bytes from m.Src; unpack m.Samples in order }
//	decode p.DecodeOrder(rank)
//
// Params (mode, seed, gate margin) travel in every block, so a rank
// started with other flags is named by DecodeInput instead of silently
// planning differently. ModeLocal gives the rank-local loaders the
// identity plan with the same decode order and predictions.
//
// All quantities are int64: times in µs from the instant the progress was
// measured, sizes in bytes, costs in µs of reference CPU, a sample's GPU
// time (Sample.Train) in ns; capacity and bandwidth are fixed-point with
// One = 1.0. Values outside the limits (Input.Validate states them) are
// errors (ErrInput, ErrBlock), never panics.
//
// The objective is lexicographic: fewest late ranks, then the smallest
// maximum lateness, then the fewest bytes moved; once every rank is on
// time, even out the GPU work. Under ModeHelix an exchange that removes
// lateness sends a sample away from its owner only if the lateness it
// removes exceeds the transfer time plus Params.Margin; Params.NoTrain
// leaves out the last objective (no GPU-work evening). Integer
// arithmetic, total orders, no clock, map, goroutine or randomness:
// every rank computes the bit-identical plan.
//
// docs/planner.md holds the model in full, the algorithm and why it was
// chosen, and its measurements.
package plan
