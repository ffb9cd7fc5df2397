// Package bench holds the benchmark's workloads: training jobs built from
// public datasets' published statistics, one JSON file each under
// workloads/, with their sources and fields in workloads/README.md.
// `datahelix bench` runs them (the harness is internal/bench; see
// docs/benchmarking.md).
package bench

import "embed"

// Workloads are the workload definitions, workloads/*.json.
//
//go:embed workloads/*.json
var Workloads embed.FS
