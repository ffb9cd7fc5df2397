// Package gpu is the GPU side of a rank: it follows the training loop's
// progress (Tracker) to predict when the GPU will need each upcoming batch,
// and executes steps on machines without a GPU (Simulated), modelling the
// per-batch compute time and the gradient allreduce that holds every rank
// back to the slowest one, as lockstep data-parallel training does.
//
// The step-time estimate is the median of the last StepWindow measured
// compute times. A median ignores the occasional outlier (a garbage
// collection, a checkpoint write, one step that waited on a straggler
// inside the allreduce) that would drag an exponentially weighted mean for
// many steps, and it follows a lasting change of rate within half a window.
package gpu
