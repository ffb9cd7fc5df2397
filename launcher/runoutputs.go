package launcher

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"slices"

	"github.com/datahelix/datahelix/collective"
	"github.com/datahelix/datahelix/internal/cli"
	"github.com/datahelix/datahelix/internal/machine"
	"github.com/datahelix/datahelix/internal/metrics"
)

// jobInfo says what produced a run's figures, so that a result file can
// be compared with another and the run repeated: the command line as
// given, the dataset and the settings its defaults filled in, the MPI
// library, and rank 0's machine and the commit of the code.
type jobInfo struct {
	Args    []string `json:"args"`
	Data    string   `json:"data"`
	Seed    uint64   `json:"seed"`
	Frames  int      `json:"frames"`
	Size    int      `json:"size"`
	Workers int      `json:"workers"`
	MPI     string   `json:"mpi"`
	// MPIWait is how rank 0's MPI binding waited (DATAHELIX_MPI_WAIT as
	// in effect); empty in an in-process world.
	MPIWait string          `json:"mpi_wait,omitempty"`
	Machine machine.Machine `json:"machine"`
	Ended   string          `json:"ended"` // UTC, RFC 3339
	// Cases are the default job's datasets (Data is the first's).
	Cases []jobCase `json:"cases,omitempty"`
}

// jobCase is one dataset of the default job, in the job's record.
type jobCase struct {
	Name string `json:"name"`
	Data string `json:"data"`
}

// runSummary is one loader's run in --json: its summary, the dataset
// ("case": skewed or uniform on the default job) and the repeat (from 1)
// it ran in when there are several, and, under "job", what produced it.
type runSummary struct {
	metrics.Summary
	Case   string
	Repeat int
	Job    *jobInfo
}

// MarshalJSON writes the summary's fields (by its own MarshalJSON,
// which an embedding struct would otherwise take whole), "case" and
// "repeat" when set, and "job".
func (r runSummary) MarshalJSON() ([]byte, error) {
	sum, err := json.Marshal(r.Summary)
	if err != nil {
		return nil, err
	}
	job, err := json.Marshal(r.Job)
	if err != nil {
		return nil, err
	}
	out := sum[: len(sum)-1 : len(sum)-1]
	if r.Case != "" {
		c, _ := json.Marshal(r.Case)
		out = append(append(out, `,"case":`...), c...)
	}
	if r.Repeat != 0 {
		out = append(out, fmt.Sprintf(`,"repeat":%d`, r.Repeat)...)
	}
	out = append(out, `,"job":`...)
	return append(append(out, job...), '}'), nil
}

// runOutputs are the files rank 0 writes at the end of a run, checked
// before it starts (prepareOutputs) so that a bad path fails at once,
// and written, a new file created, only after a successful run (write).
type runOutputs struct {
	cli.OutputFiles
	json, trace *cli.OutputFile
	// jsonStdout and traceStdout send --json or --trace to standard
	// output (-) instead of a file.
	jsonStdout, traceStdout bool
}

// fileOutput is the file an output flag names: "" for none, and for
// standard output (-), which is not opened.
func fileOutput(path string) string {
	if path == "-" {
		return ""
	}
	return path
}

// prepareOutputs checks --json and --trace on rank 0 (open) and creates
// --checkpoint-dir on every rank (each writes its own checkpoints) before
// any work, so a path that cannot be written ends the job at start-up
// instead of after hours of training. The ranks agree on the outcome
// (agreeOnError): rank 0 prints the lowest failing rank's error and the
// job ends cleanly.
func prepareOutputs(c collective.Comm, f *runFlags) (*runOutputs, error) {
	o, err := openOutputs(c.Rank() == 0, f)
	if err := agreeOnError(c, err, "cannot write its output files"); err != nil {
		o.discard()
		return nil, err
	}
	return o, nil
}

// openOutputs opens this rank's outputs: --json and --trace when files
// is set (on rank 0) and they name files, not standard output (-), and
// it checks that --checkpoint-dir can be written
// when checkpoints are on. On an error it still returns what it opened,
// for discard.
func openOutputs(files bool, f *runFlags) (*runOutputs, error) {
	o := &runOutputs{}
	if files {
		var err error
		if o.json, err = o.Open("--json", fileOutput(f.jsonOut)); err != nil {
			return o, err
		}
		if o.trace, err = o.Open("--trace", fileOutput(f.trace)); err != nil {
			return o, err
		}
		o.jsonStdout, o.traceStdout = f.jsonOut == "-", f.trace == "-"
	}
	if f.cfg.CheckpointEvery > 0 {
		return o, cli.CheckWritableDir("--checkpoint-dir", f.cfg.CheckpointDir)
	}
	return o, nil
}

// write replaces the files' contents with the results of a successful
// run, the summaries in --json and the records in --trace, or writes
// them to stdout for -, and closes the files.
func (o *runOutputs) write(stdout io.Writer, results []runSummary, job *jobInfo, trace []traceLine) error {
	if o.json != nil || o.jsonStdout {
		if err := replaceOutput(o.json, stdout, func(w io.Writer) error { return writeJSON(w, results, job) }); err != nil {
			return fmt.Errorf("--json: %w", err)
		}
	}
	if o.trace != nil || o.traceStdout {
		if err := replaceOutput(o.trace, stdout, func(w io.Writer) error { return writeTrace(w, trace) }); err != nil {
			return fmt.Errorf("--trace: %w", err)
		}
	}
	return o.Close()
}

// replaceOutput has write fill f (Replace), or stdout when f is nil.
func replaceOutput(f *cli.OutputFile, stdout io.Writer, write func(io.Writer) error) error {
	if f == nil {
		return write(stdout)
	}
	return f.Replace(write)
}

// discard closes the files of a failed run.
func (o *runOutputs) discard() {
	if o != nil {
		o.OutputFiles.Discard()
	}
}

// traceLine is one line of --trace: a rank's step record, with its run's
// loader, dataset (on the default job) and repeat (when several).
type traceLine struct {
	Loader string `json:"loader"`
	Case   string `json:"case,omitempty"`
	Repeat int    `json:"repeat,omitempty"`
	metrics.StepRecord
}

// writeJSON writes the summaries to w, each with the job's record.
func writeJSON(w io.Writer, results []runSummary, job *jobInfo) error {
	list := slices.Clone(results)
	for i := range list {
		list[i].Job = job
	}
	data, err := json.MarshalIndent(list, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(data, '\n'))
	return err
}

// writeTrace writes one JSON line per record to out.
func writeTrace(out io.Writer, lines []traceLine) error {
	w := bufio.NewWriter(out)
	enc := json.NewEncoder(w)
	for _, l := range lines {
		if err := enc.Encode(l); err != nil {
			return err
		}
	}
	return w.Flush()
}
