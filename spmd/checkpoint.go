package spmd

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/datahelix/datahelix/collective"
	"github.com/datahelix/datahelix/decode"
)

// checkpointState is one rank's loader state at the start of a step: what
// a resumed run needs to deliver exactly the batches the uninterrupted run
// delivered from that step on.
type checkpointState struct {
	Version int    `json:"version"`
	Step    int64  `json:"step"` // the first step the resumed run delivers
	Rank    int    `json:"rank"`
	Ranks   int    `json:"ranks"`
	Loader  string `json:"loader"`
	Batch   int    `json:"batch"`
	Seed    uint64 `json:"seed"`
	Shards  int    `json:"shards"`
	// Dataset is datasetHash of the dataset read (0 in files written
	// before it was recorded, which are not checked).
	Dataset uint64          `json:"dataset,omitempty"`
	Reader  json.RawMessage `json:"reader"` // position before reading Step
	Cost    json.RawMessage `json:"cost_model"`
}

const checkpointVersion = 1

// Checkpoints live under the --checkpoint-dir in one directory per loader,
// DIR/LOADER/step-NNNNNNNNN/rank-RRRRR.json, so that the loaders of one run
// (--loader torch,helix) keep their own states side by side and each
// resumes from its own.

// loaderCheckpointDir is the directory of loader k's checkpoints.
func loaderCheckpointDir(dir string, k Kind) string { return filepath.Join(dir, k.String()) }

// checkpointPath is the file rank writes for loader k at step.
func checkpointPath(dir string, k Kind, step int64, rank int) string {
	return filepath.Join(loaderCheckpointDir(dir, k), fmt.Sprintf("step-%09d", step), fmt.Sprintf("rank-%05d.json", rank))
}

// checkpoint saves this rank's state for resuming at step. It waits for
// the control loop to have taken the reader snapshot of step (it is at
// most one step away: step is the next one to deliver).
func (l *Loader) checkpoint(step int64) error {
	l.mu.Lock()
	var snap snapshot
	for {
		var ok bool
		if snap, ok = l.snaps[step]; ok || l.fatal != nil || l.closed {
			break
		}
		l.cond.Wait()
	}
	for s := range l.snaps {
		if s < step {
			delete(l.snaps, s)
		}
	}
	err := l.fatal
	l.mu.Unlock()
	if err != nil {
		return err
	}
	cost, err := l.cost.MarshalJSON()
	if err != nil {
		return fmt.Errorf("checkpoint step %d: cost model: %w", step, err)
	}
	st := checkpointState{
		Version: checkpointVersion, Step: step, Rank: l.comm.Rank(), Ranks: l.comm.Size(),
		Loader: l.cfg.Loader.String(), Batch: l.cfg.Batch, Seed: l.cfg.Seed, Shards: len(l.ds.Shards),
		Dataset: l.dataset, Reader: snap.reader, Cost: cost,
	}
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	path := checkpointPath(l.cfg.CheckpointDir, l.cfg.Loader, step, l.comm.Rank())
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	if err := writeDurable(path, data); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	if l.cfg.CheckpointKeep > 0 {
		pruneCheckpoints(l.cfg.CheckpointDir, l.cfg.Loader, l.comm.Size(), l.comm.Rank(), l.cfg.CheckpointKeep)
	}
	return nil
}

// pruneCheckpoints removes rank's own files of loader k's steps older
// than the newest keep steps every one of ranks completed, and each such
// step directory once it is empty. Each rank decides from what it sees:
// a step still incomplete (another rank has not saved it yet) does not
// count, so the newest keep complete steps are never removed by any rank
// and resuming (which falls back past an unreadable one) keeps its
// choices. Errors are ignored: a file left behind only costs space.
func pruneCheckpoints(dir string, k Kind, ranks, rank, keep int) {
	complete := 0
	for _, s := range checkpointSteps(dir, k) {
		if complete < keep {
			if stepComplete(dir, k, s, ranks) {
				complete++
			}
			continue
		}
		os.Remove(checkpointPath(dir, k, s, rank))
		os.Remove(filepath.Dir(checkpointPath(dir, k, s, rank))) // fails until empty
	}
}

// stepComplete reports whether step has a checkpoint file of each rank.
// It lists the step's directory once rather than asking for each rank's
// file: one metadata request, not ranks of them, on a parallel file
// system every rank asks at once.
func stepComplete(dir string, k Kind, step int64, ranks int) bool {
	entries, err := os.ReadDir(filepath.Dir(checkpointPath(dir, k, step, 0)))
	if err != nil {
		return false
	}
	have := make(map[string]bool, len(entries))
	for _, e := range entries {
		have[e.Name()] = true
	}
	for r := range ranks {
		if !have[filepath.Base(checkpointPath(dir, k, step, r))] {
			return false
		}
	}
	return true
}

