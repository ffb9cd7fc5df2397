package loader

import "errors"

// ErrPlanMismatch matches the error a Loader returns when the ranks no
// longer plan alike: their allgathered blocks carry other planner
// parameters, or the hashes of their plans differ at a --check-every
// step. Every rank plans from the same bytes, so either means a rank runs
// other settings or another build; retrying the job will not help.
var ErrPlanMismatch = errors.New("spmd: the ranks' plans differ")

// planMismatchError is an error that matches ErrPlanMismatch and reads
// as the error it wraps, which names the step and the ranks.
type planMismatchError struct{ err error }

func (e planMismatchError) Error() string        { return e.err.Error() }
func (e planMismatchError) Unwrap() error        { return e.err }
func (e planMismatchError) Is(target error) bool { return target == ErrPlanMismatch }
