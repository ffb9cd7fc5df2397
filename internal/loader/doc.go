// Package loader is the per-rank data loader of an MPI job, which the
// public package spmd shows its users: every rank runs a Loader, which
// reads its samples, allgathers their records and its progress, computes
// the step's plan (the same on every rank, from internal/step), exchanges
// compressed bytes, decodes in deadline order and delivers batches to the
// training loop (Next, or Peek for a trainer fed through the bridge).
// Config selects helix, the zero Loader, or a baseline to measure it
// against.
//
// Besides what spmd shows, it holds what the module's commands need of a
// loader: Run drives a Loader with a simulated GPU, as datahelix run
// does, and Finish gathers the records of a loader a trainer drove;
// RunInProcess runs a job's ranks as goroutines; CheckJob checks a job of
// several loaders before the first starts; SampleLog shares the logged
// samples between them.
//
// The package is the driver only: goroutines, MPI and clocks. The
// decisions of a step are internal/step's, which the simulator
// (internal/sim) drives too.
package loader
