package shard

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/datahelix/datahelix/internal/decoding"
	"github.com/datahelix/datahelix/internal/shardindex"
)

// Dataset is an ordered set of WebDataset tar shards, each indexed (key →
// member offsets and sizes) and its index cached, so that ReadSample
// fetches a whole sample with one read. Its methods are safe for
// concurrent use. The process keeps a bounded number of shards' files and
// indexes loaded, letting go of the least recently read, so a dataset of
// many thousand shards runs it out of neither file descriptors nor
// memory.
type Dataset struct {
	path   string
	shards []*Shard
}

// OpenDataset opens the shards named by pathOrGlob as decode.OpenDataset
// documents, indexing them starting with the part-th of parts equal runs
// of them as decode.OpenDatasetPart does.
func OpenDataset(pathOrGlob string, cacheDir string, part, parts int) (*Dataset, error) {
	paths, err := shardindex.Paths(pathOrGlob)
	if err != nil {
		return nil, err
	}
	n := len(paths)
	first := partStart(n, part, parts)
	d := &Dataset{path: pathOrGlob, shards: make([]*Shard, n)}
	var failed []shardOpenError
	for k := range n {
		i := (first + k) % n
		s, err := Open(paths[i], cacheDir)
		if err != nil {
			failed = append(failed, shardOpenError{i, err})
			continue
		}
		d.shards[i] = s
	}
	if len(failed) > 0 {
		d.Close()
		return nil, openError(failed, n)
	}
	return d, nil
}

// partStart returns the first shard of the part-th of parts equal runs
// of n shards (0 for a part out of range).
func partStart(n, part, parts int) int {
	if parts <= 1 || part <= 0 || part >= parts {
		return 0
	}
	return int(int64(part) * int64(n) / int64(parts))
}

// maxOpenErrors is how many of the shards that cannot be opened the error
// of OpenDataset names; it counts the others.
const maxOpenErrors = 5

// shardOpenError is why shard i of a dataset cannot be opened.
type shardOpenError struct {
	i   int
	err error
}

// openError is the error of a dataset of n shards of which failed cannot
// be opened: the one error, or one naming the first maxOpenErrors in
// shard order and wrapping all of them.
func openError(failed []shardOpenError, n int) error {
	if len(failed) == 1 {
		return failed[0].err
	}
	slices.SortFunc(failed, func(a, b shardOpenError) int { return a.i - b.i })
	errs := make([]error, len(failed))
	var b strings.Builder
	fmt.Fprintf(&b, "decode: %d of %d shards cannot be opened: ", len(failed), n)
	for k, f := range failed {
		errs[k] = f.err
		if k < maxOpenErrors {
			if k > 0 {
				b.WriteString("; ")
			}
			b.WriteString(strings.TrimPrefix(f.err.Error(), "decode: "))
		}
	}
	if rest := len(failed) - maxOpenErrors; rest > 0 {
		fmt.Fprintf(&b, "; and %d more", rest)
	}
	return &kindError{msg: b.String(), kinds: errs}
}

// kindError is an error with its own message that unwraps to sentinel
// kinds, or to the errors it sums up, without repeating their text.
type kindError struct {
	msg   string
	kinds []error
}

func (e *kindError) Error() string   { return e.msg }
func (e *kindError) Unwrap() []error { return e.kinds }

// Len returns the number of samples over all shards.
func (d *Dataset) Len() int {
	n := 0
	for _, s := range d.shards {
		n += s.Len()
	}
	return n
}

// ShardsOf returns the shards of d, in order: what the module's own
// commands and the loader read of a dataset beyond its Source methods
// (each shard's path, index warnings and entries).
func ShardsOf(d *Dataset) []*Shard { return d.shards }

// String returns the path or glob the dataset was opened from, to name
// it in messages.
func (d *Dataset) String() string { return d.path }

// Close releases the file handles of all shards.
func (d *Dataset) Close() error {
	var errs []error
	for _, s := range d.shards {
		if s != nil { // a shard OpenDataset could not open
			errs = append(errs, s.Close())
		}
	}
	return errors.Join(errs...)
}

// NumShards is the number of shards.
func (d *Dataset) NumShards() int { return len(d.shards) }

// ShardName is shard i's file name.
func (d *Dataset) ShardName(i int) string { return filepath.Base(d.shards[i].Path()) }

// ShardLen is the number of samples in shard i.
func (d *Dataset) ShardLen(i int) int { return d.shards[i].Len() }

// ReadSample reads sample index of shard i.
func (d *Dataset) ReadSample(shard, index int) (*decoding.Sample, error) {
	return d.shards[shard].ReadSample(index)
}
