package eval

import (
	"fmt"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/datahelix/datahelix/internal/bench/workload"
)

// What a simulation holds, measured with GODEBUG=gctrace=1 (the largest
// live heap after a collection) on linux/amd64, go1.26, one simulation
// at a time (--parallel 1, --sections none), for kinetics, imagenet,
// interleaved, panda70m, hetero_cluster (B=16 or 32) and laion (B=256)
// with the helix, local and torch loaders at 256 to 1024 ranks and 4,
// 16 and 64 steps:
//
//   - a sample of the planning window (the horizon's batches, planned
//     and in flight: their samples, tasks, events and the planner's
//     input) took 160 (laion's images) to 400 bytes (kinetics' clips,
//     split into tasks): simSampleBytes;
//   - a rank-step beyond the window about 350 bytes (its record and
//     per-step state, kept for the whole run: simRankStepBytes) and 22
//     bytes a sample (the drawn shards' entries and the run's sums:
//     simStepSampleBytes): 690 bytes at B=16, 5.8 KB at B=256;
//   - a rank about 8 KB besides, its scheduler and GPU tracker:
//     simRankBytes. (A shard was drawn whole, 40 KB a rank for 10,000
//     samples a shard; it is now drawn only as far as it is read, inside
//     the 22 bytes a sample above.)
//
// For example helix on kinetics at 1024 ranks held 74 MB live at 4
// steps, 144 MB at 16 and 178 MB at 64. The process's resident memory
// is about simHeapFactor times the live heap (GOGC=100): 324 MB at 1024
// ranks and 20 steps, where the model below says 340 MB; the 24 GB a
// run of 65536 ranks and 20 steps grew to before it was killed is the
// model's 21.7 GB plus the drawing of its samples. Laion's images, at
// 256 ranks and 64 steps, took 555 MB for the model's 1.1 GB.
const (
	simSampleBytes     = 400
	simRankStepBytes   = 400
	simStepSampleBytes = 24
	simRankBytes       = 8 << 10
	simHeapFactor      = 2
)

// MaxSimBytes is the memory one simulation may be estimated to need
// (SimMemory) when the machine's physical memory cannot be read: 8 GiB,
// 18 times the 1024-rank, B=16, 100-step scale goal (about 0.45 GB) and
// above the largest default evaluation at 1024 ranks (laion, B=256, 200
// steps: 6.1 GB by the model, which overestimates images about twice).
const MaxSimBytes = 8 << 30

// simMemoryLimit returns the memory one simulation may be estimated to
// need, and where the figure comes from: three quarters of the machine's
// physical memory, leaving the rest to the system and other work (19 GB
// on a 24 GiB node, so that the 24 GB a 65536-rank run grew to is
// refused), or MaxSimBytes when it cannot be read. Several simulations
// run at once (--parallel), each within it. A positive set is taken
// instead, as another machine's limit.
func simMemoryLimit(set float64) (float64, string) {
	if set > 0 {
		return set, "the limit set"
	}
	return machineMemoryLimit()
}

var machineMemoryLimit = sync.OnceValues(func() (float64, string) {
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil || si.Totalram == 0 {
		return MaxSimBytes, "this machine's memory is unknown"
	}
	return float64(si.Totalram) * float64(max(si.Unit, 1)) * 3 / 4, "three quarters of this machine's memory"
})

// SimMemory estimates the resident memory, in bytes, of simulating
// workload w at ranks ranks, per-rank batch b and steps steps: the
// samples of the planning window (horizon(w) steps ahead), what each
// rank-step and sample keeps for the run (the shard entries drawn among
// them: shards are drawn only as far as they are read), from the
// measurements above. It is a float64: the product
// of absurd flags would overflow an integer.
func SimMemory(w *workload.Workload, ranks, steps, b int) float64 {
	n, s, bf := float64(ranks), float64(steps), float64(b)
	window := float64(min(steps, Horizon(w)))
	perRank := window*bf*simSampleBytes + s*(simRankStepBytes+bf*simStepSampleBytes) + simRankBytes
	return simHeapFactor * n * perRank
}

// checkSimMemory refuses to simulate w at ranks, steps and batch b when
// SimMemory exceeds simMemoryLimit(set), naming the flags that set them.
func checkSimMemory(w *workload.Workload, ranks, steps, b int, set float64, ranksFlag, stepsFlag, batchFlag string) error {
	need := SimMemory(w, ranks, steps, b)
	limit, why := simMemoryLimit(set)
	if need <= limit {
		return nil
	}
	return fmt.Errorf("bench: %s %d %s %d %s %d (workload %s): a simulation would need about %s of memory "+
		"(%.3g samples; the planning window's %d steps at %d bytes a sample, %d bytes a rank-step and %d a sample after, twice over for the garbage collector), "+
		"over the limit of %s (%s): lower %s, %s or %s",
		ranksFlag, ranks, stepsFlag, steps, batchFlag, b, w.Name, gigabytes(need),
		float64(ranks)*float64(steps)*float64(b), min(steps, Horizon(w)), simSampleBytes, simRankStepBytes, simStepSampleBytes,
		gigabytes(limit), why, ranksFlag, stepsFlag, batchFlag)
}

// gigabytes formats a byte count in GB (10^9 bytes).
func gigabytes(n float64) string {
	if n >= 1e12 {
		return fmt.Sprintf("%.3g TB", n/1e12)
	}
	return fmt.Sprintf("%.1f GB", n/1e9)
}
