// Package step is one step of a loader, pure: what a rank contributes to
// the step's allgather, the plan every rank computes from the gathered
// blocks, and the decode order and tasks of a rank's batch. It holds no
// goroutine, clock or I/O, so the runtime (internal/loader, which adds MPI,
// workers and clocks) and the simulator (package sim, which adds a
// virtual clock) drive the same code, and a decision cannot differ
// between them.
package step
