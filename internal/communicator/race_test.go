//go:build race

package communicator_test

// raceEnabled is true under the race detector, which makes the suite's
// 16 MiB messages about ten times slower.
const raceEnabled = true
