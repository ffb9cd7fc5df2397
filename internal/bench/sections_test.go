package bench

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/datahelix/datahelix/internal/bench/eval"
	"github.com/datahelix/datahelix/internal/bench/report"
)

// withSections restores the sections table after a test changes it.
func withSections(t *testing.T) {
	saved := slices.Clone(sections)
	t.Cleanup(func() { sections = saved })
}

func TestSectionsOrderAndFailure(t *testing.T) {
	withSections(t)
	want := []string{"planner", "scale", "ratio", "tradeoff", "ranks", "allgather", "exchange", "decode", "validation", "real", "bridge", "links"}
	if got := SectionNames(); !slices.Equal(got, want) {
		t.Fatalf("sections %v, want %v", got, want)
	}
	env := &report.SectionEnv{Mode: "sim", Ranks: 8, Seed: 1}
	// Stand-ins for two measured sections and an extra one: a section
	// that fails comes back failed and the others still run, in the
	// table's order whatever order they are asked in.
	sections = []sectionDef{
		{name: "exchange", title: "Exchange", run: func(ctx context.Context, env *report.SectionEnv) (*report.Section, error) {
			return nil, errors.New("mpirun not found")
		}},
		{name: "decode", title: "Decode", run: func(ctx context.Context, env *report.SectionEnv) (*report.Section, error) {
			return &report.Section{Columns: []string{"preset", "ratio"}, Rows: [][]any{{"kinetics", 1.1}}, Headline: "1.1x"}, nil
		}},
		{name: "extra", title: "An extra section", run: func(ctx context.Context, env *report.SectionEnv) (*report.Section, error) {
			return &report.Section{Headline: "x"}, nil
		}},
	}
	got := RunSections(context.Background(), env, []string{"decode", "exchange", "extra"})
	if len(got) != 3 {
		t.Fatalf("ran %d sections, want 3", len(got))
	}
	if s := got[0]; s.Name != "exchange" || s.Status != report.SectionFailed || s.Note != "mpirun not found" {
		t.Errorf("failing section: %+v", s)
	}
	if s := got[1]; s.Name != "decode" || s.Status != report.SectionMeasured || s.Title == "" || len(s.Rows) != 1 {
		t.Errorf("measured section: %+v", s)
	}
	if s := got[2]; s.Name != "extra" || s.Title != "An extra section" || s.Status != report.SectionMeasured {
		t.Errorf("extra section: %+v", s)
	}
	if got := RunSections(context.Background(), env, []string{"decode"}); len(got) != 1 || got[0].Name != "decode" {
		t.Errorf("asking for decode alone ran %+v", got)
	}
}

