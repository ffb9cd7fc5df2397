package main

import (
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/datahelix/datahelix/collective"
	"github.com/datahelix/datahelix/spmd"
)

// resumeMode is the value of --resume, a boolean flag with a third value
// like --pin: a bare --resume means true (resume, and fail when there is
// no complete checkpoint), --resume=auto resumes when there is one and
// starts from step 0 otherwise (for requeued batch jobs, whose script
// always passes it). The zero value is false.
type resumeMode int

// The --resume values.
const (
	resumeFalse resumeMode = iota
	resumeTrue
	resumeAuto
)

// String returns the flag value as --resume accepts it.
func (m *resumeMode) String() string {
	if m != nil {
		switch *m {
		case resumeTrue:
			return "true"
		case resumeAuto:
			return "auto"
		}
	}
	return "false"
}

// Set parses a --resume value.
func (m *resumeMode) Set(s string) error {
	if s == "auto" {
		*m = resumeAuto
		return nil
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		return errors.New("want auto, true or false")
	}
	*m = resumeFalse
	if b {
		*m = resumeTrue
	}
	return nil
}

// IsBoolFlag makes a bare --resume mean --resume=true.
func (m *resumeMode) IsBoolFlag() bool { return true }

// resumeAutoDecide says whether loader k resumes under --resume=auto:
// when dir holds a complete checkpoint of it for this job's ranks. Every
// rank gets rank 0's answer (spmd.LatestCheckpoint), and rank 0 says in
// one line when the loader starts from step 0.
func resumeAutoDecide(c collective.Comm, dir string, k spmd.Kind, errOut io.Writer) (bool, error) {
	_, err := spmd.LatestCheckpoint(c, dir, k)
	switch {
	case errors.Is(err, spmd.ErrNoCheckpoint):
		if c.Rank() == 0 {
			fmt.Fprintf(errOut, "datahelix: --resume=auto: %v: loader %s starts from step 0\n", err, k)
		}
		return false, nil
	case err != nil:
		return false, err
	}
	return true, nil
}
