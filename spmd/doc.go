// Package spmd is the per-rank data loader of an MPI job: every rank runs
// a Loader, which reads its samples, allgathers their records and its
// progress, computes the step's plan (the same on every rank, from
// internal/step), exchanges compressed bytes, decodes in deadline order
// and delivers batches to the training loop (Next, or Peek for a trainer
// fed through the bridge). Config selects helix, the zero Loader, or a
// baseline to measure it against. Run drives a Loader with a simulated
// GPU, as datahelix run does.
//
// The package is the driver only: goroutines, MPI and clocks. The
// decisions of a step are internal/step's, which the simulator
// (internal/sim) drives too.
package spmd
