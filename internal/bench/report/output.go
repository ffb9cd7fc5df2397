package report

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// WriteJSON writes the report as indented JSON: machine, commit, the
// results (workload, loader, ranks, miss_rate, gpu_wait_frac,
// throughput_sps, bytes_moved_per_step, ...), comparisons, the summary,
// goals and sections.
func (r *Report) WriteJSON(w io.Writer) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("bench: report JSON: %w", err)
	}
	_, err = w.Write(append(data, '\n'))
	return err
}

// Units maps the report's JSON fields to their units, written as the
// report's "units" object. Fractions are of 1 (0.25 is 25 %); a
// reduction is 1 - helix/other, a ratio helix/other.
var Units = map[string]string{
	"miss_rate":            "fraction of rank-steps (a miss: the rank's batch was not ready when its GPU asked)",
	"gpu_wait_frac":        "fraction of ranks x wall time the GPUs waited for their batch (input wait; not the idle time in the gradient allreduce)",
	"gpu_wait_s":           "rank-seconds (sum over ranks)",
	"throughput_sps":       "samples per second, all ranks together",
	"bytes_moved_per_step": "bytes, mean per step, all ranks together",
	"misses":               "rank-steps",
	"wall_s":               "seconds",
	"steady_miss_rate":     "fraction of rank-steps after the warm-up (the first H steps)",
	"steady_gpu_wait_frac": "fraction of ranks x wall time after the warm-up",
	"plan_us_p50":          "microseconds per step (median; null when not measured)",
	"elapsed_s":            "seconds (the run's own wall time)",
	"imbalance":            "fraction (busiest rank's work over the mean rank's, minus 1)",
	"mean_cost_us":         "microseconds of CPU per sample",
	"gpu_step_ms":          "milliseconds",
	"*_reduction*":         "fraction (1 - helix/other)",
	"*_ratio*":             "ratio (helix/other)",
	"oracle_gap":           "fraction of wall time (helix's gpu_wait_frac minus the oracle's)",
	"warmup_miss_floor*":   "fraction of rank-steps (the fewest warm-up misses of any loader over the run's rank-steps)",
}

// CSVFiles are the files WriteCSV writes (besides one per measured
// section, section_<name>.csv).
var CSVFiles = []string{"results.csv", "comparisons.csv", "goals.csv", "summary.csv"}

// ResultColumns are the columns of results.csv.
var ResultColumns = []string{"workload", "loader", "ranks", "mode", "skew", "steps", "batch", "workers", "miss_rate", "gpu_wait_frac",
	"throughput_sps", "bytes_moved_per_step", "misses", "gpu_wait_s", "wall_s", "batches_hash", "steady_steps", "steady_miss_rate", "steady_gpu_wait_frac"}

// ComparisonColumns are the columns of comparisons.csv.
var ComparisonColumns = []string{"workload", "skew", "miss_reduction_vs_torch", "wait_reduction_vs_torch", "throughput_ratio_vs_torch",
	"miss_reduction_vs_local", "wait_reduction_vs_local", "throughput_ratio_vs_local", "miss_reduction_vs_static", "wait_reduction_vs_static",
	"throughput_ratio_vs_static", "oracle_gap", "oracle_bound", "best_other", "helix_vs_best",
	"steady_miss_reduction_vs_torch", "steady_wait_reduction_vs_torch", "warmup_misses", "warmup_steps", "warmup_miss_floor"}

// csvPatterns and plotPatterns name every file WriteCSV and WritePlots
// write: each removes the files of its patterns from dir first, so that a
// directory reused for another report holds no file of the earlier one
// (a section that failed this time, a workload not run) that would look
// current. No other file is touched.
var (
	csvPatterns  = []string{"results.csv", "comparisons.csv", "goals.csv", "summary.csv", "section_*.csv"}
	plotPatterns = []string{"gpu_wait.png", "wait_*.png", "timeline_*.png"}
)

// createDirRemovingOld creates dir if needed and removes the regular
// files in it whose names match one of patterns.
func createDirRemovingOld(dir string, patterns []string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() || !slices.ContainsFunc(patterns, func(p string) bool { ok, _ := path.Match(p, e.Name()); return ok }) {
			continue
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
			return fmt.Errorf("bench: removing an earlier report's file: %w", err)
		}
	}
	return nil
}

