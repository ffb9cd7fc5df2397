// Package bench will hold the workloads, baselines, the discrete-event
// simulator used at scale and the report (tables, CSV, JSON and plots).
package bench
