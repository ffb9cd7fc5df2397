package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/datahelix/datahelix/internal/bench/cmdinfo"
	"github.com/datahelix/datahelix/internal/bench/workload"
	"github.com/datahelix/datahelix/internal/cli"
	"github.com/datahelix/datahelix/internal/costmodel"
	"github.com/datahelix/datahelix/internal/machine"
)

// CalibrateCommand is datahelix bench calibrate.
var CalibrateCommand = cli.Command{
	Name:    cmdinfo.Calibrate,
	Summary: cmdinfo.CalibrateSummary,
	Run:     runBenchCalibrate,
}

func runBenchCalibrate(ctx context.Context, stdout, stderr io.Writer, args []string) error {
	fs := cli.NewFlags("bench calibrate", "[--samples N] [--out FILE]")
	cacheDir := fs.String("cache-dir", "", "`dir`ectory for the generated datasets and the calibration"+cli.CacheDirDefault)
	samples := fs.Int("samples", 24, "`samples` per video preset (3x for image and text presets)")
	presets := fs.String("presets", strings.Join(workload.CalibratePresets, ","), "comma list of generator `presets` to decode (leaving any out needs --out)")
	seed := fs.Uint64("seed", 1, "`seed` of the generated datasets")
	repeat := fs.Int("repeat", 3, "decode each sample this many times and keep the fastest")
	out := fs.String("out", "", "write the calibration to `file` (default: the cache, where datahelix bench finds it; a partial --presets list must go elsewhere)")
	if err := cli.ParseFlags(fs, args, stdout); err != nil {
		return err
	}
	switch {
	case *samples < 3:
		return cli.FlagErrorf("bench calibrate", "samples", *samples, "want at least 3 (two thirds learn, one third is held out)")
	case *repeat < 1:
		return cli.FlagErrorf("bench calibrate", "repeat", *repeat, "want at least 1")
	}
	var list []string
	for _, p := range strings.Split(*presets, ",") {
		if p = strings.TrimSpace(p); p != "" {
			list = append(list, p)
		}
	}
	// Everything is checked before the minutes of decoding.
	if err := workload.CheckCalibratePresets(list); err != nil {
		return cli.Usagef("%w", err)
	}
	root := cli.CacheRoot(*cacheDir)
	m := machine.This(ctx)
	path, err := calibrationOut(*out, root, m, list)
	if err != nil {
		return err
	}
	// The counter rewrites its line: on a terminal only (logs and CI get
	// the per-preset lines).
	progress := func(string, int, int) {}
	if cli.IsTerminal(stderr) {
		progress = func(preset string, done, total int) {
			fmt.Fprintf(stderr, "\rdecoding %s %d/%d", preset, done, total)
			if done == total {
				fmt.Fprintln(stderr)
			}
		}
	}
	cal, err := workload.Calibrate(ctx, workload.CalibrateConfig{
		CacheDir: root, Presets: list, Samples: *samples, Seed: *seed, Repeat: *repeat, Machine: m,
		Log:      func(format string, args ...any) { fmt.Fprintf(stderr, "bench calibrate: "+format+"\n", args...) },
		Progress: progress,
	})
	if err != nil {
		return err
	}
	if err := cal.Save(path); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "calibration of %s: %d samples decoded, %d held out, %d failed\n", m, cal.Samples, cal.HeldOut, cal.Failed)
	for _, f := range cal.Failures {
		fmt.Fprintln(stdout, "  failed:", f)
	}
	if miss := workload.MissingCalibratePresets(list); len(miss) > 0 {
		fmt.Fprintf(stdout, "presets: %s only (not %s): datahelix bench --calibration %s warns about workloads of the others\n", strings.Join(list, ", "), strings.Join(miss, ", "), path)
	}
	return writeCalibrationTables(stdout, cal, path)
}

// calibrationOut returns where the calibration of presets goes: --out
// (its directory must exist), else the cache of machine m under root,
// where datahelix bench takes it for every workload. A calibration that
// leaves out some of workload.CalibratePresets is refused there: a quick
// partial run would replace the machine's full calibration.
func calibrationOut(out, root string, m machine.Machine, presets []string) (string, error) {
	cached := workload.CalibrationPath(root, m)
	if miss := workload.MissingCalibratePresets(presets); len(miss) > 0 {
		same := out == ""
		if out != "" {
			a, errA := filepath.Abs(out)
			b, errB := filepath.Abs(cached)
			same = errA == nil && errB == nil && a == b
		}
		if same {
			return "", cli.Usagef("bench calibrate: --presets %s leaves out %s: a partial calibration is not cached for this machine, where datahelix bench would use it for every workload; write it with --out FILE and use it with datahelix bench --calibration FILE",
				strings.Join(presets, ","), strings.Join(miss, ", "))
		}
	}
	if out == "" {
		return cached, nil
	}
	if out == "-" {
		// Not standard output: the calibration is a file datahelix bench
		// --calibration reads back.
		return "", cli.Usagef("bench calibrate: --out -: want a file name (the calibration is written to a file for datahelix bench --calibration FILE, not to standard output)")
	}
	if st, err := os.Stat(out); err == nil && st.IsDir() {
		return "", cli.Usagef("bench calibrate: --out %s is a directory: want a file name", out)
	}
	if st, err := os.Stat(filepath.Dir(out)); err != nil || !st.IsDir() {
		return "", cli.FlagErrorf("bench calibrate", "out", out, "directory %s does not exist", filepath.Dir(out))
	}
	if err := cli.CheckWritableDir("bench calibrate: --out", filepath.Dir(out)); err != nil {
		return "", cli.Usagef("%w", err)
	}
	return out, nil
}

// writeCalibrationTables prints a calibration's errors and image sizes.
func writeCalibrationTables(w io.Writer, cal *costmodel.Calibration, path string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "model\theld-out MAPE %\t")
	for _, k := range cal.MAPEKeys() {
		fmt.Fprintf(tw, "%s\t%.1f\t\n", k, 100*cal.MAPE[k])
	}
	fmt.Fprintln(tw, "preset\tsynthesized-record error %\t")
	for _, p := range workload.CalibratePresets {
		if e, ok := cal.SynthMAPE[p]; ok {
			fmt.Fprintf(tw, "%s\t%.1f\t\n", p, 100*e)
		}
	}
	fmt.Fprintln(tw, "preset\tsplit decode CPU / whole\t")
	for _, p := range workload.CalibratePresets {
		if r, ok := cal.SplitRatio[p]; ok {
			fmt.Fprintf(tw, "%s\t%.2fx\t\n", p, r)
		}
	}
	fmt.Fprintln(tw, "image format\tbits per pixel\t")
	for _, f := range []string{"jpeg", "png", "webp"} {
		fmt.Fprintf(tw, "%s\t%.2f\t\n", f, cal.BitsPerPixel[f])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "wrote %s\n", path)
	return err
}
