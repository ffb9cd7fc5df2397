package realrun

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"github.com/datahelix/datahelix/internal/bench/eval"
	"github.com/datahelix/datahelix/internal/bench/workload"
	"github.com/datahelix/datahelix/internal/metrics"
	"github.com/datahelix/datahelix/internal/step"
)

// realResults turns datahelix run's summaries into results, with the
// steady-state figures computed from each loader's records.
func realResults(w *workload.Workload, sums []metrics.Summary, recs map[string][]metrics.StepRecord, horizon, ranks int, stats map[string]JobStats) ([]eval.Result, error) {
	var out []eval.Result
	for _, s := range sums {
		if s.Ranks != ranks {
			return nil, fmt.Errorf("%w: datahelix run's %s summary counts %d ranks, want %d", ErrReal, s.Loader, s.Ranks, ranks)
		}
		r := eval.Result{Workload: w.Name, Loader: s.Loader, Ranks: s.Ranks, MissRate: s.MissRate, GPUWaitFrac: s.GPUWaitFrac,
			ThroughputSPS: s.ThroughputSPS, BytesMovedPerStep: s.BytesMovedPerStep, Mode: "real", Skew: w.Skew,
			Steps: s.Steps, Batch: s.Batch, Workers: s.Workers, Misses: s.Misses, GPUWaitS: s.GPUWaitS, WallS: s.WallS,
			BatchesHash: s.BatchesHash, PlanUSP50: s.PlanUSP50, ElapsedS: stats[s.Loader].Wall.Seconds()}
		if rs := recs[s.Loader]; len(rs) > 0 {
			first := rs[0].RequestUS
			for _, x := range rs {
				first = min(first, x.RequestUS)
			}
			st := metrics.SteadyState(rs, horizon, first+int64(s.WallS*1e6))
			r.SetSteady(st)
		}
		out = append(out, r)
	}
	return out, nil
}

// ParseRunSummaries reads the --json file of datahelix run: one summary
// per loader.
func ParseRunSummaries(data []byte) ([]metrics.Summary, error) {
	var sums []metrics.Summary
	if err := json.Unmarshal(data, &sums); err != nil {
		return nil, fmt.Errorf("%w: datahelix run's summary: %v", ErrReal, err)
	}
	if len(sums) == 0 {
		return nil, fmt.Errorf("%w: datahelix run's summary holds no loader", ErrReal)
	}
	for _, s := range sums {
		if _, err := step.ParseKind(s.Loader); err != nil {
			return nil, fmt.Errorf("%w: datahelix run's summary: %v", ErrReal, err)
		}
		if s.Ranks < 1 || s.Steps < 0 || !(s.MissRate >= 0 && s.MissRate <= 1) || !(s.GPUWaitFrac >= 0) || !(s.WallS >= 0) {
			return nil, fmt.Errorf("%w: datahelix run's %s summary is inconsistent: %d ranks, %d steps, miss rate %v, wait %v, wall %v",
				ErrReal, s.Loader, s.Ranks, s.Steps, s.MissRate, s.GPUWaitFrac, s.WallS)
		}
	}
	return sums, nil
}

// traceLine is one line of datahelix run's --trace file.
type traceLine struct {
	Loader string `json:"loader"`
	metrics.StepRecord
}

// maxTraceLine bounds one trace line (a step record is about 300 bytes).
const maxTraceLine = 1 << 16

// ParseRunTrace reads datahelix run's --trace file (JSON lines of step
// records tagged with their loader) into records per loader.
func ParseRunTrace(r io.Reader) (map[string][]metrics.StepRecord, error) {
	out := map[string][]metrics.StepRecord{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), maxTraceLine)
	n := 0
	for sc.Scan() {
		n++
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var l traceLine
		if err := json.Unmarshal(line, &l); err != nil {
			return nil, fmt.Errorf("%w: datahelix run's trace, line %d: %v", ErrReal, n, err)
		}
		if _, err := step.ParseKind(l.Loader); err != nil {
			return nil, fmt.Errorf("%w: datahelix run's trace, line %d: %v", ErrReal, n, err)
		}
		if l.Step < 0 || l.Rank < 0 {
			return nil, fmt.Errorf("%w: datahelix run's trace, line %d: step %d, rank %d", ErrReal, n, l.Step, l.Rank)
		}
		out[l.Loader] = append(out[l.Loader], l.StepRecord)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: datahelix run's trace, line %d: %v", ErrReal, n+1, err)
	}
	return out, nil
}

// meanResult averages the runs of one loader: the figures are means, the
// counts rounded means. Every run must have trained the same batches.
func meanResult(rs []eval.Result) (eval.Result, error) {
	if len(rs) == 0 {
		return eval.Result{}, fmt.Errorf("bench: no run to average")
	}
	m := rs[0]
	if len(rs) == 1 {
		return m, nil
	}
	n := float64(len(rs))
	var miss, wait, tput, moved, waitS, wall, smiss, swait, plan, elapsed, misses float64
	var sstep, sstall, seff, stput, first, warm float64
	for _, r := range rs {
		if r.BatchesHash != m.BatchesHash || r.Loader != m.Loader || r.Workload != m.Workload {
			return eval.Result{}, fmt.Errorf("%w: %s %s: repeated runs trained different batches (%s, %s)", ErrReal, m.Workload, m.Loader, m.BatchesHash, r.BatchesHash)
		}
		miss += r.MissRate
		wait += r.GPUWaitFrac
		tput += r.ThroughputSPS
		moved += r.BytesMovedPerStep
		waitS += r.GPUWaitS
		wall += r.WallS
		smiss += r.SteadyMissRate
		swait += r.SteadyGPUWaitFrac
		sstep += r.SteadyStepMissRate
		sstall += r.SteadyJobStallFrac
		seff += r.SteadyEfficiency
		stput += r.SteadyThroughputSPS
		first += r.TimeToFirstBatchS
		warm += r.WarmupStallS
		plan += r.PlanUSP50
		elapsed += r.ElapsedS
		misses += float64(r.Misses)
	}
	m.MissRate, m.GPUWaitFrac, m.ThroughputSPS, m.BytesMovedPerStep = miss/n, wait/n, tput/n, moved/n
	m.GPUWaitS, m.WallS, m.SteadyMissRate, m.SteadyGPUWaitFrac = waitS/n, wall/n, smiss/n, swait/n
	m.PlanUSP50, m.ElapsedS, m.Misses = plan/n, elapsed/n, int(misses/n+0.5)
	m.SteadyStepMissRate, m.SteadyJobStallFrac, m.SteadyEfficiency, m.SteadyThroughputSPS = sstep/n, sstall/n, seff/n, stput/n
	m.TimeToFirstBatchS, m.WarmupStallS = first/n, warm/n
	return m, nil
}
