package cli

import (
	"io"
	"sync"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// IsTerminal reports whether w is a terminal: where the commands draw a
// progress bar, which redraws its line. Anything else (a batch log, a
// file, a pipe) gets plain lines or nothing, since every redraw would
// stay in it. A *SyncWriter is judged by the writer it serializes.
func IsTerminal(w io.Writer) bool {
	if s, ok := w.(*SyncWriter); ok {
		w = s.W
	}
	f, ok := w.(interface{ Fd() uintptr })
	return ok && term.IsTerminal(int(f.Fd()))
}

// NewBar is the commands' progress bar: total steps, described as what,
// with a count, cleared when it finishes.
func NewBar(w io.Writer, total int, what string) *progressbar.ProgressBar {
	return progressbar.NewOptions(total, progressbar.OptionSetWriter(w), progressbar.OptionSetDescription(what),
		progressbar.OptionShowCount(), progressbar.OptionClearOnFinish())
}

// SyncWriter serializes writes of whole lines from several ranks.
type SyncWriter struct {
	mu sync.Mutex
	W  io.Writer // the writer written to
}

func (s *SyncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.W.Write(p)
}
