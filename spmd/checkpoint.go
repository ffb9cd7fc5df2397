package spmd

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/datahelix/datahelix/decode"
)

// checkpointState is one rank's loader state at the start of a step: what
// a resumed run needs to deliver exactly the batches the uninterrupted run
// delivered from that step on.
type checkpointState struct {
	Version int             `json:"version"`
	Step    int64           `json:"step"` // the first step the resumed run delivers
	Rank    int             `json:"rank"`
	Ranks   int             `json:"ranks"`
	Loader  string          `json:"loader"`
	Batch   int             `json:"batch"`
	Seed    uint64          `json:"seed"`
	Shards  int             `json:"shards"`
	Reader  json.RawMessage `json:"reader"` // position before reading Step
	Cost    json.RawMessage `json:"cost_model"`
}

const checkpointVersion = 1

func checkpointPath(dir string, step int64, rank int) string {
	return filepath.Join(dir, fmt.Sprintf("step-%09d", step), fmt.Sprintf("rank-%05d.json", rank))
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
		Reader: snap.reader, Cost: cost,
	}
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	path := checkpointPath(l.cfg.CheckpointDir, step, l.comm.Rank())
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}

// restore loads the latest checkpoint every rank completed and returns its
// step. Rank 0 picks the step (the newest directory holding a file for
// every rank) and broadcasts it, so all ranks resume together.
func (l *Loader) restore() (int64, error) {
	var step int64 = -1
	if l.comm.Rank() == 0 {
		step = latestCheckpoint(l.cfg.CheckpointDir, l.comm.Size())
	}
	buf := binary.LittleEndian.AppendUint64(nil, uint64(step))
	if err := l.comm.Bcast(buf, 0); err != nil {
		return 0, err
	}
	step = int64(binary.LittleEndian.Uint64(buf))
	if step < 0 {
		return 0, fmt.Errorf("--resume: no complete checkpoint for %d ranks in %s", l.comm.Size(), l.cfg.CheckpointDir)
	}
	path := checkpointPath(l.cfg.CheckpointDir, step, l.comm.Rank())
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("--resume: %w", err)
	}
	var st checkpointState
	if err := json.Unmarshal(data, &st); err != nil {
		return 0, fmt.Errorf("--resume: %s: %w", path, err)
	}
	switch {
	case st.Version != checkpointVersion:
		return 0, fmt.Errorf("--resume: %s: version %d, this binary reads %d", path, st.Version, checkpointVersion)
	case st.Ranks != l.comm.Size() || st.Rank != l.comm.Rank():
		return 0, fmt.Errorf("--resume: %s was written by rank %d of %d", path, st.Rank, st.Ranks)
	case st.Batch != l.cfg.Batch || st.Seed != l.cfg.Seed || st.Shards != len(l.ds.Shards):
		return 0, fmt.Errorf("--resume: %s was written with batch %d, seed %d, %d shards; this run has %d, %d, %d",
			path, st.Batch, st.Seed, st.Shards, l.cfg.Batch, l.cfg.Seed, len(l.ds.Shards))
	}
	if err := l.reader.UnmarshalJSON(st.Reader); err != nil {
		return 0, fmt.Errorf("--resume: %s: %w", path, err)
	}
	cost := decode.NewCostModel(nil)
	if err := cost.UnmarshalJSON(st.Cost); err != nil {
		return 0, fmt.Errorf("--resume: %s: cost model: %w", path, err)
	}
	l.cost = cost
	return step, nil
}

// latestCheckpoint returns the newest step with a checkpoint file for
// each of ranks, or -1.
func latestCheckpoint(dir string, ranks int) int64 {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return -1
	}
	var steps []int64
	for _, e := range entries {
		if s, ok := strings.CutPrefix(e.Name(), "step-"); ok && e.IsDir() {
			if n, err := strconv.ParseInt(s, 10, 64); err == nil {
				steps = append(steps, n)
			}
		}
	}
	sort.Slice(steps, func(i, j int) bool { return steps[i] > steps[j] })
	for _, s := range steps {
		complete := true
		for r := 0; r < ranks && complete; r++ {
			_, err := os.Stat(checkpointPath(dir, s, r))
			complete = err == nil
		}
		if complete {
			return s
		}
	}
	return -1
}
