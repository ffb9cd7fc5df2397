package launcher

import (
	"io"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// isTerminal reports whether w is a terminal: where the commands draw a
// progress bar, which redraws its line. Anything else (a batch log, a
// file, a pipe) gets plain lines or nothing, since every redraw would
// stay in it. A *syncWriter is judged by the writer it serializes.
func isTerminal(w io.Writer) bool {
	if s, ok := w.(*syncWriter); ok {
		w = s.w
	}
	f, ok := w.(interface{ Fd() uintptr })
	return ok && term.IsTerminal(int(f.Fd()))
}

// newBar is the commands' progress bar: total steps, described as what,
// with a count, cleared when it finishes.
func newBar(w io.Writer, total int, what string) *progressbar.ProgressBar {
	return progressbar.NewOptions(total, progressbar.OptionSetWriter(w), progressbar.OptionSetDescription(what),
		progressbar.OptionShowCount(), progressbar.OptionClearOnFinish())
}