// writeDurable writes data to path through a temporary file that is
// synced before the rename and removed if anything fails, then syncs the
// directory: a node that crashes right after a checkpoint leaves the
// previous file or the new one, not an empty one, and a full disk leaves
// no partial temporary file behind.
func writeDurable(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		d.Sync() // best effort: some file systems refuse to sync a directory
		d.Close()
	}
	return nil
}

// ErrNoCheckpoint reports that a checkpoint directory holds no complete
// checkpoint of a loader for the job's number of ranks (LatestCheckpoint):
// a run asked to resume cannot, and one that resumes only when it can
// (--resume=auto) starts from step 0.
var ErrNoCheckpoint = errors.New("spmd: no complete checkpoint")

// noCheckpointError says which loader, ranks and directory had no
// complete checkpoint; it unwraps to ErrNoCheckpoint.
type noCheckpointError struct{ msg string }

func (e noCheckpointError) Error() string { return e.msg }
func (e noCheckpointError) Unwrap() error { return ErrNoCheckpoint }

// LatestCheckpoint returns the step of the newest checkpoint of loader k
// in dir that every rank of comm completed. A step directory missing some
// rank's file (a job killed while saving it, or one with another number
// of ranks) does not count: the one before it does. It is a collective
// call: rank 0 reads the directory and broadcasts the step, so every rank
// returns the same step, or the same error, even if their views of a
// shared file system differ. With no complete checkpoint the error wraps
// ErrNoCheckpoint (test with errors.Is) and is marked collective.AllRanks.
func LatestCheckpoint(comm collective.Comm, dir string, k Kind) (int64, error) {
	return latestCheckpointBefore(comm, dir, k, math.MaxInt64)
}

// latestCheckpointBefore is LatestCheckpoint among the steps before
// before.
func latestCheckpointBefore(comm collective.Comm, dir string, k Kind, before int64) (int64, error) {
	// Rank 0's view: the step, and for the message when there is none,
	// how many incomplete step directories and other loaders' latest step.
	view := []int64{-1, 0, -1}
	if comm.Rank() == 0 {
		s := scanCheckpoints(dir, k, comm.Size(), before)
		view[0], view[1], view[2] = s.latest, s.incomplete, s.other
	}
	buf := make([]byte, 0, 8*len(view))
	for _, v := range view {
		buf = binary.LittleEndian.AppendUint64(buf, uint64(v))
	}
	if err := comm.Bcast(buf, 0); err != nil {
		return 0, err
	}
	for i := range view {
		view[i] = int64(binary.LittleEndian.Uint64(buf[8*i:]))
	}
	if view[0] >= 0 {
		return view[0], nil
	}
	msg := fmt.Sprintf("no complete checkpoint of loader %s for %d ranks in %s", k, comm.Size(), loaderCheckpointDir(dir, k))
	switch n := view[1]; {
	case n == 1:
		msg += " (its one step directory lacks some rank's file: written by a job killed while saving, or by another number of ranks)"
	case n > 1:
		msg += fmt.Sprintf(" (each of its %d step directories lacks some rank's file: written by a job killed while saving, or by another number of ranks)", n)
	}
	if other := view[2]; other >= 0 {
		msg += fmt.Sprintf(" (%s holds other loaders' checkpoints, the latest at step %d: resume with the --loader that wrote them)", dir, other)
	}
	return -1, collective.AllRanks(noCheckpointError{msg})
}

// restore loads the latest checkpoint of this loader that every rank
// completed (LatestCheckpoint) and returns its step: 0 when there is none
// and the config resumes only if there is one (ResumeIfAny). A file that
// does not read (truncated or emptied by a crash, damaged) on any rank
// makes every rank fall back to the complete checkpoint before it, with
// a line naming the file; a file of another job (loader, ranks, batch,
// seed) is an error. Rank 0 says which step it resumes from.
func (l *Loader) restore() (int64, error) {
	dir, k := l.cfg.CheckpointDir, l.cfg.Loader
	before := int64(math.MaxInt64)
	for {
		step, err := latestCheckpointBefore(l.comm, dir, k, before)
		if errors.Is(err, ErrNoCheckpoint) && (l.cfg.ResumeIfAny || before != math.MaxInt64) {
			if before != math.MaxInt64 {
				err = fmt.Errorf("no readable checkpoint of loader %s in %s: the newer ones do not read (see above)", k, loaderCheckpointDir(dir, k))
			}
			if !l.cfg.ResumeIfAny {
				return 0, collective.AllRanks(fmt.Errorf("--resume: %w", err))
			}
			l.logf(0, "datahelix: --resume=auto: %v: loader %s starts from step 0\n", err, k)
			return 0, nil
		}
		if err != nil {
			return 0, fmt.Errorf("--resume: %w", err)
		}
		// From here to the file read every rank holds the same step: its
		// errors are every rank's.
		if step >= int64(l.cfg.Steps) {
			return 0, collective.AllRanks(fmt.Errorf("--resume: the checkpoint in %s is at step %d, at or past --steps %d: nothing to run",
				loaderCheckpointDir(dir, k), step, l.cfg.Steps))
		}
		reader, cost, unreadable, err := l.readCheckpoint(step)
		if err != nil && !unreadable {
			return 0, err // another job's checkpoint: falling back would not help
		}
		bad := []int64{0}
		if unreadable {
			bad[0] = 1
			l.logf(-1, "datahelix: rank %d: --resume: %v: trying the checkpoint before step %d\n", l.comm.Rank(), err, step)
		}
		if err := l.comm.AllreduceInt64(bad, collective.OpMax); err != nil {
			return 0, err
		}
		if bad[0] == 0 {
			*l.reader, l.cost = *reader, cost
			l.logf(0, "datahelix: loader %s resumes from step %d of %s\n", k, step, loaderCheckpointDir(dir, k))
			return step, nil
		}
		before = step
	}
}

