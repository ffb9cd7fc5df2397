// Package workload holds what the benchmark trains: the workloads
// (bench/workloads/*.json, embedded; Workloads, SelectWorkloads, the
// provisioning rule Workload.GPUStep), the synthetic samples drawn for
// them (Synth) or read from a generated dataset in the runtime's order
// (NewDatasetSamples), and the decode-cost calibration they are priced
// with (Calibrate, measured by datahelix bench calibrate and cached per
// machine; DefaultCalibration otherwise).
//
// docs/benchmarking.md ("Inside the harness") explains the rule and the
// sampling.
package workload
