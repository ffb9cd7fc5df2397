// Package spmd is the per-rank data loader of an MPI job: every rank runs
// a Loader, which reads its samples, allgathers their records and its
// progress, computes the step's plan (the same on every rank, from the
// planner in package plan), exchanges compressed bytes, decodes in
// deadline order and delivers batches to the training loop (Next, or
// Peek for a trainer fed through a server). Config selects helix, the
// zero Kind, or a baseline to measure it against.
//
// The loader runs its goroutines, MPI calls and clocks itself: the
// training loop only asks for the next batch, and the time between its
// requests is the GPU's progress. The implementation lives in the
// module's internal/loader, with the benchmark harness that drives it.
package spmd
