package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/datahelix/datahelix/internal/bench/eval"
	"github.com/datahelix/datahelix/internal/bench/report"
	"github.com/datahelix/datahelix/internal/bench/workload"
	"github.com/datahelix/datahelix/internal/step"
)

// The sweeps (issue 27 §3): every point is run with SweepSeeds seeds
// (the report's --seed and the next ones) and reported as the mean with
// its 95 % confidence interval.
const (
	// SweepSeeds is the seeds of every sweep point.
	SweepSeeds = 5
	// RatioSweepSteps is the run length of the ratio sweep: 2,000 steps,
	// many shard lengths of every built-in workload's heavy source.
	RatioSweepSteps = 2000
	// RatioSweepRanks is the world of the ratio sweep: the published 8.
	RatioSweepRanks = workload.ReferenceRanks
	// RanksSweepSteps is the run length of the ranks sweep: 500 steps,
	// at least one whole shard of every source of the sweep's workload
	// (a 1 GB shard of images lasts 368 steps at B=16), and what 512
	// ranks x 5 seeds afford on a 2-core machine.
	RanksSweepSteps = 500
	// RanksSweepWorkload is the ranks sweep's workload: the cited video-LLM
	// mixture, the regime datahelix is for (fixed before any result).
	RanksSweepWorkload = "video_llm_mix"
)

// SweepRatios are the provisioning ratios of the ratio sweep (1.2 is the
// default rule).
var SweepRatios = []float64{0.8, 1.0, 1.2, 1.5, 2.0}

// SweepRanks are the world sizes of the ranks sweep.
var SweepRanks = []int{8, 32, 128, 512}

// sweepLoaders are the loaders a sweep compares.
var sweepLoaders = []step.Kind{step.KindTorch, step.KindHelix}

// sweepPoint is what the seeds of one sweep point measured, per seed.
type sweepPoint struct {
	torchMiss, helixMiss, torchWait, helixWait, torchTput, helixTput, ratio []float64
}

// add records one seed's torch and helix results.
func (p *sweepPoint) add(torch, helix eval.Result) {
	p.torchMiss = append(p.torchMiss, torch.SteadyMissRate)
	p.helixMiss = append(p.helixMiss, helix.SteadyMissRate)
	p.torchWait = append(p.torchWait, torch.SteadyGPUWaitFrac)
	p.helixWait = append(p.helixWait, helix.SteadyGPUWaitFrac)
	p.torchTput = append(p.torchTput, torch.ThroughputSPS)
	p.helixTput = append(p.helixTput, helix.ThroughputSPS)
	p.ratio = append(p.ratio, helix.ThroughputSPS/torch.ThroughputSPS)
}

// cells are the point's figures as row cells: each mean, then its 95 %
// confidence half-width.
func (p *sweepPoint) cells() []any {
	var out []any
	for _, xs := range [][]float64{p.torchMiss, p.helixMiss, p.torchWait, p.helixWait, p.torchTput, p.helixTput, p.ratio} {
		m, h := report.MeanCI(xs)
		out = append(out, m, h)
	}
	return out
}

// sweepColumns name sweepPoint.cells.
var sweepColumns = []string{"torch_steady_miss_rate", "ci95", "helix_steady_miss_rate", "ci95",
	"torch_steady_gpu_wait_frac", "ci95", "helix_steady_gpu_wait_frac", "ci95",
	"torch_throughput_sps", "ci95", "helix_throughput_sps", "ci95", "throughput_ratio_vs_torch", "ci95"}

// sweepRun simulates ws with torch and helix at ranks and steps for each
// seed, and returns per workload name the point.
func sweepRun(ctx context.Context, env *report.SectionEnv, ws []*workload.Workload, ranks, steps int) (map[string]*sweepPoint, error) {
	out := map[string]*sweepPoint{}
	for i := range SweepSeeds {
		ev, err := eval.RunSim(ctx, eval.EvalConfig{Workloads: ws, Loaders: sweepLoaders, Ranks: ranks, Steps: steps,
			Seed: env.Seed + uint64(i), Calibration: env.Calibration})
		if err != nil {
			return nil, err
		}
		for j := 0; j+1 < len(ev.Results); j += len(sweepLoaders) {
			torch, helix := ev.Results[j], ev.Results[j+1]
			p := out[torch.Workload]
			if p == nil {
				p = &sweepPoint{}
				out[torch.Workload] = p
			}
			p.add(torch, helix)
		}
	}
	return out, nil
}

