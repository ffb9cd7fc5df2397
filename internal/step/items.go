package step

import (
	"sort"

	"github.com/datahelix/datahelix/gpu"
	"github.com/datahelix/datahelix/internal/planlimits"
	"github.com/datahelix/datahelix/plan"
)

// Item is a sample as a rank's pipeline carries it before decoding: what
// the planner needs, plus how its decode splits into tasks.
type Item struct {
	ID    uint64
	Owner int
	Bytes int64 // compressed
	Est   int64 // estimated preparation cost, µs of reference CPU
	// Parts are the estimated costs of the sample's keyframe-aligned
	// decode tasks when it can be split (a clip whose targets span several
	// GOPs); nil or one entry when it cannot.
	Parts []int64
	Mem   int64 // decoded bytes of its output
	// Train is the GPU time, ns, the sample adds to its training step
	// under the simulated GPU's model (plan.Sample.Train); 0 when unknown.
	Train int64
}

// TrainTime is the GPU time, ns, a sample of c adds to a step under m:
// what the step costs with the sample minus what it costs without.
func TrainTime(m gpu.Model, c gpu.Contents) int64 {
	return min((m.StepTime(c) - m.Base).Nanoseconds(), planlimits.Train)
}

// LocalOrder returns slot indices in the rank-local decode order: largest
// estimated cost first, ties by sample id (the planner's rule for a
// rank's own samples).
func LocalOrder(items []Item) []int {
	order := make([]int, len(items))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		x, y := items[order[a]], items[order[b]]
		if x.Est != y.Est {
			return x.Est > y.Est
		}
		return x.ID < y.ID
	})
	return order
}

// SamplerOrder is the order PyTorch's fetcher uses: the sampler's.
func SamplerOrder(n int) []int {
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	return order
}

// BuildTasks turns a rank's batch (items by slot) and a decode order of
// slots into decode tasks; with split, a sample with several parts whose
// estimate exceeds splitAbove becomes one task per part (see SplitAbove).
func BuildTasks(step int64, items []Item, order []int, split bool, splitAbove int64) []Task {
	tasks := make([]Task, 0, len(items))
	for o, slot := range order {
		it := items[slot]
		if split && len(it.Parts) > 1 && it.Est > splitAbove {
			for p, c := range it.Parts {
				tasks = append(tasks, Task{Step: step, Slot: slot, Part: p, Parts: len(it.Parts), Order: o, Cost: c, Mem: it.Mem})
			}
			continue
		}
		tasks = append(tasks, Task{Step: step, Slot: slot, Parts: 1, Order: o, Cost: it.Est, Mem: it.Mem})
	}
	return tasks
}

// RankState is what a rank knows about itself when it plans a batch; the
// runtime fills it from clocks and measurements, the simulator from its
// model. Progress turns it into the planner's integer view.
type RankState struct {
	DeadlineUS int64 // until the GPU needs the batch; negative when overdue
	Waiting    int64 // estimated cost (µs, reference CPU) of queued tasks
	Running    int64 // estimated cost of started, unfinished tasks
	Workers    int
	// Speed is measured decode time over predicted, fixed-point
	// (plan.One = as fast as the reference CPU; 2*plan.One = half as fast).
	Speed     int64
	Bandwidth int64 // fixed-point bytes/µs (plan.One = 1 byte/µs)
	LatencyUS int64
	// Node is the rank's node (the lowest rank on it); ranks of other
	// nodes are reached at NodeBandwidth and NodeLatencyUS, 0 meaning
	// not measured yet (plan.Progress).
	Node          int
	NodeBandwidth int64
	NodeLatencyUS int64
}

// Progress converts the state into the planner's Progress: capacity is
// workers over speed; the backlog is the waiting work plus half the
// running work (on average a started task is half done), in this rank's
// wall time.
func (s RankState) Progress() plan.Progress {
	speed := s.Speed
	if speed <= 0 {
		speed = plan.One
	}
	workers := int64(max(s.Workers, 1))
	capacity := max(workers*plan.One*plan.One/speed, 1)
	capacity = min(capacity, planlimits.Capacity)
	// Capped before scaling: a queue of absurd estimates (each clamped to
	// planlimits.Cost) would overflow the product and wrap to no backlog.
	backlog := min(s.Waiting+s.Running/2, 1<<46) * plan.One / capacity
	bw := s.Bandwidth
	if bw <= 0 {
		bw = plan.One
	}
	return plan.Progress{
		Deadline:      clamp(s.DeadlineUS, 0, planlimits.Time),
		Backlog:       clamp(backlog, 0, planlimits.Time),
		Capacity:      capacity,
		Bandwidth:     clamp(bw, 1, planlimits.Bandwidth),
		Latency:       clamp(s.LatencyUS, 0, planlimits.Latency),
		Node:          clamp(int64(s.Node), 0, planlimits.Ranks-1),
		NodeBandwidth: clamp(s.NodeBandwidth, 0, planlimits.Bandwidth),
		NodeLatency:   clamp(s.NodeLatencyUS, 0, planlimits.Latency),
	}
}

// SpeedOf converts a speed factor (fixed point, plan.One = 1x) to the
// integer the progress record carries. NaN or a factor that is not
// positive gives 0, which the record reads as 1x; a huge one is capped,
// since converting a float out of int64's range gives what the CPU makes
// of it (math.MinInt64 on amd64, math.MaxInt64 on arm64).
func SpeedOf(x float64) int64 {
	switch {
	case !(x > 0):
		return 0
	case x > 1<<50:
		return 1 << 50
	}
	return int64(x)
}

func clamp(v, lo, hi int64) int64 { return min(max(v, lo), hi) }

// SplitAbove is the estimated cost (µs of reference CPU) above which a
// clip is split into keyframe-aligned tasks: half a step. Splitting costs
// CPU — every task seeks and decodes from its own keyframe, 1.3-1.7x the
// work of one sequential decode measured on this project's clips — so it
// pays only for a clip long enough to hold a deadline back by itself.
func SplitAbove(stepUS int64) int64 { return max(stepUS/2, 1) }
