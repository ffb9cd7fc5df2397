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
	"miss_rate":                      "fraction of rank-steps (a miss: the rank's batch was ready more than its tolerance after its GPU asked)",
	"gpu_wait_frac":                  "fraction of ranks x wall time the GPUs waited for their batch (input wait; not the idle time in the gradient allreduce)",
	"gpu_wait_s":                     "rank-seconds (sum over ranks)",
	"throughput_sps":                 "samples per second, all ranks together",
	"bytes_moved_per_step":           "bytes, mean per step, all ranks together",
	"misses":                         "rank-steps",
	"wall_s":                         "seconds",
	"steady_step_miss_rate":          "fraction of the steps after the warm-up (the first H steps) in which any rank missed",
	"steady_job_stall_frac":          "fraction of the wall time after the warm-up: the sum over steps of the largest rank wait",
	"steady_efficiency":              "fraction (steady throughput over the GPUs' ceiling, ranks x batch / mean GPU step)",
	"steady_throughput_sps":          "samples per second after the warm-up, all ranks together",
	"steady_miss_rate":               "fraction of rank-steps after the warm-up",
	"steady_gpu_wait_frac":           "fraction of ranks x wall time after the warm-up",
	"time_to_first_batch_s":          "seconds (the job's start to the last rank's first batch)",
	"warmup_stall_s":                 "seconds (the sum over the warm-up steps of the largest rank wait)",
	"plan_us_p50":                    "microseconds per step (median; null when not measured)",
	"elapsed_s":                      "seconds (the run's own wall time)",
	"imbalance":                      "fraction (busiest rank's work over the mean rank's, minus 1)",
	"mean_cost_us":                   "microseconds of CPU per sample",
	"gpu_step_ms":                    "milliseconds",
	"*_reduction*":                   "fraction (1 - helix/other, steady; null where the other had under 1 % to reduce)",
	"*_ratio*":                       "ratio (helix/other steady throughput)",
	"helix_vs_*":                     "ratio (helix's steady throughput over the other's)",
	"attribution":                    "ratios of steady throughputs (scheduling: local/torch; decode_balancing: helix-notrain/local; gpu_balancing: helix/helix-notrain)",
	"*_gain_mean":                    "geometric mean over the skewed workloads of the attribution's ratio",
	"uniform_regression_max":         "fraction (1 - helix/best other loader's steady GPU efficiency, largest over the uniform workloads)",
	"ci95":                           "the figure's own unit: the 95 % confidence half-width over the seeds",
	"uniform_regression_max_samples": "fraction (1 - helix/best other loader's steady samples/s, largest over the uniform workloads)",
	"seeds":                          "count",
}

// CSVFiles are the files WriteCSV writes (besides one per measured
// section, section_<name>.csv).
var CSVFiles = []string{"results.csv", "comparisons.csv", "goals.csv", "summary.csv"}

// ResultColumns are the columns of results.csv: the steady job-level
// figures first, the per-rank and whole-run ones beside them, the
// warm-up's last.
var ResultColumns = []string{"workload", "loader", "ranks", "mode", "skew", "steps", "batch", "workers", "steady_steps",
	"steady_step_miss_rate", "steady_job_stall_frac", "steady_efficiency", "steady_throughput_sps", "steady_miss_rate", "steady_gpu_wait_frac",
	"miss_rate", "gpu_wait_frac", "throughput_sps", "bytes_moved_per_step", "misses", "gpu_wait_s", "wall_s", "batches_hash",
	"time_to_first_batch_s", "warmup_stall_s"}

// versusNames are the loaders of comparisons.csv's Versus columns, in
// order, and versusColumns a Versus's columns.
var (
	versusNames   = []string{"torch", "torch_ddp", "torch_pack", "local", "static"}
	versusColumns = []string{"step_miss_reduction", "stall_reduction", "throughput_ratio", "miss_reduction", "wait_reduction", "efficiency_ratio"}
)

