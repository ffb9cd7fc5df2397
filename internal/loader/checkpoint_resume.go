package loader

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"

	"github.com/datahelix/datahelix/collective"
	"github.com/datahelix/datahelix/decode"
	"github.com/datahelix/datahelix/internal/agree"
	"github.com/datahelix/datahelix/internal/costmodel"
	"github.com/datahelix/datahelix/internal/reader"
)

// ErrNoCheckpoint reports that a checkpoint directory holds no complete
// checkpoint of a loader (LatestCheckpoint): a run asked to resume
// cannot, and one that resumes only when it can (--resume=auto) starts
// from step 0.
var ErrNoCheckpoint = errors.New("spmd: no complete checkpoint")

// noCheckpointError says which loader and directory had no complete
// checkpoint; it unwraps to ErrNoCheckpoint.
type noCheckpointError struct{ msg string }

func (e noCheckpointError) Error() string { return e.msg }
func (e noCheckpointError) Unwrap() error { return ErrNoCheckpoint }

// LatestCheckpoint returns the step of the newest checkpoint of loader k
// in dir that every rank of the job that wrote it completed, whatever
// that job's number of ranks: a job of any number resumes it if its
// global batch (ranks x batch) is the same. A step directory missing
// some rank's file (a job killed while saving it) does not count: the
// one before it does. It is a collective call: rank 0 reads the
// directory and broadcasts the step, so every rank returns the same
// step, or the same error, even if their views of a shared file system
// differ. With no complete checkpoint the error wraps ErrNoCheckpoint
// (test with errors.Is) and is marked collective.AllRanks.
func LatestCheckpoint(comm collective.Comm, dir string, k Kind) (int64, error) {
	step, _, err := latestCheckpointBefore(comm, dir, k, math.MaxInt64, nil)
	return step, err
}

// latestCheckpointBefore is LatestCheckpoint among the steps before
// before, for a job running the loaders job (nil: unknown), whose
// checkpoints its message does not point to as another loader's. ranks
// is the number of ranks that wrote the step.
func latestCheckpointBefore(comm collective.Comm, dir string, k Kind, before int64, job []Kind) (step int64, ranks int, _ error) {
	// Rank 0's view: the step and its writers, and for the message when
	// there is none, how many incomplete step directories and other
	// loaders' latest step.
	view := []int64{-1, 0, 0, -1}
	if comm.Rank() == 0 {
		s := scanCheckpoints(dir, k, before, job)
		view[0], view[1], view[2], view[3] = s.latest, int64(s.ranks), s.incomplete, s.other
	}
	if err := bcastInt64s(comm, view); err != nil {
		return 0, 0, err
	}
	if view[0] >= 0 {
		return view[0], int(view[1]), nil
	}
	msg := fmt.Sprintf("no complete checkpoint of loader %s in %s", k, loaderCheckpointDir(dir, k))
	switch n := view[2]; {
	case n == 1:
		msg += " (its one step directory lacks some rank's file: written by a job killed while saving it)"
	case n > 1:
		msg += fmt.Sprintf(" (each of its %d step directories lacks some rank's file: written by jobs killed while saving them)", n)
	}
	if other := view[3]; other >= 0 {
		msg += fmt.Sprintf(" (%s holds other loaders' checkpoints, the latest at step %d: resume with the --loader that wrote them)", dir, other)
	}
	return -1, 0, collective.AllRanks(noCheckpointError{msg: msg})
}

// bcastInt64s replaces vals on every rank of comm with rank 0's: what
// rank 0 read of a checkpoint directory, so that every rank decides
// alike even if their views of a shared file system differ.
func bcastInt64s(comm collective.Comm, vals []int64) error {
	buf := make([]byte, 0, 8*len(vals))
	for _, v := range vals {
		buf = binary.LittleEndian.AppendUint64(buf, uint64(v))
	}
	if err := comm.Bcast(buf, 0); err != nil {
		return err
	}
	for i := range vals {
		vals[i] = int64(binary.LittleEndian.Uint64(buf[8*i:]))
	}
	return nil
}

