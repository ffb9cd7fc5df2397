package bench

import (
	"context"
	"fmt"
	"io"
	"slices"

	"github.com/datahelix/datahelix/internal/bench/realrun"
	"github.com/datahelix/datahelix/internal/bench/report"
)

// sectionDef is a named place in the report and the function that
// measures it. titleOf, when set, gives a title that depends on the run
// (title is then unused).
type sectionDef struct {
	name, title string
	titleOf     func(env *report.SectionEnv) string
	run         report.SectionFunc
}

// titleFor is the section's title in the run of env.
func (h sectionDef) titleFor(env *report.SectionEnv) string {
	if h.titleOf != nil {
		return h.titleOf(env)
	}
	return h.title
}

// sections are the report's sections, in order.
var sections = []sectionDef{
	{name: "planner", title: "Planner time versus ranks (8 -> 1024, B=16)", run: plannerSection},
	{name: "scale", titleOf: scaleTitle, run: scaleSection},
	{name: "ratio", title: "Provisioning ratio sweep (0.8 -> 2.0; skewed workloads, 8 ranks, 2,000 steps, 5 seeds)", run: ratioSection},
	{name: "tradeoff", title: "Bytes moved versus makespan: the transfer-cost gate's margin (64 ranks x 16, bench plan's inputs)", run: tradeoffSection},
	{name: "ranks", title: "Ranks sweep (8 -> 512; video_llm_mix, 500 steps, 5 seeds)", run: ranksSection},
	{name: "allgather", title: "Allgather latency versus ranks (real MPI, 2 -> 8 ranks, oversubscribed on this machine)", run: allgatherSection},
	{name: "exchange", title: "Exchange throughput: the Go path versus a raw MPI send/receive of the same bytes", run: exchangeSection},
	{name: "decode", title: "Decode time versus ffmpeg -threads 1 on the same clips", run: decodeSection},
	{name: "validation", title: "Simulator versus real runs (4 ranks, generated data; torch, local, helix)", run: realrun.ValidationSection},
	{name: "real", title: "Real runs: generated datasets and their provisioning on this machine", run: realrun.RealSection},
	{name: "bridge", titleOf: func(*report.SectionEnv) string { return realrun.BridgeTitle() }, run: realrun.BridgeSection},
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
func RunSections(ctx context.Context, env *report.SectionEnv, names []string) []report.Section {
	if env.Log == nil {
		env.Log = io.Discard
	}
	var out []report.Section
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
			out = append(out, report.Section{Name: h.name, Title: h.titleFor(env), Status: report.SectionFailed, Note: err.Error()})
			continue
		}
		if s.Name == "" {
			s.Name = h.name
		}
		if s.Title == "" {
			s.Title = h.titleFor(env)
		}
		if s.Status == "" {
			s.Status = report.SectionMeasured
		}
		out = append(out, *s)
	}
	return out
}
