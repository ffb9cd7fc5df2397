package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/datahelix/datahelix/internal/bench/cmdinfo"
	"github.com/datahelix/datahelix/internal/cli"
	"github.com/datahelix/datahelix/internal/planlimits"
)

// PlanCommand is datahelix bench plan.
var PlanCommand = cli.Command{
	Name:    cmdinfo.Plan,
	Summary: cmdinfo.PlanSummary,
	Run:     runBenchPlan,
}

func runBenchPlan(ctx context.Context, stdout, stderr io.Writer, args []string) error {
	fs := cli.NewFlags("bench plan", "--ranks N --batch B [--json FILE]")
	ranks := fs.Int("ranks", 8, "world `size` N to plan for")
	batch := fs.Int("batch", 32, "per-rank batch `size` B")
	plans := fs.Int("plans", 200, "`number` of inputs to plan and time")
	seed := fs.Uint64("seed", 1, "`seed` of the drawn inputs")
	out := fs.String("json", "", "write the result as JSON to `FILE` (- for standard output)")
	if err := cli.ParseFlags(fs, args, stdout); err != nil {
		return err
	}
	switch {
	case *ranks < 1 || *ranks > planlimits.Ranks:
		return cli.FlagErrorf("bench plan", "ranks", *ranks, "want 1..%d", planlimits.Ranks)
	case *batch < 1 || *batch > planlimits.Batch:
		return cli.FlagErrorf("bench plan", "batch", *batch, "want 1..%d", planlimits.Batch)
	case *plans < 1:
		return cli.FlagErrorf("bench plan", "plans", *plans, "want at least 1")
	}
	// The --json file is checked now (a new one created only when the
	// results are written), not found unwritable after the run.
	var outs cli.OutputFiles
	defer outs.Discard()
	var jsonFile *cli.OutputFile
	if *out != "" && *out != "-" {
		var err error
		if jsonFile, err = outs.Open("--json", *out); err != nil {
			return cli.Usagef("bench plan: %w", err)
		}
	}
	res, err := RunPlanBench(PlanBenchConfig{Ranks: *ranks, Batch: *batch, Plans: *plans, Seed: *seed})
	if err != nil {
		return err
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	// The summary goes to stderr when stdout carries the JSON.
	if *out == "-" {
		fmt.Fprintln(stderr, res)
	} else {
		fmt.Fprintln(stdout, res)
	}
	if *out == "" {
		return nil
	}
	data, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	data = append(data, '\n')
	if *out == "-" {
		_, err = stdout.Write(data)
		return err
	}
	if err := jsonFile.Replace(func(w io.Writer) error { _, err := w.Write(data); return err }); err != nil {
		return fmt.Errorf("bench plan: --json: %w", err)
	}
	return outs.Close()
}