// restore loads the latest complete checkpoint of this loader
// (LatestCheckpoint) and returns its step: 0 when there is none and the
// config resumes only if there is one (ResumeIfAny). Rank r of this
// job's M ranks reads the file of rank r mod N of the N that wrote it:
// the reader state is the same in every file, the cost model that
// rank's. A file that does not read (truncated or emptied by a crash,
// damaged) on any rank makes every rank fall back to the complete
// checkpoint before it, with a line naming the file; a file of another
// job (loader, global batch, seed, dataset) on any rank is an error on
// every rank alike, marked collective.AllRanks. Rank 0 says which step it resumes from, and which
// newer incomplete steps it passed over.
func (l *Loader) restore() (int64, error) {
	var rd *reader.Reader
	var cost *costmodel.Model
	step, ranks, found, err := resumeStep(l.comm, l.cfg, func(step int64, ranks int) (unreadable bool, err error) {
		rd, cost, unreadable, err = readCheckpoint(l.comm, l.ds, l.dataset, l.cfg, l.reader, step, ranks)
		return unreadable, err
	}, l.logf)
	if err != nil || !found {
		return 0, err
	}
	*l.reader, l.cost = *rd, cost
	saved := ""
	if ranks != l.comm.Size() {
		saved = fmt.Sprintf(", saved by %d ranks", ranks)
	}
	l.logf(0, "datahelix: loader %s resumes from step %d of %s%s\n", l.cfg.Loader, step, loaderCheckpointDir(l.cfg.CheckpointDir, l.cfg.Loader), saved)
	return step, nil
}

// resumeStep finds the step loader cfg.Loader resumes from, and how many
// ranks wrote it: the newest complete checkpoint whose files every rank
// reads, found by read (this rank's files of a step its ranks wrote:
// unreadable says one is damaged, err any failure), falling back past damaged ones. On logf (nil: none) each
// rank names its damaged files, and rank 0 the incomplete steps it
// passes over and why. found is false, with no error, when there is none
// and cfg.ResumeIfAny starts the loader fresh; when only damaged ones are
// left, the error (or the line of ResumeIfAny) names every rank's
// damaged files itself, so that it says why even when logf is nil. The
// message of no checkpoint does not tell to resume with one of
// cfg.jobLoaders. It is a collective call, and
// every rank returns the same step or fails alike. restore reads the
// checkpoint it finds; CheckJob calls it first, with the same reads, so
// that a checkpoint of another job is refused before any loader trains,
// even one behind a damaged newer step.
func resumeStep(comm collective.Comm, cfg Config, read func(step int64, ranks int) (unreadable bool, err error), logf func(rank int, format string, args ...any)) (step int64, ranks int, found bool, _ error) {
	dir, k := cfg.CheckpointDir, cfg.Loader
	quiet := logf == nil
	if quiet {
		logf = func(int, string, ...any) {}
	}
	var damaged []string // every rank's files that did not read, newest step first
	before := int64(math.MaxInt64)
	for {
		step, ranks, err := latestCheckpointBefore(comm, dir, k, before, cfg.jobLoaders)
		if errors.Is(err, ErrNoCheckpoint) && (cfg.ResumeIfAny || len(damaged) > 0) {
			if len(damaged) > 0 {
				err = fmt.Errorf("no readable checkpoint of loader %s in %s: a file of each complete step does not read (%s)",
					k, loaderCheckpointDir(dir, k), capList(damaged, "; ", "files"))
			}
			if !cfg.ResumeIfAny {
				return 0, 0, false, collective.AllRanks(fmt.Errorf("--resume: %w", err))
			}
			logf(0, "datahelix: --resume=auto: %v: loader %s starts from step 0\n", err, k)
			return 0, 0, false, nil
		}
		if err != nil {
			return 0, 0, false, fmt.Errorf("--resume: %w", err)
		}
		// From here to the file read every rank holds the same step: its
		// errors are every rank's.
		if step >= int64(cfg.Steps) {
			return 0, 0, false, collective.AllRanks(fmt.Errorf("--resume: the checkpoint in %s is at step %d, at or past --steps %d: nothing to run",
				loaderCheckpointDir(dir, k), step, cfg.Steps))
		}
		if !quiet && comm.Rank() == 0 {
			for _, s := range incompleteSteps(dir, k, step, before) {
				logf(0, "datahelix: --resume: loader %s passes over step %d of %s: %s\n", k, s.step, loaderCheckpointDir(dir, k), s.why)
			}
		}
		unreadable, err := read(step, ranks)
		if unreadable {
			logf(-1, "datahelix: rank %d: --resume: %v: trying the checkpoint before step %d\n", comm.Rank(), err, step)
		}
		bad, err := agreeOnCheckpoint(comm, unreadable, err)
		if err != nil {
			return 0, 0, false, err
		}
		if len(bad) == 0 {
			return step, ranks, true, nil
		}
		damaged = append(damaged, bad...)
		before = step
	}
}

