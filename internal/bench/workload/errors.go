package workload

import (
	"fmt"
	"strings"
)

// errPrefix starts every error of the benchmark harness, whichever of
// its packages (bench, realrun, report, eval, workload) made it; they
// all wrap with Wrapf.
const errPrefix = "bench: "

// Wrapf wraps err in the context format and args describe, saying the
// package once: "bench: workload text: real run failed: ..." rather than
// "bench: workload text: bench: real run failed: ...", as err is most
// often one of the package's own. errors.Is and errors.As see err.
func Wrapf(err error, format string, args ...any) error {
	return &wrapped{context: fmt.Sprintf(format, args...), err: err}
}

// wrapped is an error in context (Wrapf).
type wrapped struct {
	context string
	err     error
}

func (e *wrapped) Error() string {
	return errPrefix + e.context + ": " + strings.TrimPrefix(e.err.Error(), errPrefix)
}

func (e *wrapped) Unwrap() error { return e.err }
