package report

import (
	"context"
	"io"

	"github.com/datahelix/datahelix/internal/bench/eval"
	"github.com/datahelix/datahelix/internal/bench/workload"
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
	Scale *eval.ScaleResult `json:"scale,omitempty"`
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
	Workloads   []*workload.Workload
	Calibration *costmodel.Calibration
	Eval        *eval.Evaluation
	Scale       eval.ScaleConfig
	// OutDir is where the report's files go (a section may add its own).
	OutDir string
	// Log receives progress lines (never nil).
	Log io.Writer
}

// SectionFunc measures one section. It returns the section with Columns
// and Rows filled (Name, Title and Status are set by RunSections when
// left empty), or an error, which the report shows as a failed section.
type SectionFunc func(ctx context.Context, env *SectionEnv) (*Section, error)
