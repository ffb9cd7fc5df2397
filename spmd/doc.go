// Package spmd holds the per-rank step loop: read, record, allgather,
// plan, exchange compressed bytes, decode in deadline order and deliver
// batches to the training loop (Loader, Run), the loaders it compares
// (Kind: torch, local, static, helix, helix-nogate, oracle) with their
// worker scheduling policies, and Simulate, which runs the same policies
// and planner on a virtual clock: one event queue for every rank, decode
// times taken from the samples, optionally with ranks sharing cores.
package spmd
