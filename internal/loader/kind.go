package loader

import "github.com/datahelix/datahelix/internal/step"

// Kind selects a loader: helix, or a baseline to measure it against.
// Every kind sees the same global batch each step; they differ only in
// where and in what order samples are prepared. Its values are
// internal/step's kinds, which decide what each loader does.
type Kind int

// The loaders: helix, the zero value, then the baselines (see
// docs/design.md).
const (
	KindHelix        = Kind(step.KindHelix)        // deadline- and progress-driven balancing with the transfer gate
	KindTorch        = Kind(step.KindTorch)        // PyTorch's DataLoader: count-based split, in-order delivery
	KindLocal        = Kind(step.KindLocal)        // rank-local, earliest deadline first, heavy clips split
	KindStatic       = Kind(step.KindStatic)       // balanced from the records alone, without progress
	KindHelixNoGate  = Kind(step.KindHelixNoGate)  // helix without the transfer gate
	KindHelixNoTrain = Kind(step.KindHelixNoTrain) // helix without GPU-work balancing
	KindOracle       = Kind(step.KindOracle)       // simulation only: true costs, free transfers
)

// String returns the loader's flag name: "helix", "torch", "local",
// "static", "helix-nogate" or "helix-notrain".
func (k Kind) String() string { return step.Kind(k).String() }

// stepKind is the step's kind, which decides what the loader does.
func (k Kind) stepKind() step.Kind { return step.Kind(k) }
