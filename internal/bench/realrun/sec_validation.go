package realrun

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/datahelix/datahelix/internal/bench/eval"
	"github.com/datahelix/datahelix/internal/bench/report"
	"github.com/datahelix/datahelix/internal/bench/workload"
	"github.com/datahelix/datahelix/internal/metrics"
	"github.com/datahelix/datahelix/internal/step"
)

// The validation section's setting when the report is simulated: these
// workloads run for real at ValidationRanks ranks (a source-skewed mix
// and i.i.d. clips), ValidationSteps steps, with ValidationLoaders.
var (
	ValidationWorkloads = []string{"video_image_mix", "kinetics"}
	ValidationLoaders   = []step.Kind{step.KindTorch, step.KindLocal, step.KindHelix}
)

// ValidationRanks and ValidationSteps size the validation's real runs.
const (
	ValidationRanks = 4
	ValidationSteps = 40
	// ValidationRepeat is how many times each loader runs for real; the
	// real figure is their mean, and their spread is shown: on a shared
	// machine a real run does not repeat itself within the rule's 20 %.
	ValidationRepeat = 2
)

// validationNetwork is the exchange network the simulator assumes for a
// real run on one node: shared memory as the exchange section measures
// it through the Go path here (about 1 GB/s, 100 µs per message).
var validationNetwork = eval.Network{BandwidthMBs: 1000, LatencyUS: 100}

var (
	envJobsMu sync.Mutex
	// envJobs are the real jobs a report's sections ran themselves (the
	// validation's when the report is simulated), for section "real".
	envJobs = map[*report.SectionEnv][]*realJob{}
)

// validationJobs returns the real jobs to validate against: the real
// evaluation's, or new runs of ValidationWorkloads.
func validationJobs(ctx context.Context, env *report.SectionEnv, re RealEnv) ([]*realJob, bool, error) {
	if env.Eval != nil {
		if jobs := jobsOf(env.Eval); len(jobs) > 0 {
			return jobs, false, nil
		}
	}
	all, err := workload.Workloads()
	if err != nil {
		return nil, false, err
	}
	cal := env.Calibration
	if cal == nil {
		cal = workload.DefaultCalibration()
	}
	var jobs []*realJob
	for _, name := range ValidationWorkloads {
		i := slices.IndexFunc(all, func(w *workload.Workload) bool { return w.Name == name })
		if i < 0 {
			return nil, false, fmt.Errorf("bench: validation workload %q does not exist", name)
		}
		j, err := prepareRealJob(ctx, re, all[i], cal, ValidationRanks, 0, ValidationSteps, env.Seed, ValidationLoaders)
		if err != nil {
			return nil, false, err
		}
		j.repeat = ValidationRepeat
		if err := j.run(ctx, re, nil); err != nil {
			return nil, false, workload.Wrapf(err, "validation run of %s", name)
		}
		jobs = append(jobs, j)
	}
	return jobs, true, nil
}

