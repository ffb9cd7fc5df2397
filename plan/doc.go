// Package plan will hold the deterministic, coordinator-free assignment
// planner: every rank feeds it the same allgathered records and progress and
// gets the same assignment of samples to ranks. It imports nothing of the
// project, reads no clock and uses integer arithmetic only.
package plan
