package spmd

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// stepComplete reports whether step has a checkpoint file of each of
// ranks and of no other rank: a step with a file of rank 2 or 3 was
// written by a job of more ranks than 2, whose files of ranks 0 and 1
// this job could not resume from. It lists the step's directory once
// rather than asking for each rank's file: one metadata request, not
// ranks of them, on a parallel file system every rank asks at once.
func stepComplete(dir string, k Kind, step int64, ranks int) bool {
	n, ok := stepRanks(dir, k, step)
	return ok && n == ranks
}

// stepRanks returns n when step's directory holds the checkpoint files
// of ranks 0..n-1 and of no other rank (ok false otherwise: a rank's file
// missing, or no file at all).
func stepRanks(dir string, k Kind, step int64) (n int, ok bool) {
	have := stepFiles(dir, k, step)
	for r := range len(have) {
		if !have[r] {
			return 0, false
		}
	}
	return len(have), len(have) > 0
}

// stepFiles returns the ranks whose checkpoint file of step is in its
// directory (temporary files and others are not).
func stepFiles(dir string, k Kind, step int64) map[int]bool {
	entries, _ := os.ReadDir(filepath.Dir(checkpointPath(dir, k, step, 0)))
	have := map[int]bool{}
	for _, e := range entries {
		name, _ := strings.CutPrefix(e.Name(), "rank-")
		name, found := strings.CutSuffix(name, ".json")
		if !found {
			continue
		}
		if r, err := strconv.Atoi(name); err == nil && r >= 0 && e.Name() == filepath.Base(checkpointPath(dir, k, step, r)) {
			have[r] = true
		}
	}
	return have
}

// incompleteStep is a step directory a resume passes over, and why.
type incompleteStep struct {
	step int64
	why  string
}

// incompleteSteps returns loader k's step directories in dir after after
// and before before, newest first, that a job of ranks does not count
// complete, each with what is wrong: a rank's file missing, or a file of
// a rank the job has not. They are the steps the scan of
// latestCheckpointBefore just passed over, read again for the message (a
// step complete by now is left out).
func incompleteSteps(dir string, k Kind, ranks int, after, before int64) []incompleteStep {
	var steps []incompleteStep
	for _, s := range checkpointSteps(dir, k) {
		if s <= after || s >= before {
			continue
		}
		have := stepFiles(dir, k, s)
		var missing, extra []string
		for r := range ranks {
			if !have[r] {
				missing = append(missing, strconv.Itoa(r))
			}
		}
		for _, r := range slices.Sorted(maps.Keys(have)) {
			if r >= ranks {
				extra = append(extra, strconv.Itoa(r))
			}
		}
		var why []string
		if len(missing) > 0 {
			why = append(why, fmt.Sprintf("it has no file of %s %s (a job killed while saving it, or one of fewer ranks, wrote it)",
				plural(len(missing), "rank"), capList(missing, ", ", "ranks")))
		}
		if len(extra) > 0 {
			files := "a file"
			if len(extra) > 1 {
				files = "files"
			}
			why = append(why, fmt.Sprintf("it has %s of %s %s, which this %d-rank job has not (a job of more ranks wrote it)",
				files, plural(len(extra), "rank"), capList(extra, ", ", "ranks"), ranks))
		}
		if len(why) > 0 {
			steps = append(steps, incompleteStep{s, strings.Join(why, "; ")})
		}
	}
	return steps
}

// checkpointScan is what one read of a checkpoint directory tells about
// loader k for a job of some number of ranks.
type checkpointScan struct {
	latest int64 // the newest step of k with a file for every rank, or -1
	// incomplete counts k's step directories newer than latest: all of
	// them when latest is -1.
	incomplete int64
	// other is the newest step of any loader not in the job (nor k)
	// with a file for every rank, or -1: the message of "none" tells to
	// resume with that --loader, which the job's own loaders are already.
	// It is looked for only when latest is -1, and is -1 otherwise.
	other int64
	// foreignStep is, when latest is -1, the newest step of k complete
	// for another number of ranks, foreignRanks (-1 when none).
	foreignStep  int64
	foreignRanks int
}

// scanCheckpoints reads loader k's step directories in dir newest first
// down to the first complete one. Only if k has none, the path to an
// error message, does it read them again for a step another number of
// ranks completed, and each other loader's the first way, but those of
// job, the loaders of the job (nil: only k).
func scanCheckpoints(dir string, k Kind, ranks int, before int64, job []Kind) checkpointScan {
	s := checkpointScan{other: -1, foreignStep: -1}
	s.latest, s.incomplete = newestComplete(dir, k, ranks, before)
	if s.latest >= 0 {
		return s
	}
	s.foreignStep, s.foreignRanks = newestForeign(dir, k, ranks, before)
	for o := range KindOracle {
		if o != k && !slices.Contains(job, o) {
			latest, _ := newestComplete(dir, o, ranks, math.MaxInt64)
			s.other = max(s.other, latest)
		}
	}
	return s
}

// newestComplete returns the newest step before before of loader k in
// dir with a checkpoint file for each of ranks, or -1, and how many of
// k's step directories before before are newer than it (all of them when
// there is none).
func newestComplete(dir string, k Kind, ranks int, before int64) (step, newer int64) {
	steps := checkpointSteps(dir, k)
	steps = steps[sort.Search(len(steps), func(i int) bool { return steps[i] < before }):]
	for i, s := range steps {
		if stepComplete(dir, k, s, ranks) {
			return s, int64(i)
		}
	}
	return -1, int64(len(steps))
}

// newestForeign returns the newest step before before of loader k in dir
// that a job of another number of ranks than ranks completed, and that
// number, as its files say (rank 0's file records the job's ranks): -1
// and 0 when there is none.
func newestForeign(dir string, k Kind, ranks int, before int64) (int64, int) {
	for _, s := range checkpointSteps(dir, k) {
		if s >= before {
			continue
		}
		n, ok := stepRanks(dir, k, s)
		if !ok || n == ranks {
			continue
		}
		var st struct {
			Ranks int `json:"ranks"`
		}
		if data, err := os.ReadFile(checkpointPath(dir, k, s, 0)); err == nil && json.Unmarshal(data, &st) == nil && st.Ranks == n {
			return s, n
		}
	}
	return -1, 0
}

// checkpointSteps returns the steps of loader k's step directories in dir,
// complete or not, newest first.
func checkpointSteps(dir string, k Kind) []int64 {
	entries, err := os.ReadDir(loaderCheckpointDir(dir, k))
	if err != nil {
		return nil
	}
	var steps []int64
	for _, e := range entries {
		if s, ok := strings.CutPrefix(e.Name(), "step-"); ok && e.IsDir() {
			if n, err := strconv.ParseInt(s, 10, 64); err == nil && n >= 0 {
				steps = append(steps, n)
			}
		}
	}
	sort.Slice(steps, func(i, j int) bool { return steps[i] > steps[j] })
	return steps
}