func TestPlannerSection(t *testing.T) {
	s, err := plannerSection(context.Background(), &report.SectionEnv{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Rows) != len(PlannerRanks) || len(s.Rows[0]) != len(s.Columns) {
		t.Fatalf("%d rows of %d cells for %d columns", len(s.Rows), len(s.Rows[0]), len(s.Columns))
	}
	for i, row := range s.Rows {
		if row[0] != PlannerRanks[i] || row[1] != PlannerRanks[i]*plannerBatch || !(row[2].(float64) > 0) {
			t.Errorf("row %d = %v", i, row)
		}
	}
	if !strings.Contains(s.Headline, "1024 ranks") {
		t.Errorf("headline %q", s.Headline)
	}
}

func TestValidationSection(t *testing.T) {
	r := func(w, l string, wait, miss float64) eval.Result {
		return eval.Result{Workload: w, Loader: l, Ranks: 4, GPUWaitFrac: wait, MissRate: miss}
	}
	sim := []eval.Result{r("k", "torch", 0.30, 0.40), r("k", "local", 0.10, 0.10), r("k", "helix", 0.005, 0.02), r("k", "static", 0.2, 0.2)}
	real := []eval.Result{r("k", "torch", 0.26, 0.35), r("k", "local", 0.13, 0.10), r("k", "helix", 0.008, 0.15), r("m", "torch", 0.1, 0.1)}
	s := report.ValidationSection(sim, real)
	want := []bool{
		true,  // wait 15 % off, miss 0.05 off
		false, // wait 23 % off
		false, // waits tiny, but miss 0.13 off
	}
	if len(s.Rows) != len(want) {
		t.Fatalf("%d rows, want %d (pairs present in both)", len(s.Rows), len(want))
	}
	for i, w := range want {
		if got := s.Rows[i][slices.Index(s.Columns, "agrees")]; got != w {
			t.Errorf("row %v: agrees = %v, want %v", s.Rows[i], got, w)
		}
	}
	if !strings.Contains(s.Headline, "1 of 3") {
		t.Errorf("headline %q", s.Headline)
	}
	if a := s.Agreement; a == nil || *a != (report.Agreement{Agree: 1, Runs: 3}) {
		t.Errorf("agreement %+v, want 1 of 3", a)
	}
	if s := report.ValidationSection(sim, nil); s.Status != report.SectionSkipped || s.Agreement != nil {
		t.Errorf("no real runs: status %s, agreement %+v, want skipped and none", s.Status, s.Agreement)
	}
	// Tiny waits on both sides agree whatever their ratio.
	if ok, _, _ := report.Agrees(r("k", "helix", 0.001, 0), r("k", "helix", 0.004, 0)); !ok {
		t.Error("waits of 0.1 % and 0.4 % of wall must agree")
	}
}

// TestScaleSectionTitleAndFlags checks that the scale section's title
// gives the world size it was asked to simulate, and that a size the
// simulator refuses names --scale-ranks (not --ranks), before any work.
func TestScaleSectionTitleAndFlags(t *testing.T) {
	for _, tt := range []struct {
		scale eval.ScaleConfig
		title string
	}{
		{eval.ScaleConfig{}, "Scale: simulated 8192 ranks"},
		{eval.ScaleConfig{Workload: "panda70m", Loader: eval.DefaultScale.Loader, Ranks: 64, Batch: 16, Steps: 100}, "Scale: simulated 64 ranks"},
	} {
		if got := scaleTitle(&report.SectionEnv{Scale: tt.scale}); got != tt.title {
			t.Errorf("scale %+v: title %q, want %q", tt.scale, got, tt.title)
		}
	}
	env := &report.SectionEnv{Mode: "sim", Ranks: 8, Seed: 1, Scale: eval.ScaleConfig{Workload: "panda70m", Ranks: 70000, Batch: 16, Steps: 100}}
	got := RunSections(context.Background(), env, []string{"scale"})
	if len(got) != 1 || got[0].Status != report.SectionFailed || got[0].Title != "Scale: simulated 70000 ranks" ||
		!strings.HasPrefix(got[0].Note, "bench: --scale-ranks 70000: want 1..") {
		t.Errorf("scale at 70000 ranks: %+v, want a failed section titled with 70000 ranks naming --scale-ranks", got)
	}
	for _, tt := range []struct {
		edit func(c *eval.ScaleConfig)
		want string // "" for none
	}{
		{func(c *eval.ScaleConfig) {}, ""},
		{func(c *eval.ScaleConfig) { c.Ranks = 0 }, "--scale-ranks 0"}, // a flag's 0 is refused, not taken as the default
		{func(c *eval.ScaleConfig) { c.Ranks = 70000 }, "--scale-ranks 70000"},
		{func(c *eval.ScaleConfig) { c.Ranks = -1 }, "--scale-ranks -1"},
		{func(c *eval.ScaleConfig) { c.Batch = 100000 }, "--scale-batch 100000"},
		{func(c *eval.ScaleConfig) { c.Batch = 0 }, "--scale-batch 0"},
		{func(c *eval.ScaleConfig) { c.Steps = -3 }, "--scale-steps -3"},
		{func(c *eval.ScaleConfig) { c.Steps = 0 }, "--scale-steps 0"},
		{func(c *eval.ScaleConfig) { c.Workload = "nope" }, "--scale-workload"},
	} {
		cfg := eval.DefaultScale
		tt.edit(&cfg)
		err := cfg.Check()
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("Check(%+v) = %v, want %q", cfg, err, tt.want)
		}
	}
}

// TestRunSectionsStopsWhenCancelled checks that no section starts after
// the context is cancelled (an interrupt would otherwise wait for each).
func TestRunSectionsStopsWhenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	env := &report.SectionEnv{Mode: "sim", Ranks: 8, Seed: 1}
	if got := RunSections(ctx, env, []string{"planner", "scale"}); len(got) != 0 {
		t.Errorf("got %d sections after the cancel, want none", len(got))
	}
}