// maxListed is how many items capList lists before saying how many more.
const maxListed = 8

// capList joins items with sep, the first maxListed of them, then says
// how many more (of what) there are.
func capList(items []string, sep, what string) string {
	if len(items) <= maxListed {
		return strings.Join(items, sep)
	}
	return strings.Join(items[:maxListed], sep) + fmt.Sprintf("%sand %d more %s", sep, len(items)-maxListed, what)
}

// plural is word, with an s unless n is 1.
func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

// agreeOnCheckpoint has the ranks agree on what their reads of one
// step's checkpoint found. A file of another job (another loader, number
// of ranks, batch, seed or dataset), or one a rank cannot read at all,
// is an error on every rank alike (collective.AllRanks), the lowest such
// rank's, since falling back would not help; otherwise damaged holds the
// errors of the ranks whose file is unreadable (damaged), in rank order,
// each file once,
// on every rank: if there are any, every rank tries the step before. err
// is this rank's error from readCheckpoint, unreadable whether it is the
// file's damage.
func agreeOnCheckpoint(comm collective.Comm, unreadable bool, err error) (damaged []string, _ error) {
	mine := []byte{'.'}
	switch {
	case err != nil && !unreadable:
		mine = append([]byte{'x'}, err.Error()...)
	case err != nil:
		mine = append([]byte{'u'}, err.Error()...)
	}
	all, gerr := comm.AllgatherVar(mine)
	if gerr != nil {
		return nil, gerr
	}
	for r, m := range all {
		switch {
		case len(m) == 0 || m[0] != 'x':
			// Ranks that read the same file (more ranks than wrote the
			// step) name it once.
			if len(m) > 0 && m[0] == 'u' && !slices.Contains(damaged, string(m[1:])) {
				damaged = append(damaged, string(m[1:]))
			}
		case r == comm.Rank():
			return nil, collective.AllRanks(err)
		default:
			return nil, collective.AllRanks(errors.New(string(m[1:])))
		}
	}
	return damaged, nil
}

// logf writes to the config's log on rank (every rank when rank is -1).
func (l *Loader) logf(rank int, format string, args ...any) {
	if l.cfg.Log != nil && (rank < 0 || l.comm.Rank() == rank) {
		fmt.Fprintf(l.cfg.Log, format, args...)
	}
}

// readCheckpoint reads this rank's file of step of loader cfg.Loader,
// which ranks ranks wrote, into a copy of reader (the rank's fresh
// reader) and a new cost model: rank r of this job's M reads the file of
// rank r mod ranks. When M is less than ranks it also reads the files
// of ranks r+M, r+2M... for what they say, so that every file of the
// step is checked by some rank: none may be damaged or another job's.
// unreadable says the error is a file's content (it does not parse, or
// its states are inconsistent), not that it cannot be read or another
// job wrote it; dataset is agree.DatasetHash(ds).
func readCheckpoint(comm collective.Comm, ds decode.Source, dataset uint64, cfg Config, rd *reader.Reader, step int64, ranks int) (_ *reader.Reader, cost *costmodel.Model, unreadable bool, err error) {
	st, path, unreadable, err := readCheckpointState(comm, ds, dataset, cfg, step, ranks, comm.Rank()%ranks)
	if err != nil {
		return nil, nil, unreadable, err
	}
	for q := comm.Rank() + comm.Size(); q < ranks; q += comm.Size() {
		if _, _, unreadable, err := readCheckpointState(comm, ds, dataset, cfg, step, ranks, q); err != nil {
			return nil, nil, unreadable, err
		}
	}
	r := *rd
	if err := r.UnmarshalJSON(st.Reader); err != nil {
		return nil, nil, true, fmt.Errorf("%s: %w", path, err)
	}
	cost = costmodel.New(nil)
	if err := cost.UnmarshalJSON(st.Cost); err != nil {
		return nil, nil, true, fmt.Errorf("%s: cost model: %w", path, err)
	}
	return &r, cost, false, nil
}

