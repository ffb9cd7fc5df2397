// Package cmdinfo names the commands of datahelix-bench, the binary that
// holds the benchmark harness and its plotting: their names and one-line
// summaries, which datahelix lists in its help and runs in that binary,
// so that datahelix itself links none of the harness.
package cmdinfo

// Binary is the name of the benchmark binary, installed beside datahelix
// (./mpirun.sh builds both into .bin; go install ./cmd/... installs both),
// and BinaryEnv the environment variable that may name its path instead.
// Main and MainEnv are datahelix's, which runs bench exchange (an MPI
// job) for datahelix-bench.
const (
	Binary    = "datahelix-bench"
	BinaryEnv = "DATAHELIX_BENCH"
	Main      = "datahelix"
	MainEnv   = "DATAHELIX_MAIN"
	// Exchange is the bench command that stays in datahelix.
	Exchange = "bench exchange"
)

// The benchmark commands, as typed after datahelix.
const (
	Bench     = "bench"
	Plan      = "bench plan"
	Calibrate = "bench calibrate"
)

// Their summaries in the command list.
const (
	BenchSummary     = "evaluate the loaders on the 16 workloads (simulated at 8..8192 ranks, or real): table, CSV, JSON, PNG figures, goals, microbenchmarks"
	PlanSummary      = "time the planner on heavy-tailed video inputs and write plan_us, allocations and quality as JSON"
	CalibrateSummary = "decode generated datasets of every preset, fit the cost model the simulator draws costs from, cache it for this machine and commit"
	ExchangeSummary  = "time moving compressed samples between 2 ranks: the exchange path versus the same path packing first and bare sends (run under mpirun -np 2)"
)
