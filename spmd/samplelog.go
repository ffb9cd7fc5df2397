package spmd

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
// maxSampleLines samples.
type SampleLog struct {
	mu     sync.Mutex
	seen   map[string]bool // reason, shard and key of each sample logged
	capped bool            // the line saying no more follow was written
}

// NewSampleLog returns an empty SampleLog, for one rank.
func NewSampleLog() *SampleLog {
	return &SampleLog{seen: map[string]bool{}}
}

// once writes line to log (nil: none) the first time rank meets sample
// s for this reason, until maxSampleLines lines are written; then it
// writes one line saying that further samples go unlogged, and stops
// remembering samples.
func (sl *SampleLog) once(log io.Writer, rank int, reason string, s *decode.Sample, line string) {
	if log == nil {
		return
	}
	sl.mu.Lock()
	defer sl.mu.Unlock()
	key := reason + "\x00" + s.Shard + "\x00" + s.Key
	if sl.capped || sl.seen[key] {
		return
	}
	if len(sl.seen) < maxSampleLines {
		sl.seen[key] = true
		io.WriteString(log, line)
		return
	}
	sl.capped = true
	fmt.Fprintf(log, "datahelix: rank %d: %d dropped or damaged samples logged, not logging more: the summary counts every one, and \"datahelix decode SHARD.tar...\" lists each sample that fails\n",
		rank, maxSampleLines)
}
