package bench

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
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

// CSVFiles are the files WriteCSV writes (besides one per measured
// section, section_<name>.csv).
var CSVFiles = []string{"results.csv", "comparisons.csv", "goals.csv"}

// ResultColumns are the columns of results.csv.
var ResultColumns = []string{"workload", "loader", "ranks", "mode", "skew", "steps", "batch", "workers", "miss_rate", "gpu_wait_frac",
	"throughput_sps", "bytes_moved_per_step", "misses", "gpu_wait_s", "wall_s", "batches_hash", "steady_steps", "steady_miss_rate", "steady_gpu_wait_frac"}

// ComparisonColumns are the columns of comparisons.csv.
var ComparisonColumns = []string{"workload", "skew", "miss_reduction_vs_torch", "wait_reduction_vs_torch", "throughput_ratio_vs_torch",
	"miss_reduction_vs_local", "wait_reduction_vs_local", "throughput_ratio_vs_local", "miss_reduction_vs_static", "wait_reduction_vs_static",
	"throughput_ratio_vs_static", "oracle_gap", "oracle_bound", "best_other", "helix_vs_best"}

// csvPatterns and plotPatterns name every file WriteCSV and WritePlots
// write: each removes the files of its patterns from dir first, so that a
// directory reused for another report holds no file of the earlier one
// (a section that failed this time, a workload not run) that would look
// current. No other file is touched.
var (
	csvPatterns  = []string{"results.csv", "comparisons.csv", "goals.csv", "section_*.csv"}
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
		rows = append(rows, append(row, opt(c.OracleGap), opt(c.OracleBound), c.BestOther, opt(c.HelixVsBest)))
	}
	if err := writeCSVFile(filepath.Join(dir, "comparisons.csv"), rows); err != nil {
		return err
	}
	rows = [][]string{{"goal", "target", "figure", "status"}}
	for _, g := range r.Goals {
		rows = append(rows, []string{g.Name, g.Target, g.Figure, g.Status})
	}
	if err := writeCSVFile(filepath.Join(dir, "goals.csv"), rows); err != nil {
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