// readCheckpointState reads the checkpoint file of rank of step of
// loader cfg.Loader, which ranks ranks wrote, and checks that this run
// can resume from it: the same global batch (ranks x batch) whatever the
// number of ranks, seed and dataset. unreadable and err are as
// readCheckpoint's; dataset is agree.DatasetHash(ds).
func readCheckpointState(comm collective.Comm, ds decode.Source, dataset uint64, cfg Config, step int64, ranks, rank int) (st checkpointState, path string, unreadable bool, err error) {
	k := cfg.Loader
	path = checkpointPath(cfg.CheckpointDir, k, step, rank)
	data, err := os.ReadFile(path)
	if err != nil {
		// Not the file's damage (it is missing, unreadable, the disk
		// fails): falling back would walk past every checkpoint.
		return st, path, false, fmt.Errorf("--resume: %w", err)
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return st, path, true, fmt.Errorf("%s: %w", path, err)
	}
	if err := checkpointFields(data, st.Version); err != nil {
		return st, path, true, fmt.Errorf("%s: %w", path, err)
	}
	global, mine := st.Ranks*st.Batch, comm.Size()*cfg.Batch
	switch {
	case st.Version != checkpointVersion:
		err = fmt.Errorf("--resume: %s: version %d, this binary reads %d", path, st.Version, checkpointVersion)
	case st.Loader != k.String():
		err = fmt.Errorf("--resume: %s was written by loader %q, this run's loader is %s", path, st.Loader, k)
	case st.Step != step:
		return st, path, true, fmt.Errorf("%s holds step %d, its directory says %d", path, st.Step, step)
	case st.Ranks != ranks || st.Rank != rank:
		// Its step's other files say another job wrote them: two jobs'
		// files mixed, the later one killed while saving.
		return st, path, true, fmt.Errorf("%s holds rank %d of %d, its step's files were written by %d ranks (a job killed while saving it)",
			path, st.Rank, st.Ranks, ranks)
	case global != mine:
		err = fmt.Errorf("--resume: %s was written with a global batch of %d (%d ranks x %d), this job's is %d (%d x %d): keep ranks x --batch to resume at another number of ranks",
			path, global, st.Ranks, st.Batch, mine, comm.Size(), cfg.Batch)
	case st.Seed != cfg.Seed:
		err = fmt.Errorf("--resume: %s was written with seed %d, this job's is %d", path, st.Seed, cfg.Seed)
	case (st.Shards != ds.NumShards() || st.Dataset != 0 && st.Dataset != dataset) && st.ShardList != nil:
		err = fmt.Errorf("--resume: %s was written reading another dataset than --data %s (%s)",
			path, agree.SourceName(ds), agree.FirstDifference(st.ShardList, agree.ShardList(ds)))
	case st.Shards != ds.NumShards():
		err = fmt.Errorf("--resume: %s was written reading %d shards, this job reads %d (--data %s)", path, st.Shards, ds.NumShards(), agree.SourceName(ds))
	case st.Dataset != 0 && st.Dataset != dataset:
		err = fmt.Errorf("--resume: %s was written reading another dataset (other shard names or sample counts) than --data %s",
			path, agree.SourceName(ds))
	}
	return st, path, false, err
}

