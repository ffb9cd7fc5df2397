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
	// KindOracle (simulation only) plans with true costs and free
	// transfers: the lower bound.
	KindOracle
)

var kindNames = []string{"helix", "torch", "local", "static", "helix-nogate", "oracle"}

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
		strings.Join(kindNames[:KindOracle], ", "), KindOracle)
}

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
	return k == KindStatic || k == KindHelix || k == KindHelixNoGate || k == KindOracle
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
	case KindHelix:
		return plan.ModeHelix
	}
	return plan.ModeLocal
}

// Splits reports whether the loader splits heavy clips into
// keyframe-aligned tasks. PyTorch never does.
func (k Kind) Splits() bool { return k != KindTorch }

// NewScheduler returns the loader's decode policy.
func (k Kind) NewScheduler(workers, prefetch int, budget int64) Scheduler {
	if k == KindTorch {
		return NewTorch(workers, prefetch)
	}
	return NewEDF(budget)
}
