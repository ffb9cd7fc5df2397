// Package planlimits holds the limits on the planner's input: package
// plan refuses a value beyond them (plan.Input.Validate, plan.AppendBlock,
// plan.DecodeInput), and the module's code clamps measurements to them or
// checks its flags against them before a value reaches the planner. They
// keep every intermediate product of the planner inside int64 (a rank's
// work times plan.One, a sample's bytes times plan.One) with room to
// spare, and they are far above anything a real job produces.
//
// It is the one place the values are written; plan imports it and
// nothing else of the project.
package planlimits

// The limits, each an inclusive maximum except Ranks (ranks and nodes are
// numbered below it).
const (
	Ranks     = 1 << 16 // world size N
	Batch     = 1 << 12 // per-rank batch size B
	Cost      = 1 << 32 // µs of reference CPU per sample (about 71 minutes)
	Bytes     = 1 << 34 // compressed bytes per sample (16 GiB)
	Time      = 1 << 40 // deadlines, backlogs and the gate margin, µs (about 12 days)
	Capacity  = 1 << 32 // fixed-point: 65,536 reference CPUs
	Bandwidth = 1 << 44 // fixed-point bytes/µs: 2^28 bytes/µs, about 268 TB/s
	Latency   = 1 << 32 // µs per message
	Train     = 1 << 40 // ns of GPU time per sample (about 18 minutes)
)