// WriteCSV writes results.csv, comparisons.csv, goals.csv and one
// section_<name>.csv per section with rows into dir, after removing
// those files of an earlier report (results.csv, ..., section_*.csv).
// Undefined figures are empty cells.
func (r *Report) WriteCSV(dir string) error {
	if err := createDirRemovingOld(dir, csvPatterns); err != nil {
		return err
	}
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', 8, 64) }
	opt := func(v *float64) string {
		if v == nil {
			return ""
		}
		return f(*v)
	}
	rows := [][]string{ResultColumns}
	for _, x := range r.Results {
		smiss, swait := "", "" // undefined without steady steps
		if x.HasSteady() {
			smiss, swait = f(x.SteadyMissRate), f(x.SteadyGPUWaitFrac)
		}
		rows = append(rows, []string{x.Workload, x.Loader, strconv.Itoa(x.Ranks), x.Mode, x.Skew, strconv.Itoa(x.Steps), strconv.Itoa(x.Batch),
			strconv.Itoa(x.Workers), f(x.MissRate), f(x.GPUWaitFrac), f(x.ThroughputSPS), f(x.BytesMovedPerStep), strconv.Itoa(x.Misses),
			f(x.GPUWaitS), f(x.WallS), x.BatchesHash, strconv.Itoa(x.SteadySteps), smiss, swait})
	}
	if err := writeCSVFile(filepath.Join(dir, "results.csv"), rows); err != nil {
		return err
	}
	rows = [][]string{ComparisonColumns}
	for _, c := range r.Comparisons {
		row := []string{c.Workload, c.Skew}
		for _, v := range []Versus{c.VsTorch, c.VsLocal, c.VsStatic} {
			row = append(row, opt(v.MissReduction), opt(v.WaitReduction), opt(v.ThroughputRatio))
		}
		rows = append(rows, append(row, opt(c.OracleGap), opt(c.OracleBound), c.BestOther, opt(c.HelixVsBest),
			opt(c.SteadyMissReductionVsTorch), opt(c.SteadyWaitReductionVsTorch), strconv.Itoa(c.WarmupMisses), strconv.Itoa(c.WarmupSteps),
			opt(c.WarmupMissFloor)))
	}
	if err := writeCSVFile(filepath.Join(dir, "comparisons.csv"), rows); err != nil {
		return err
	}
	rows = [][]string{{"goal", "target", "figure", "status", "note"}}
	for _, g := range r.Goals {
		rows = append(rows, []string{g.Name, g.Target, g.Figure, g.Status, g.Note})
	}
	if err := writeCSVFile(filepath.Join(dir, "goals.csv"), rows); err != nil {
		return err
	}
	if err := writeCSVFile(filepath.Join(dir, "summary.csv"), r.summaryRows()); err != nil {
		return err
	}
	for _, s := range r.Sections {
		if len(s.Rows) == 0 {
			continue
		}
		rows = [][]string{s.Columns}
		for _, row := range s.Rows {
			cells := make([]string, len(row))
			for i, v := range row {
				switch x := v.(type) {
				case float64:
					cells[i] = f(x)
				default:
					cells[i] = fmt.Sprint(v)
				}
			}
			rows = append(rows, cells)
		}
		if err := writeCSVFile(filepath.Join(dir, "section_"+s.Name+".csv"), rows); err != nil {
			return err
		}
	}
	return nil
}

// summaryRows are summary.csv: a header and one row, with how the run
// was made (mode, ranks, steps, seed, commit, machine) and every field of
// the summary under its JSON name (undefined: empty), so that the
// summaries of many runs concatenate into one table.
func (r *Report) summaryRows() [][]string {
	head := []string{"mode", "ranks", "steps", "seed", "commit", "commit_source", "dirty", "machine"}
	row := []string{r.Mode, strconv.Itoa(r.Ranks), strconv.Itoa(r.Steps), strconv.FormatUint(r.Seed, 10), r.Commit, r.CommitSource,
		strconv.FormatBool(r.Machine.Dirty), r.Machine.String()}
	v := reflect.ValueOf(r.Summary)
	for i := range v.NumField() {
		name, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ",")
		cell := ""
		switch x := v.Field(i).Interface().(type) {
		case *float64:
			if x != nil {
				cell = strconv.FormatFloat(*x, 'g', 8, 64)
			}
		case float64:
			cell = strconv.FormatFloat(x, 'g', 8, 64)
		default:
			cell = fmt.Sprint(x)
		}
		head, row = append(head, name), append(row, cell)
	}
	return [][]string{head, row}
}

func writeCSVFile(path string, rows [][]string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	w := csv.NewWriter(f)
	if err := w.WriteAll(rows); err != nil {
		f.Close()
		return fmt.Errorf("bench: %s: %w", path, err)
	}
	return f.Close()
}
