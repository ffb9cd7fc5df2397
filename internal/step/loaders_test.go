package step

import (
	"slices"
	"strings"
	"testing"
)

// TestParseKind: every loader parses back from its name; an unknown one
// is refused with the loaders a run takes, oracle marked as simulated.
func TestParseKind(t *testing.T) {
	for k := KindHelix; k <= KindTorchPack; k++ {
		if got, err := ParseKind(" " + k.String() + " "); err != nil || got != k {
			t.Errorf("ParseKind(%q) = %v, %v; want %v", k.String(), got, err, k)
		}
	}
	_, err := ParseKind("foo")
	if err == nil || !strings.Contains(err.Error(), `"foo"`) ||
		!strings.Contains(err.Error(), "want helix, torch, local, static, helix-nogate, helix-notrain; oracle, torch-ddp, torch-pack in simulations only") {
		t.Errorf("ParseKind(foo): %v", err)
	}
	if ks, err := ParseKinds("torch, helix"); err != nil || !slices.Equal(ks, []Kind{KindTorch, KindHelix}) {
		t.Errorf("ParseKinds: %v, %v", ks, err)
	}
	for list, want := range map[string]string{"torch,,helix": "empty item", "helix,": "empty item", "": "empty item",
		"torch,helix,helix": "loader helix listed twice"} {
		if _, err := ParseKinds(list); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseKinds(%q): %v, want an error with %q", list, err, want)
		}
	}
}