// ComparisonColumns are the columns of comparisons.csv.
var ComparisonColumns = func() []string {
	out := []string{"workload", "skew"}
	for _, l := range versusNames {
		for _, c := range versusColumns {
			out = append(out, c+"_vs_"+l)
		}
	}
	return append(out, "oracle_step_miss_reduction_vs_torch", "oracle_stall_reduction_vs_torch", "oracle_throughput_ratio_vs_torch",
		"helix_vs_oracle", "best_other", "helix_vs_best", "best_other_samples", "helix_vs_best_samples", "scheduling", "decode_balancing", "gpu_balancing",
		"torch_pack_vs_torch", "helix_vs_torch_pack", "torch_ddp_vs_torch")
}()

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
		// Undefined without steady steps: empty cells.
		steady := make([]string, 6)
		if x.HasSteady() {
			steady = []string{f(x.SteadyStepMissRate), f(x.SteadyJobStallFrac), "", f(x.SteadyThroughputSPS), f(x.SteadyMissRate), f(x.SteadyGPUWaitFrac)}
			if x.SteadyEfficiency > 0 {
				steady[2] = f(x.SteadyEfficiency)
			}
		}
		row := []string{x.Workload, x.Loader, strconv.Itoa(x.Ranks), x.Mode, x.Skew, strconv.Itoa(x.Steps), strconv.Itoa(x.Batch),
			strconv.Itoa(x.Workers), strconv.Itoa(x.SteadySteps)}
		row = append(row, steady...)
		rows = append(rows, append(row, f(x.MissRate), f(x.GPUWaitFrac), f(x.ThroughputSPS), f(x.BytesMovedPerStep), strconv.Itoa(x.Misses),
			f(x.GPUWaitS), f(x.WallS), x.BatchesHash, f(x.TimeToFirstBatchS), f(x.WarmupStallS)))
	}
	if err := writeCSVFile(filepath.Join(dir, "results.csv"), rows); err != nil {
		return err
	}
	rows = [][]string{ComparisonColumns}
	for _, c := range r.Comparisons {
		row := []string{c.Workload, c.Skew}
		for _, v := range []Versus{c.VsTorch, c.VsTorchDDP, c.VsTorchPack, c.VsLocal, c.VsStatic} {
			row = append(row, opt(v.StepMissReduction), opt(v.StallReduction), opt(v.ThroughputRatio), opt(v.MissReduction), opt(v.WaitReduction), opt(v.EfficiencyRatio))
		}
		a := c.Attribution
		rows = append(rows, append(row, opt(c.OracleVsTorch.StepMissReduction), opt(c.OracleVsTorch.StallReduction), opt(c.OracleVsTorch.ThroughputRatio),
			opt(c.HelixVsOracle), c.BestOther, opt(c.HelixVsBest), c.BestOtherSPS, opt(c.HelixVsBestSPS), opt(a.Scheduling), opt(a.DecodeBalancing), opt(a.GPUBalancing),
			opt(a.PackVsTorch), opt(a.HelixVsPack), opt(a.DDPVsTorch)))
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
// the summary under its JSON name (undefined: empty; a list of names
// joined by spaces), so that the summaries of many runs concatenate into
// one table.
func (r *Report) summaryRows() [][]string {
	head := []string{"mode", "ranks", "steps", "seed", "commit", "commit_source", "dirty", "machine"}
	row := []string{r.Mode, strconv.Itoa(r.Ranks), strconv.Itoa(r.Steps), strconv.FormatUint(r.Seed, 10), r.Commit, r.CommitSource,
		strconv.FormatBool(r.Machine.Dirty), r.Machine.String()}
	v := reflect.ValueOf(r.Summary)
	for i := range v.NumField() {
		name, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ",")
		if slices.Contains(head, name) { // steps: the run's, already there
			continue
		}
		cell := ""
		switch x := v.Field(i).Interface().(type) {
		case *float64:
			if x != nil {
				cell = strconv.FormatFloat(*x, 'g', 8, 64)
			}
		case float64:
			cell = strconv.FormatFloat(x, 'g', 8, 64)
		case []string:
			cell = strings.Join(x, " ")
		case map[string]float64: // CI95: a column per figure, empty for one seed
			for _, f := range ciFigures {
				c := ""
				if h, ok := x[f.key]; ok {
					c = strconv.FormatFloat(h, 'g', 8, 64)
				}
				head, row = append(head, "ci95_"+f.key), append(row, c)
			}
			continue
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