// ValidationSection compares real runs of torch, local and helix with
// simulations of the very same setup (ValidationSection's rule). Each
// row also shows the simulation with the true costs measured on this
// machine instead of the cost model's, to tell a cost-model error from a
// scheduling-model error, the simulation on the model's costs unscaled,
// and whether both trained the same batches.
func ValidationSection(ctx context.Context, env *report.SectionEnv) (*report.Section, error) {
	re, err := CurrentRealEnv()
	if err != nil {
		return nil, err
	}
	jobs, own, err := validationJobs(ctx, env, re)
	if err != nil {
		return nil, err
	}
	if own {
		envJobsMu.Lock()
		envJobs[env] = jobs
		envJobsMu.Unlock()
	}
	var sim, meas, unscaled, process, real []eval.Result
	others := map[[2]string][3]float64{}
	machines, decodeShares, missRange := map[[2]string][]simMachine{}, map[[2]string]any{}, map[[2]string]any{}
	runs, simRuns := map[[2]string][]eval.Result{}, map[[2]string][]eval.Result{}
	for _, j := range jobs {
		for _, k := range ValidationLoaders {
			i := slices.IndexFunc(j.results, func(r eval.Result) bool { return r.Loader == k.String() })
			if i < 0 {
				continue
			}
			key := [2]string{j.w.Name, k.String()}
			a, as, ms, err := j.simulateAsRuns(k, j.samples.Samples, true, false)
			if err != nil {
				return nil, err
			}
			b, _, _, err := j.simulateAsRuns(k, j.measuredSamples, false, false)
			if err != nil {
				return nil, err
			}
			p, _, _, err := j.simulateAsRuns(k, j.samples.Samples, true, true)
			if err != nil {
				return nil, err
			}
			allreduce := j.allreduceUS()
			c, _, err := j.simulate(k, j.samples.Samples, simMachine{allreduceUS: allreduce})
			if err != nil {
				return nil, err
			}
			sim, meas, unscaled, real = append(sim, a), append(meas, b), append(unscaled, c), append(real, j.results[i])
			process = append(process, p)
			others[key] = [3]float64{j.othersCores(k), j.cpuOverWorkOf(k), float64(allreduce)}
			runs[key], simRuns[key], machines[key] = j.runs[k.String()], as, ms
			if x := decodeShare(j.records[k.String()]...); x > 0 {
				decodeShares[key] = x
			}
			lo, err := j.missesScaled(k, j.samples.Samples, ms, 0.9)
			if err != nil {
				return nil, err
			}
			hi, err := j.missesScaled(k, j.samples.Samples, ms, 1.1)
			if err != nil {
				return nil, err
			}
			missRange[key] = fmt.Sprintf("%.3g %.3g", lo, hi)
		}
	}
	s := report.ValidationSection(sim, real)
	extendValidation(s, real, sim, others,
		validationDiagnostic{"measured", "on the costs measured here", meas},
		validationDiagnostic{"unscaled", "on the model's costs unscaled", unscaled},
		validationDiagnostic{"process", "fitted to the whole process's CPU time", process})
	addMachines(s, machines)
	addColumn(s, "decode_cpu_share", decodeShares)
	addColumn(s, "sim_miss_cpu_x0.9_x1.1", missRange)
	addRealSpread(s, runs, simRuns)
	s.Note += fmt.Sprintf("; real: mpirun ranks of datahelix run on generated data (%s), oversubscribed on %d cores; "+
		"sim: each real run simulated as it ran, the simulated figures their mean (sim_*_runs: each), "+
		"sim.Run of the same samples in the same steps (NewDatasetSamples), the same GPU flags, W, horizon and seed, "+
		"exchange at %.0f MB/s and %d µs per message; the ranks' workers share the cores as the real ranks were pinned (more ranks than cores: "+
		"rank r on core r mod cores; the busy threads of a core share it equally); each step's gradient allreduce takes allreduce_us beyond the "+
		"slowest GPU, what the real run took (median over its steps; the column: over every run); its true costs are the calibrated model's predictions, and each "+
		"simulated rank spends the CPU time its real rank spent, which the real runs measured besides their waits (by its first delivery, its whole "+
		"process's, all its threads; after it, its decode workers' alone, decode_cpu_us: the rest, reading, planning, the exchange, MPI polling, "+
		"is not decoding, and the sim_process_* diagnostic counts it as decoding), on cores it shares with the machine's other processes, "+
		"sim_other_threads threads always ready to run (a thread's share of a busy core, all of an idle one) that take the cores "+
		"they took in the real run (others_cores, the column: the mean over the runs): by its first delivery, through start-up work before its first decode (what the real rank spent then beyond the "+
		"decodes: first reads, decoder set-up, cold caches), and over the run, its workers running at 1/sim_rank_slowdown of a core (per run, \" / \" between runs); "+
		"sim_miss_cpu_x0.9_x1.1: the simulated miss rate with every rank's CPU time 0.9x and 1.1x what the real run measured "+
		"(where it jumps, the real ranks ran near their cores' capacity and the miss rule is sensitive to small errors); "+
		"decode_cpu_share: the part of the process CPU time the decode workers spent (the rest: reading, planning, exchange, MPI polling "+
		"while a rank waits); cpu_over_work is the same for the whole job: its CPU time "+
		"over the measured decode time of the trained samples. The waits and misses are the simulator's own; "+
		"same_batches: the simulated run trained the very batches of the real one (equal batches_hash); "+
		"diagnostics: sim_measured_* use the costs measured here, sample by sample, scaled the same way, instead of the model's; "+
		"sim_unscaled_* the model's costs as calibrated (one decode alone on a core) at full speed; "+
		"sim_process_* each rank fitted to its whole process's CPU time over the run, as if all of it were decoding; "+
		"real_*_runs: each real run (the real figures are their mean), real_wait_spread: (max - min) / mean of their wait fractions; "+
		"the section \"real\" lists the runs",
		re.Scale, re.Cores, validationNetwork.BandwidthMBs, validationNetwork.LatencyUS)
	return s, nil
}

