//go:build !race

package communicator_test

const raceEnabled = false
