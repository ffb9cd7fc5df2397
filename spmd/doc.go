// Package spmd will hold the per-rank step loop: read, record, allgather,
// plan, exchange compressed bytes, decode in deadline order and deliver
// batches to the training loop.
package spmd
