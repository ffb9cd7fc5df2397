package loader

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

// stepComplete reports whether step holds the checkpoint files of
// ranks 0..n-1 of the job that wrote it, n its rank count (stepRanks),
// whatever the number of ranks of the job that asks: any number may
// resume it (with the same global batch). A file of a rank n or above is
// a leftover of another job, which no rank reads. It lists the step's
// directory once rather than asking for each rank's file: one metadata
// request, not n of them, on a parallel file system every rank asks at
// once.
func stepComplete(dir string, k Kind, step int64) (n int, ok bool) {
	n, have := stepRanks(dir, k, step)
	if n > len(have) {
		return n, false
	}
	for r := range n {
		if !have[r] {
			return n, false
		}
	}
	return n, n > 0
}

// stepRanks returns how many ranks wrote step, as its files record it
// (the first of them in rank order that reads and records one: rank 0's
// but for damage), and the ranks whose file is there. When no file
// records it (every one damaged) n is one more than the highest rank
// with a file, so that resuming reads them and names the damage; 0 when
// the step has no file.
func stepRanks(dir string, k Kind, step int64) (n int, have map[int]bool) {
	have = stepFiles(dir, k, step)
	ranks := slices.Sorted(maps.Keys(have))
	for _, r := range ranks {
		var st struct {
			Ranks int `json:"ranks"`
		}
		if data, err := os.ReadFile(checkpointPath(dir, k, step, r)); err == nil && json.Unmarshal(data, &st) == nil && st.Ranks > 0 {
			return st.Ranks, have
		}
	}
	if len(ranks) == 0 {
		return 0, have
	}
	return ranks[len(ranks)-1] + 1, have
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
// and before before, newest first, that are not complete
// (stepComplete), each with what is wrong: the ranks of the job that
// wrote it whose files are missing. They are the steps the scan of
// latestCheckpointBefore just passed over, read again for the message (a
// step complete by now is left out).
func incompleteSteps(dir string, k Kind, after, before int64) []incompleteStep {
	var steps []incompleteStep
	for _, s := range checkpointSteps(dir, k) {
		if s <= after || s >= before {
			continue
		}
		n, have := stepRanks(dir, k, s)
		if n == 0 {
			steps = append(steps, incompleteStep{s, "it has no checkpoint file"})
			continue
		}
		// List the first few missing ranks and count the rest: a
		// damaged file may record any number of ranks.
		var missing []string
		count := n
		for r := range have {
			if r < n {
				count--
			}
		}
		if count == 0 {
			continue
		}
		for r := 0; r < n && len(missing) < min(count, maxListed); r++ {
			if !have[r] {
				missing = append(missing, strconv.Itoa(r))
			}
		}
		list := strings.Join(missing, ", ")
		if count > len(missing) {
			list += fmt.Sprintf(", and %d more ranks", count-len(missing))
		}
		steps = append(steps, incompleteStep{s, fmt.Sprintf("it has no file of %s %s of the %d-rank job that wrote it (killed while saving it)",
			plural(count, "rank"), list, n)})
	}
	return steps
}

// checkpointScan is what one read of a checkpoint directory tells about
// loader k.
type checkpointScan struct {
	latest int64 // the newest complete step of k (stepComplete), or -1
	ranks  int   // how many ranks wrote latest (0 when there is none)
	// incomplete counts k's step directories newer than latest: all of
	// them when latest is -1.
	incomplete int64
	// other is the newest complete step of any loader not in the job
	// (nor k), or -1: the message of "none" tells to resume with that
	// --loader, which the job's own loaders are already. It is looked for
	// only when latest is -1, and is -1 otherwise.
	other int64
}

// scanCheckpoints reads loader k's step directories in dir before before,
// newest first, down to the first complete one. Only if k has none, the
// path to an error message, does it read each other loader's the same
// way, but those of job, the loaders of the job (nil: only k).
func scanCheckpoints(dir string, k Kind, before int64, job []Kind) checkpointScan {
	s := checkpointScan{other: -1}
	s.latest, s.ranks, s.incomplete = newestComplete(dir, k, before)
	if s.latest >= 0 {
		return s
	}
	for o := range KindOracle {
		if o != k && !slices.Contains(job, o) {
			latest, _, _ := newestComplete(dir, o, math.MaxInt64)
			s.other = max(s.other, latest)
		}
	}
	return s
}

// newestComplete returns the newest complete step before before of loader
// k in dir, or -1, the number of ranks that wrote it, and how many of k's
// step directories before before are newer than it (all of them when
// there is none).
func newestComplete(dir string, k Kind, before int64) (step int64, ranks int, newer int64) {
	steps := checkpointSteps(dir, k)
	steps = steps[sort.Search(len(steps), func(i int) bool { return steps[i] < before }):]
	for i, s := range steps {
		if n, ok := stepComplete(dir, k, s); ok {
			return s, n, int64(i)
		}
	}
	return -1, 0, int64(len(steps))
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
