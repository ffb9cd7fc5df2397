package loader

import (
	"fmt"
	"io"
	"sync"

	"github.com/datahelix/datahelix/decode"
)

// maxSampleLines is how many dropped or damaged samples a rank logs a
// line for over a job's loaders, before one line saying that it logs no
// more: a dataset whose samples fail by the thousand (MINT-1T's PDF
// subset, its images all TIFF) would otherwise fill the job's log with
// a line per sample. The summary still counts every one, and
// "datahelix decode" lists them.
const maxSampleLines = 20

// SampleLog is what one rank has logged of its dropped and damaged
// samples. The loaders of one job share it (Config.SampleLog), so that a
// sample every loader drops is logged once, and it stops at
// maxSampleLines samples, except for the first sample of each kind of
// failure it has not logged yet (a drop after 20 damaged samples, or a
// corrupt shard after 20 unsupported images): the user needs that line.
type SampleLog struct {
	mu     sync.Mutex
	seen   map[string]bool // reason, shard and key of each sample logged
	kinds  map[string]bool // reason and kind of each failure logged
	lines  int             // sample lines written
	capped bool            // the line saying no more follow was written
	warned bool            // the dataset's index warnings were written
}

// firstWarnings reports whether the dataset's index warnings are still
// to be written: true once per SampleLog, so that the loaders of a job
// write them once.
func (s *SampleLog) firstWarnings() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	first := !s.warned
	s.warned = true
	return first
}

// NewSampleLog returns an empty SampleLog, for one rank.
func NewSampleLog() *SampleLog {
	return &SampleLog{seen: map[string]bool{}, kinds: map[string]bool{}}
}

// once writes line to log (nil: none) the first time rank meets sample
// s for this reason, until maxSampleLines lines are written; then it
// writes one line saying that further samples go unlogged, and logs only
// the first sample of each reason and kind (the failure's class, such as
// decode.ErrCorrupt's text) not logged before. A nil SampleLog logs
// every line.
func (sl *SampleLog) once(log io.Writer, rank int, reason, kind string, s *decode.Sample, line string) {
	if log == nil {
		return
	}
	if sl == nil {
		io.WriteString(log, line)
		return
	}
	sl.mu.Lock()
	defer sl.mu.Unlock()
	key := reason + "\x00" + s.Shard + "\x00" + s.Key
	kindKey := reason + "\x00" + kind
	if sl.seen[key] {
		return
	}
	if sl.lines >= maxSampleLines {
		if !sl.capped {
			sl.cap(log, rank)
		}
		if sl.kinds[kindKey] {
			return
		}
	}
	sl.seen[key], sl.kinds[kindKey] = true, true
	sl.lines++
	io.WriteString(log, line)
}

// cap writes the line saying that samples of kinds already logged go
// unlogged from now on. sl.mu is held.
func (sl *SampleLog) cap(log io.Writer, rank int) {
	sl.capped = true
	fmt.Fprintf(log, "datahelix: rank %d: %d dropped or damaged samples logged, not logging more (but the first of each new kind of failure): the summary counts every one, and \"datahelix decode SHARD.tar...\" lists each sample that fails\n",
		rank, maxSampleLines)
}