// checkpointFields checks that data, a JSON value that unmarshals into a
// checkpointState of the given version, is one a checkpoint wrote: an
// object with a version, and, of this binary's version, every field it
// writes (dataset aside, which older files lack). A file without them is
// damaged (some other JSON written over it), not a file of another
// version or job, which its own version or fields would say.
func checkpointFields(data []byte, version int) error {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil || fields == nil {
		return errors.New("not a checkpoint (not a JSON object)")
	}
	if v, ok := fields["version"]; !ok || string(v) == "null" {
		return errors.New("not a checkpoint (no version field)")
	}
	if version != checkpointVersion {
		return nil // another version's fields are its own
	}
	var missing []string
	for _, f := range checkpointRequired {
		if v, ok := fields[f]; !ok || string(v) == "null" {
			missing = append(missing, f)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("not a checkpoint (no %s %s)", strings.Join(missing, ", "), plural(len(missing), "field"))
	}
	return nil
}

// checkpointRequired are the JSON fields besides version that every
// checkpoint of checkpointVersion holds: checkpointState's but dataset.
var checkpointRequired = []string{"step", "rank", "ranks", "loader", "batch", "seed", "shards", "reader", "cost_model"}

// checkStartCheckpoints checks the checkpoint directory for the loaders
// of a job before the first of them runs (CheckJob), so that a job that
// cannot use it fails at start, not after hours of another loader's
// training. A run asked to resume (cfg.Resume without ResumeIfAny) needs
// a complete checkpoint of every loader, before --steps, that this job
// may resume (its loader, global batch, seed and dataset, at any number
// of ranks); one with
// ResumeIfAny, as each loader finds it, but the ones it finds must be
// this job's too. A new run that will save
// checkpoints (cfg.Resume false) must not write them among an earlier
// run's: a later --resume would take the earlier run's newer steps for
// this run's. Rank 0 reads the directory; every rank returns the same
// error, marked collective.AllRanks.
func checkStartCheckpoints(comm collective.Comm, ds decode.Source, cfg Config, kinds []Kind) error {
	dir := cfg.CheckpointDir
	if dir == "" {
		return nil
	}
	if cfg.Resume {
		// Each loader's walk as restore will make it, with the same
		// reads, quietly (restore says what it passes over; an error
		// names the damaged files itself): another job's checkpoint
		// (batch, seed, dataset...) on any rank fails now, even behind a
		// damaged newer step. No checkpoint of a loader points to the
		// other loaders' only if they are not this job's.
		if err := cfg.setDefaults(); err != nil {
			return collective.AllRanks(err)
		}
		reader, err := newRankReader(comm, ds, cfg)
		if err != nil {
			return err
		}
		hash := agree.DatasetHash(ds)
		for _, k := range kinds {
			c := cfg
			c.Loader, c.jobLoaders = k, kinds
			_, _, _, err := resumeStep(comm, c, func(step int64, ranks int) (bool, error) {
				_, _, unreadable, err := readCheckpoint(comm, ds, hash, c, reader, step, ranks)
				return unreadable, err
			}, nil)
			if err != nil {
				return err
			}
		}
		return nil
	}
	if !SavesCheckpoints(cfg) {
		return nil
	}
	// Rank 0's view: the newest step of each loader with a checkpoint
	// file of some rank, complete or not, or -1.
	newest := make([]int64, len(kinds))
	for i, k := range kinds {
		newest[i] = -1
		if comm.Rank() != 0 {
			continue
		}
		for _, s := range checkpointSteps(dir, k) {
			if len(stepFiles(dir, k, s)) > 0 {
				newest[i] = s
				break
			}
		}
	}
	if err := bcastInt64s(comm, newest); err != nil {
		return err
	}
	for i, k := range kinds {
		if step := newest[i]; step >= 0 {
			ld := loaderCheckpointDir(dir, k)
			return collective.AllRanks(fmt.Errorf("--checkpoint-dir %s: %s holds checkpoints of an earlier run, the newest at step %d, which a later --resume would take for this run's: pass --resume to continue that run, or remove %s or pick another --checkpoint-dir",
				dir, ld, step, ld))
		}
	}
	return nil
}
