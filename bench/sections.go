package bench

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
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
}

// Section statuses.
const (
	SectionMeasured = "measured"
	SectionPending  = "pending" // no implementation registered yet
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
	Calibration *Calibration
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

// sectionHook is a named place in the report.
type sectionHook struct {
	name, title string
	pending     string // what a pending section will hold
	run         SectionFunc
}

var (
	hooksMu sync.Mutex
	// hooks are the report's sections, in order. Those without run are
	// printed as pending until an implementation registers (see
	// RegisterSection).
	hooks = []*sectionHook{
		{name: "planner", title: "Planner time versus ranks (8 -> 1024, B=16)", run: plannerSection},
		{name: "scale", title: "Scale: simulated 1024 ranks", run: scaleSection},
		{name: "allgather", title: "Allgather latency versus ranks (real MPI, 2 -> 8 ranks, oversubscribed on this machine)",
			pending: "real runs: mpirun -np N datahelix ... for N = 2, 4, 8 (--oversubscribe); rows: ranks, block bytes, allgather µs p50/p99, ratio vs 2 ranks"},
		{name: "exchange", title: "Exchange throughput: the Go path versus a raw MPI send/receive of the same bytes",
			pending: "one mpirun job sends the same compressed samples through spmd's exchange and through a bare MPI_Isend/MPI_Irecv loop; rows: message size, Go MB/s, raw MB/s, ratio"},
		{name: "decode", title: "Decode time versus ffmpeg -threads 1 on the same clips",
			pending: "per preset: decoder thread CPU time versus `ffmpeg -threads 1` decoding the same frames; rows: preset, clips, ours ms, ffmpeg ms, ratio"},
		{name: "validation", title: "Simulator versus real runs (4 ranks, generated data; torch, local, helix)",
			pending: "real runs with --real at 4 ranks next to --sim runs of the same workloads; ValidationSection(sim, real) builds the table (wait fraction within 20 % relative, miss rate within 0.10 absolute)"},
	}
)

// SectionNames lists the report's sections in order.
func SectionNames() []string {
	hooksMu.Lock()
	defer hooksMu.Unlock()
	out := make([]string, len(hooks))
	for i, h := range hooks {
		out[i] = h.name
	}
	return out
}

// RegisterSection installs the implementation of a section: one of the
// pending ones (allgather, exchange, decode, validation) or a new one,
// appended. Call it from an init function of the file that implements
// it.
func RegisterSection(name, title string, f SectionFunc) {
	hooksMu.Lock()
	defer hooksMu.Unlock()
	for _, h := range hooks {
		if h.name == name {
			h.run = f
			if title != "" {
				h.title = title
			}
			return
		}
	}
	hooks = append(hooks, &sectionHook{name: name, title: title, run: f})
}

// RunSections runs the named sections (all when names is nil) in report
// order. A section without an implementation comes back pending with
// what it will hold; one that fails comes back failed with the error, so
// the rest of the report is still written.
func RunSections(ctx context.Context, env *SectionEnv, names []string) []Section {
	hooksMu.Lock()
	list := slices.Clone(hooks)
	hooksMu.Unlock()
	if env.Log == nil {
		env.Log = io.Discard
	}
	var out []Section
	for _, h := range list {
		if names != nil && !slices.Contains(names, h.name) {
			continue
		}
		if h.run == nil {
			out = append(out, Section{Name: h.name, Title: h.title, Status: SectionPending, Note: "not implemented yet: " + h.pending})
			continue
		}
		fmt.Fprintf(env.Log, "bench: section %s\n", h.name)
		s, err := h.run(ctx, env)
		if err != nil {
			out = append(out, Section{Name: h.name, Title: h.title, Status: SectionFailed, Note: err.Error()})
			continue
		}
		if s.Name == "" {
			s.Name = h.name
		}
		if s.Title == "" {
			s.Title = h.title
		}
		if s.Status == "" {
			s.Status = SectionMeasured
		}
		out = append(out, *s)
	}
	return out
}
