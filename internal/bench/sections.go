package bench

import (
	"context"
	"fmt"
	"io"
	"slices"

	"github.com/datahelix/datahelix/internal/costmodel"
)

// Section is one optional part of the report: a microbenchmark, the
// scale run, the simulator's validation. Rows hold numbers (float64,
// int) or strings, one per column; Headline is the ratio that matters.
type Section struct {
	Name     string   `json:"name"`
	Title    string   `json:"title"`
	Status   string   `json:"status"`
	Note     string   `json:"note,omitempty"`
	Headline string   `json:"headline,omitempty"`
	Columns  []string `json:"columns,omitempty"`
	Rows     [][]any  `json:"rows,omitempty"`
	// Scale is the scale run's result (section "scale" only).
	Scale *ScaleResult `json:"scale,omitempty"`
	// Agreement counts the simulated runs that agree with the real ones
	// (section "validation" only, when it compared any).
	Agreement *Agreement `json:"agreement,omitempty"`
}

// Agreement is the validation's verdict: of Runs simulated runs, Agree
// agree with the real runs of the same setup (ValidationSection's rule).
type Agreement struct {
	Agree int `json:"agree"`
	Runs  int `json:"runs"`
}

// Section statuses.
const (
	SectionMeasured = "measured"
	SectionFailed   = "failed"
	SectionSkipped  = "skipped"
)

// SectionEnv is what a section function may use: the run's settings and
// the main evaluation (nil when the report has none).
type SectionEnv struct {
	Mode        string // "sim" or "real"
	Ranks       int
	Seed        uint64
	Workloads   []*Workload
	Calibration *costmodel.Calibration
	Eval        *Evaluation
	Scale       ScaleConfig
	// OutDir is where the report's files go (a section may add its own).
	OutDir string
	// Log receives progress lines (never nil).
	Log io.Writer
}

// SectionFunc measures one section. It returns the section with Columns
// and Rows filled (Name, Title and Status are set by RunSections when
// left empty), or an error, which the report shows as a failed section.
type SectionFunc func(ctx context.Context, env *SectionEnv) (*Section, error)

// sectionDef is a named place in the report and the function that
// measures it. titleOf, when set, gives a title that depends on the run
// (title is then unused).
type sectionDef struct {
	name, title string
	titleOf     func(env *SectionEnv) string
	run         SectionFunc
}

// titleFor is the section's title in the run of env.
func (h sectionDef) titleFor(env *SectionEnv) string {
	if h.titleOf != nil {
		return h.titleOf(env)
	}
	return h.title
}

// sections are the report's sections, in order.
var sections = []sectionDef{
	{name: "planner", title: "Planner time versus ranks (8 -> 1024, B=16)", run: plannerSection},
	{name: "scale", titleOf: scaleTitle, run: scaleSection},
	{name: "allgather", title: "Allgather latency versus ranks (real MPI, 2 -> 8 ranks, oversubscribed on this machine)", run: allgatherSection},
	{name: "exchange", title: "Exchange throughput: the Go path versus a raw MPI send/receive of the same bytes", run: exchangeSection},
	{name: "decode", title: "Decode time versus ffmpeg -threads 1 on the same clips", run: decodeSection},
	{name: "validation", title: "Simulator versus real runs (4 ranks, generated data; torch, local, helix)", run: validationSection},
	{name: "real", title: "Real runs: generated datasets and their provisioning on this machine", run: realSection},
	{name: "links", title: "Two nodes on this machine (2 x 2 ranks, default dataset): throughput and bytes moved versus the inter-node link rate", run: linksSection},
}

// SectionNames lists the report's sections in order.
func SectionNames() []string {
	out := make([]string, len(sections))
	for i, d := range sections {
		out[i] = d.name
	}
	return out
}

// RunSections runs the named sections (all when names is nil) in report
// order. One that fails comes back failed with the error, so the rest of
// the report is still written.
func RunSections(ctx context.Context, env *SectionEnv, names []string) []Section {
	if env.Log == nil {
		env.Log = io.Discard
	}
	var out []Section
	for _, h := range sections {
		if ctx.Err() != nil {
			break // interrupted: the command reports the cause, not a failed section each
		}
		if names != nil && !slices.Contains(names, h.name) {
			continue
		}
		fmt.Fprintf(env.Log, "bench: section %s\n", h.name)
		s, err := h.run(ctx, env)
		if err != nil {
			out = append(out, Section{Name: h.name, Title: h.titleFor(env), Status: SectionFailed, Note: err.Error()})
			continue
		}
		if s.Name == "" {
			s.Name = h.name
		}
		if s.Title == "" {
			s.Title = h.titleFor(env)
		}
		if s.Status == "" {
			s.Status = SectionMeasured
		}
		out = append(out, *s)
	}
	return out
}
