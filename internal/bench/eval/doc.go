// Package eval runs the benchmark's evaluation through the simulator:
// every workload with every loader (RunSim, configured by EvalConfig,
// measured into Results), and the scale run of one loader on many ranks
// (RunScale). The simulator (internal/sim) shares the runtime's
// scheduling policies, task building, rank progress and the real planner.
package eval