// logf writes to the config's log on rank (every rank when rank is -1).
func (l *Loader) logf(rank int, format string, args ...any) {
	if l.cfg.Log != nil && (rank < 0 || l.comm.Rank() == rank) {
		fmt.Fprintf(l.cfg.Log, format, args...)
	}
}

// readCheckpoint reads this rank's checkpoint of step into a copy of its
// reader and a new cost model. unreadable says the error is the file's
// content (it does not parse, or its states are inconsistent), not that
// it cannot be read or another job wrote it.
func (l *Loader) readCheckpoint(step int64) (reader *Reader, cost *decode.CostModel, unreadable bool, err error) {
	dir, k := l.cfg.CheckpointDir, l.cfg.Loader
	path := checkpointPath(dir, k, step, l.comm.Rank())
	data, err := os.ReadFile(path)
	if err != nil {
		// Not the file's damage (it is missing, unreadable, the disk
		// fails): falling back would walk past every checkpoint.
		return nil, nil, false, fmt.Errorf("--resume: %w", err)
	}
	var st checkpointState
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, nil, true, fmt.Errorf("%s: %w", path, err)
	}
	switch {
	case st.Version != checkpointVersion:
		return nil, nil, false, fmt.Errorf("--resume: %s: version %d, this binary reads %d", path, st.Version, checkpointVersion)
	case st.Loader != k.String():
		return nil, nil, false, fmt.Errorf("--resume: %s was written by loader %q, this run's loader is %s", path, st.Loader, k)
	case st.Step != step:
		return nil, nil, true, fmt.Errorf("%s holds step %d, its directory says %d", path, st.Step, step)
	case st.Ranks != l.comm.Size() || st.Rank != l.comm.Rank():
		return nil, nil, false, fmt.Errorf("--resume: %s was written by rank %d of %d", path, st.Rank, st.Ranks)
	case st.Batch != l.cfg.Batch || st.Seed != l.cfg.Seed || st.Shards != len(l.ds.Shards):
		return nil, nil, false, fmt.Errorf("--resume: %s was written with batch %d, seed %d, %d shards; this run has %d, %d, %d",
			path, st.Batch, st.Seed, st.Shards, l.cfg.Batch, l.cfg.Seed, len(l.ds.Shards))
	case st.Dataset != 0 && st.Dataset != l.dataset:
		return nil, nil, false, fmt.Errorf("--resume: %s was written reading another dataset (other shard names or sample counts) than --data %s",
			path, filepath.Dir(l.ds.Shards[0].Path()))
	}
	r := *l.reader
	if err := r.UnmarshalJSON(st.Reader); err != nil {
		return nil, nil, true, fmt.Errorf("%s: %w", path, err)
	}
	cost = decode.NewCostModel(nil)
	if err := cost.UnmarshalJSON(st.Cost); err != nil {
		return nil, nil, true, fmt.Errorf("%s: cost model: %w", path, err)
	}
	return &r, cost, false, nil
}

// checkpointScan is what one read of a checkpoint directory tells about
// loader k for a job of some number of ranks.
type checkpointScan struct {
	latest int64 // the newest step of k with a file for every rank, or -1
	// incomplete counts k's step directories newer than latest: all of
	// them when latest is -1.
	incomplete int64
	// other is the newest step of any other loader with a file for every
	// rank, or -1; it is looked for only when latest is -1 (the message
	// of "none" is its one use), and is -1 otherwise.
	other int64
}

// scanCheckpoints reads dir once: loader k's step directories newest first
// down to the first complete one, then, only if k has none, each other
// loader's the same way.
func scanCheckpoints(dir string, k Kind, ranks int, before int64) checkpointScan {
	s := checkpointScan{other: -1}
	s.latest, s.incomplete = newestComplete(dir, k, ranks, before)
	if s.latest >= 0 {
		return s
	}
	for o := range Kind(len(kindNames)) {
		if o != k {
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
