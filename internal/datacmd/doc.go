// Package datacmd holds the bodies of the datahelix commands that work
// on a dataset outside a job: gen generates one (internal/gen), cache
// lists and prunes the generated datasets and shard indexes it keeps,
// inspect prints every sample's lightweight record and estimated cost,
// and costmodel fits the decode-cost model on one and prints its
// held-out error (internal/inspect). Each is a cli.Command that the
// launcher's dispatch table lists; the libraries they drive know
// nothing of the command line.
package datacmd
