// Package gpu is the GPU side of a rank: it follows the training loop's
// progress (Tracker) to predict when the GPU will need each upcoming batch,
// and models a step's compute time from what the batch holds (Model,
// Contents), which the planner uses to even out the GPU work across
// ranks and the module's simulated GPU waits for.
//
// The step-time estimate is the median of the last StepWindow measured
// compute times. A median ignores the occasional outlier (a garbage
// collection, a checkpoint write, one step that waited on a straggler
// inside the allreduce) that would drag an exponentially weighted mean for
// many steps, and it follows a lasting change of rate within half a window.
package gpu
