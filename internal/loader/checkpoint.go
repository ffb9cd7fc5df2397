package loader

import (
	"encoding/json"
	"fmt"
	"github.com/datahelix/datahelix/internal/agree"
	"os"
	"path/filepath"
)

// checkpointState is one rank's loader state at the start of a step: what
// a resumed run needs to deliver exactly the batches the uninterrupted run
// delivered from that step on.
type checkpointState struct {
	Version int   `json:"version"`
	Step    int64 `json:"step"` // the first step the resumed run delivers
	// Rank wrote the file, of the Ranks of its job: the step is complete
	// with the files of ranks 0..Ranks-1, and any number of ranks M with
	// M x batch = Ranks x Batch resumes it.
	Rank   int    `json:"rank"`
	Ranks  int    `json:"ranks"`
	Loader string `json:"loader"`
	Batch  int    `json:"batch"`
	Seed   uint64 `json:"seed"`
	Shards int    `json:"shards"`
	// Dataset is agree.DatasetHash of the dataset read (0 in files written
	// before it was recorded, which are not checked).
	Dataset uint64 `json:"dataset,omitempty"`
	// ShardList is the dataset's shards by name and sample count
	// (agree.ShardList), to name the shard that changed.
	ShardList []string        `json:"shard_list,omitempty"`
	Reader    json.RawMessage `json:"reader"` // position before reading Step
	Cost      json.RawMessage `json:"cost_model"`
}

const checkpointVersion = 2

// Checkpoints live under the --checkpoint-dir in one directory per loader,
// DIR/LOADER/step-NNNNNNNNN/rank-RRRRR.json, so that the loaders of one run
// (--loader torch,helix) keep their own states side by side and each
// resumes from its own.

// SavesCheckpoints reports whether a run of c saves any checkpoint: one
// every CheckpointEvery steps, before the last step (step Steps is not
// saved, there is nothing after it to resume).
func SavesCheckpoints(c Config) bool {
	return c.CheckpointDir != "" && c.CheckpointEvery > 0 && c.CheckpointEvery < c.Steps
}

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
		Loader: l.cfg.Loader.String(), Batch: l.cfg.Batch, Seed: l.cfg.Seed, Shards: l.ds.NumShards(),
		Dataset: l.dataset, ShardList: agree.ShardList(l.ds), Reader: snap.reader, Cost: cost,
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
		pruneCheckpoints(l.cfg.CheckpointDir, l.cfg.Loader, l.cfg.CheckpointKeep)
	}
	return nil
}

// pruneCheckpoints removes loader k's steps older than the newest keep
// complete steps (stepComplete), every rank's files and the step
// directory. Any rank may do it once it sees keep newer complete steps:
// ranks save steps in increasing order, so a step older than a complete
// one has every file it will ever get, and no rank still writes to it.
// Removing whole steps (rather than each rank its own files) is what
// lets the last rank to complete a step tidy for a rank that ran ahead
// and pruned before the newer steps were complete. A step still
// incomplete (another rank has not saved it yet) does not count, so the
// newest keep complete steps are never removed and resuming (which falls
// back past an unreadable one) keeps its choices. Errors are ignored: a
// file left behind only costs space.
func pruneCheckpoints(dir string, k Kind, keep int) {
	complete := 0
	for _, s := range checkpointSteps(dir, k) {
		if complete < keep {
			if _, ok := stepComplete(dir, k, s); ok {
				complete++
			}
			continue
		}
		os.RemoveAll(filepath.Dir(checkpointPath(dir, k, s, 0)))
	}
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