// validationDiagnostic is a simulation of the validation's runs made
// another way, shown beside them with whether it agrees by the same rule.
type validationDiagnostic struct {
	name  string // the columns' infix: sim_NAME_wait_frac, ...
	label string // what the headline calls it
	sims  []eval.Result
}

// extendValidation adds to ValidationSection's rows whether the
// simulated and real runs trained the same batches, what the real runs
// measured of the machine that the simulations use (inputs, by workload
// and loader: the cores other processes used, the runs' CPU time over
// their decode work, the allreduce's µs), then each diagnostic
// simulation's wait and misses and whether it agrees, and counts those
// in the headline.
func extendValidation(s *report.Section, real, sim []eval.Result, inputs map[[2]string][3]float64, diags ...validationDiagnostic) {
	s.Columns = append(s.Columns, "same_batches", "others_cores", "cpu_over_work", "allreduce_us")
	for _, d := range diags {
		s.Columns = append(s.Columns, "sim_"+d.name+"_wait_frac", "sim_"+d.name+"_miss_rate", "agrees_"+d.name)
	}
	find := func(rs []eval.Result, name, loader any) *eval.Result {
		for i := range rs {
			if rs[i].Workload == name && rs[i].Loader == loader {
				return &rs[i]
			}
		}
		return nil
	}
	agreeing := make([]int, len(diags))
	for i, row := range s.Rows {
		r, a := find(real, row[0], row[1]), find(sim, row[0], row[1])
		if r == nil || a == nil {
			for len(row) < len(s.Columns) {
				row = append(row, "-")
			}
			s.Rows[i] = row
			continue
		}
		var oc, cw, ar any = "-", "-", "-"
		if in, ok := inputs[[2]string{r.Workload, r.Loader}]; ok {
			if in[0] >= 0 {
				oc = in[0]
			}
			if in[1] > 0 {
				cw = in[1]
			}
			ar = int64(in[2])
		}
		row = append(row, a.BatchesHash == r.BatchesHash, oc, cw, ar)
		for n, d := range diags {
			v := find(d.sims, row[0], row[1])
			if v == nil {
				row = append(row, "-", "-", "-")
				continue
			}
			ok, _, _ := report.Agrees(*v, *r)
			if ok {
				agreeing[n]++
			}
			row = append(row, v.GPUWaitFrac, v.MissRate, ok)
		}
		s.Rows[i] = row
	}
	if len(s.Rows) == 0 || len(diags) == 0 {
		return
	}
	parts := make([]string, len(diags))
	for n, d := range diags {
		parts[n] = fmt.Sprintf("%s %d of %d", d.label, agreeing[n], len(s.Rows))
	}
	s.Headline += "; diagnostics: " + strings.Join(parts, ", ")
}