// skewedOf returns the workloads of ws labelled skewed (their measured
// label).
func skewedOf(ws []*workload.Workload) []*workload.Workload {
	var out []*workload.Workload
	for _, w := range ws {
		if w.Skew == workload.Skewed {
			out = append(out, w)
		}
	}
	return out
}

// ratioSection sweeps the provisioning ratio on the run's skewed
// workloads: torch and helix at RatioSweepRanks ranks, RatioSweepSteps
// steps, SweepSeeds seeds per point.
func ratioSection(ctx context.Context, env *report.SectionEnv) (*report.Section, error) {
	ws := skewedOf(env.Workloads)
	if len(ws) == 0 {
		return &report.Section{Status: report.SectionSkipped, Note: "no workload of the run is skewed"}, nil
	}
	t0 := time.Now()
	s := &report.Section{Columns: append([]string{"workload", "ratio", "ranks", "steps", "seeds"}, sweepColumns...)}
	var low, high []float64 // mean throughput ratios at the lowest and highest ratio
	for _, r := range SweepRatios {
		rw := make([]*workload.Workload, len(ws))
		for i, w := range ws {
			rw[i] = w.WithRatio(r)
		}
		fmt.Fprintf(env.Log, "bench: ratio %.1f: %d workloads x %d seeds\n", r, len(ws), SweepSeeds)
		pts, err := sweepRun(ctx, env, rw, RatioSweepRanks, RatioSweepSteps)
		if err != nil {
			return nil, err
		}
		for _, w := range ws {
			p := pts[w.Name]
			s.Rows = append(s.Rows, append([]any{w.Name, r, RatioSweepRanks, RatioSweepSteps, SweepSeeds}, p.cells()...))
			m, _ := report.MeanCI(p.ratio)
			switch r {
			case SweepRatios[0]:
				low = append(low, m)
			case SweepRatios[len(SweepRatios)-1]:
				high = append(high, m)
			}
		}
	}
	lm, _ := report.MeanCI(low)
	hm, _ := report.MeanCI(high)
	s.Headline = fmt.Sprintf("helix/torch throughput, mean over %d skewed workloads: %.2fx at ratio %.1f, %.2fx at %.1f",
		len(ws), lm, SweepRatios[0], hm, SweepRatios[len(SweepRatios)-1])
	s.Note = fmt.Sprintf("steady figures; mean over %d seeds with the 95 %% confidence half-width (Student's t); took %.0f s here",
		SweepSeeds, time.Since(t0).Seconds())
	return s, nil
}

// ranksSection sweeps the world size on RanksSweepWorkload: torch and
// helix at each of SweepRanks, RanksSweepSteps steps, SweepSeeds seeds.
func ranksSection(ctx context.Context, env *report.SectionEnv) (*report.Section, error) {
	ws, err := workload.SelectWorkloads(RanksSweepWorkload)
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	s := &report.Section{Columns: append([]string{"workload", "ranks", "steps", "seeds", "elapsed_s"}, sweepColumns...)}
	var first, last float64
	for i, n := range SweepRanks {
		fmt.Fprintf(env.Log, "bench: %d ranks x %d seeds\n", n, SweepSeeds)
		t := time.Now()
		pts, err := sweepRun(ctx, env, ws, n, RanksSweepSteps)
		if err != nil {
			return nil, err
		}
		p := pts[ws[0].Name]
		s.Rows = append(s.Rows, append([]any{ws[0].Name, n, RanksSweepSteps, SweepSeeds, time.Since(t).Seconds()}, p.cells()...))
		m, _ := report.MeanCI(p.ratio)
		if i == 0 {
			first = m
		}
		last = m
	}
	s.Headline = fmt.Sprintf("helix/torch throughput on %s: %.2fx at %d ranks, %.2fx at %d", ws[0].Name,
		first, SweepRanks[0], last, SweepRanks[len(SweepRanks)-1])
	s.Note = fmt.Sprintf("steady figures; mean over %d seeds with the 95 %% confidence half-width (Student's t); took %.0f s here",
		SweepSeeds, time.Since(t0).Seconds())
	return s, nil
}
