// Package gpu will hold the GPU side of a rank: step-time tracking,
// deadline prediction and executors (a simulated GPU that models per-batch
// step time and the gradient allreduce).
package gpu
