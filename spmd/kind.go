package spmd

import "github.com/datahelix/datahelix/internal/step"

// Kind selects a loader: helix, or a baseline to measure it against.
// Every kind sees the same global batch each step; they differ only in
// where and in what order samples are prepared.
type Kind = step.Kind

// The loaders: helix, the zero value, then the baselines (see
// docs/design.md).
const (
	KindHelix       = step.KindHelix       // deadline- and progress-driven balancing with the transfer gate
	KindTorch       = step.KindTorch       // PyTorch's DataLoader: count-based split, in-order delivery
	KindLocal       = step.KindLocal       // rank-local, earliest deadline first, heavy clips split
	KindStatic      = step.KindStatic      // balanced from the records alone, without progress
	KindHelixNoGate = step.KindHelixNoGate // helix without the transfer gate
	KindOracle      = step.KindOracle      // simulation only: true costs, free transfers
)