// decodeShare is the part of the runs' process CPU time (cpu_us) their
// decode workers spent (decode_cpu_us), over every rank; 0 when the
// records have none.
func decodeShare(runs ...[]metrics.StepRecord) float64 {
	var cpu, dec int64
	for _, recs := range runs {
		for _, r := range recs {
			cpu += r.CPUUS
			dec += r.DecodeCPUUS
		}
	}
	if cpu <= 0 || dec <= 0 {
		return 0
	}
	return float64(dec) / float64(cpu)
}

// addColumn adds a column of values by workload and loader ("-" for a
// row without one).
func addColumn(s *report.Section, name string, xs map[[2]string]any) {
	s.Columns = append(s.Columns, name)
	for i, row := range s.Rows {
		v, ok := xs[rowKey(row)]
		if !ok {
			v = "-"
		}
		s.Rows[i] = append(row, v)
	}
}

// rowKey is a validation row's workload and loader, its first two
// columns.
func rowKey(row []any) [2]string {
	w, _ := row[0].(string)
	loader, _ := row[1].(string)
	return [2]string{w, loader}
}

// addMachines adds the columns of each row's per-rank slowdowns and
// other processes' threads, by workload and loader, one entry per real
// run simulated (separated by " / ").
func addMachines(s *report.Section, ms map[[2]string][]simMachine) {
	sds, others := map[[2]string]any{}, map[[2]string]any{}
	for key, runs := range ms {
		var sd, ot []string
		for _, m := range runs {
			xs := make([]string, len(m.slowdown))
			for r, x := range m.slowdown {
				xs[r] = fmt.Sprintf("%.2f", x)
			}
			sd, ot = append(sd, strings.Join(xs, " ")), append(ot, fmt.Sprintf("%.2f", m.others))
		}
		if len(runs) > 0 {
			sds[key], others[key] = strings.Join(sd, " / "), strings.Join(ot, " / ")
		}
	}
	addColumn(s, "sim_rank_slowdown", sds)
	addColumn(s, "sim_other_threads", others)
}

// addRealSpread adds each real run's wait fraction and miss rate (the
// real figures are their mean), each run's simulation as it ran (sims,
// the simulated figures are their mean) and, to the headline, how far
// apart the real runs of one setup were: the noise of real runs on this
// machine.
func addRealSpread(s *report.Section, runs, sims map[[2]string][]eval.Result) {
	s.Columns = append(s.Columns, "real_wait_runs", "real_miss_runs", "real_wait_spread", "sim_wait_runs", "sim_miss_runs")
	worst, n := 0.0, 0
	for i, row := range s.Rows {
		key := rowKey(row)
		rs := runs[key]
		if len(rs) == 0 {
			s.Rows[i] = append(row, "-", "-", "-", "-", "-")
			continue
		}
		lo, hi, sum := rs[0].GPUWaitFrac, rs[0].GPUWaitFrac, 0.0
		for _, r := range rs {
			lo, hi, sum = min(lo, r.GPUWaitFrac), max(hi, r.GPUWaitFrac), sum+r.GPUWaitFrac
		}
		spread := 0.0
		if sum > 0 {
			spread = (hi - lo) / (sum / float64(len(rs)))
		}
		if len(rs) > 1 {
			worst = max(worst, spread)
			n++
		}
		waits, misses := runFigures(rs)
		simWaits, simMisses := runFigures(sims[key])
		s.Rows[i] = append(row, waits, misses, spread, simWaits, simMisses)
	}
	if n > 0 {
		s.Headline += fmt.Sprintf("; repeated real runs of one setup differ by up to %.0f %% in wait fraction (the rule allows 20 %%)", 100*worst)
	}
}

// runFigures lists the runs' wait fractions and miss rates, "-" for no
// run.
func runFigures(rs []eval.Result) (waits, misses string) {
	if len(rs) == 0 {
		return "-", "-"
	}
	ws, ms := make([]string, len(rs)), make([]string, len(rs))
	for k, r := range rs {
		ws[k], ms[k] = fmt.Sprintf("%.4g", r.GPUWaitFrac), fmt.Sprintf("%.4g", r.MissRate)
	}
	return strings.Join(ws, " "), strings.Join(ms, " ")
}
