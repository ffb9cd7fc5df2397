package step

import (
	"fmt"
	"slices"
	"strings"

	"github.com/datahelix/datahelix/plan"
)

// Kind selects a loader. Every kind sees the same global batch each step;
// they differ only in where and in what order samples are prepared.
type Kind int

// The loaders: helix, the zero value, then the baselines it is measured
// against.
const (
	// KindHelix is the full system: deadline- and progress-driven
	// balancing with the transfer-cost gate.
	KindHelix Kind = iota
	// KindTorch reproduces PyTorch's DataLoader: count-based split, whole
	// batch per worker, round-robin, in-order delivery, prefetch factor 2.
	KindTorch
	// KindLocal is the strong rank-local loader: samples stay with their
	// owner, every worker of the rank takes tasks earliest deadline first,
	// heavy clips are split.
	KindLocal
	// KindStatic balances estimated cost across ranks from the records
	// alone, without progress (a cost-aware load-balancing sampler).
	KindStatic
	// KindHelixNoGate is helix without the transfer-cost gate.
	KindHelixNoGate
	// KindHelixNoTrain is helix without the planner's last phase, which
	// evens out the ranks' GPU work (plan.Params.NoTrain): cross-rank
	// decode balancing alone.
	KindHelixNoTrain

	// The loaders from here on exist in simulation only (SimOnly).

	// KindOracle plans with true costs and free transfers: the lower
	// bound.
	KindOracle
	// KindTorchDDP is torch over a map-style dataset under PyTorch's
	// DistributedSampler: the same workers, but a global shuffle of the
	// epoch of which each rank takes every N-th sample, so every rank
	// mixes every source. Its difference from torch is the data layout,
	// which the simulator's sample source gives it.
	KindTorchDDP
	// KindTorchPack is torch with the global batch packed across ranks
	// by GPU work (frames, tokens) before decoding, as a user can without
	// datahelix (PackTrain): each rank then reads and decodes the samples
	// it trains, with torch's workers.
	KindTorchPack
)

var kindNames = []string{"helix", "torch", "local", "static", "helix-nogate", "helix-notrain", "oracle", "torch-ddp", "torch-pack"}

// String returns the flag name of the loader.
func (k Kind) String() string {
	if k >= 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// ParseKind parses a loader name as used by --loader.
func ParseKind(s string) (Kind, error) {
	if i := slices.Index(kindNames, strings.TrimSpace(s)); i >= 0 {
		return Kind(i), nil
	}
	return 0, fmt.Errorf("unknown loader %q (want %s; %s in simulations only)", s,
		strings.Join(kindNames[:KindOracle], ", "), strings.Join(kindNames[KindOracle:], ", "))
}

// SimOnly reports whether the loader exists in simulation only: the
// oracle needs true costs; torch-ddp needs a map-style sampler and
// torch-pack every sample's GPU work on every rank before reading, which
// the runtime's reader does not provide.
func (k Kind) SimOnly() bool { return k >= KindOracle }

// Torch reports whether the loader prepares batches as PyTorch's
// DataLoader does (NewTorch): torch and its two variants.
func (k Kind) Torch() bool { return k == KindTorch || k == KindTorchDDP || k == KindTorchPack }

// ParseKinds parses a comma-separated list of loaders. An empty item
// ("a,,b") or a loader listed twice is refused: results are told apart
// by loader, so a repeat would show one run twice.
func ParseKinds(s string) ([]Kind, error) {
	var out []Kind
	for _, f := range strings.Split(s, ",") {
		if strings.TrimSpace(f) == "" {
			return nil, fmt.Errorf("empty item in %q", s)
		}
		k, err := ParseKind(f)
		if err != nil {
			return nil, err
		}
		if slices.Contains(out, k) {
			return nil, fmt.Errorf("loader %s listed twice in %q", k, s)
		}
		out = append(out, k)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no loader in %q", s)
	}
	return out, nil
}

// Planned reports whether the loader allgathers records and runs the
// planner every step.
func (k Kind) Planned() bool {
	return k == KindStatic || k == KindHelix || k == KindHelixNoGate || k == KindHelixNoTrain || k == KindOracle
}

// PlanMode is the planner mode of a planned loader.
func (k Kind) PlanMode() plan.Mode {
	switch k {
	case KindStatic:
		return plan.ModeStatic
	case KindHelixNoGate:
		return plan.ModeHelixNoGate
	case KindOracle:
		return plan.ModeOracle
	case KindHelix, KindHelixNoTrain:
		return plan.ModeHelix
	}
	return plan.ModeLocal
}

// Splits reports whether the loader splits heavy clips into
// keyframe-aligned tasks. PyTorch never does.
func (k Kind) Splits() bool { return !k.Torch() }

// NewScheduler returns the loader's decode policy.
func (k Kind) NewScheduler(workers, prefetch int, budget int64) Scheduler {
	if k.Torch() {
		return NewTorch(workers, prefetch)
	}
	return NewEDF(budget)
}
