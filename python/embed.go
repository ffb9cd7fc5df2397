// Package python holds the trainer's client, the Python package
// datahelix (python/datahelix), embedded so that a datahelix binary
// installed on its own (go install) can put it on its trainers'
// PYTHONPATH.
package python

import "embed"

// Package is the datahelix Python package's source files, under
// datahelix/.
//
//go:embed datahelix/*.py
var Package embed.FS
