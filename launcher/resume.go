package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/datahelix/datahelix/collective"
	"github.com/datahelix/datahelix/spmd"
)

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
