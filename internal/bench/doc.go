// Package bench is the benchmark harness as datahelix bench runs it: it
// evaluates the loaders — torch, local, static, helix, helix-nogate and
// the simulation-only oracle — on the workloads, simulated (eval) or for
// real (realrun, RunReal), and assembles the report (BuildReport) with
// its sections in the order of the sections table (SectionNames).
//
// The sections measured here are the planner's time versus ranks
// (RunPlanBench), the scale run, the allgather latency and the exchange
// throughput under mpirun (GoExchange against a raw MPI send/receive),
// the decoder against ffmpeg, and two nodes on one machine versus the
// link rate ("links"); the validation and real sections are realrun's.
//
// The harness is five packages, each importing only those before it:
// workload (workloads, samples, calibration), eval (the simulation),
// report (the report, goals, sections, files), realrun (real runs and
// their replay) and this one. docs/benchmarking.md ("Inside the
// harness") says how they work together.
//
// The bodies of datahelix bench, bench plan and bench calibrate are here
// too (Command, PlanCommand, CalibrateCommand): their flags, checked
// before any work, and their output. bench exchange, an MPI job, is the
// launcher's.
package bench
