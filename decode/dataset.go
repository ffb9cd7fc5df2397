package decode

import (
	"github.com/datahelix/datahelix/internal/shard"
	"github.com/datahelix/datahelix/internal/shardindex"
)

// Errors of opening a dataset and reading its samples.
var (
	// ErrNoShards reports a dataset path or glob that names no shard.
	ErrNoShards = shardindex.ErrNoShards
	// ErrCorruptShard reports a shard that is not a readable tar archive:
	// a bad header, a member running past the end of the file, or a
	// missing end-of-archive marker.
	ErrCorruptShard = shardindex.ErrCorruptShard
	// ErrCompressedShard reports a shard that is a compressed tar archive
	// (gzip, zstd, xz or bzip2), found by its name when listing a dataset
	// directory or by its first bytes when indexing it. Shards must be
	// uncompressed tar files: samples are read by random access.
	ErrCompressedShard = shardindex.ErrCompressedShard
	// ErrSampleTooLarge reports a sample whose members span more than
	// 1 GiB of its shard: a forged or absurd member size fails instead of
	// being allocated.
	ErrSampleTooLarge = shard.ErrSampleTooLarge
)

// ShardError is a problem with one shard file at one byte offset: its
// Path, Offset and Reason. It unwraps to ErrCorruptShard and to the
// underlying cause, if any.
type ShardError = shardindex.ShardError

// Dataset is an ordered set of WebDataset tar shards, each indexed (key →
// member offsets and sizes) and its index cached, so that ReadSample
// fetches a whole sample with one read: a Source. Its methods are safe
// for concurrent use: NumShards, ShardName (a shard's file name),
// ShardLen and ReadSample (the Source methods), Len (the samples of all
// shards), String (the path or glob it was opened from) and Close. The
// process keeps a bounded number of shards' files and indexes loaded,
// letting go of the least recently read, so that a dataset of many
// thousand shards runs it out of neither file descriptors nor memory.
type Dataset = shard.Dataset

// OpenDataset opens the shards named by pathOrGlob: a directory (every
// *.tar file directly inside it), a glob pattern, or one tar file. Shards
// are sorted by path so that every rank sees the same order. A missing
// path, a pattern matching nothing or a directory without shards is an
// error wrapping ErrNoShards. A shard that cannot be opened (unreadable,
// corrupt, truncated) fails the whole open, with its error (a
// *ShardError for a corrupt one); when several cannot, the error names
// the first 5 of them in shard order, counts the rest and wraps them all,
// so that one run tells what to mend. A glob leaves out datahelix's index
// cache files (*.dhidx). Compressed tar files (*.tar.gz, *.tgz,
// *.tar.zst, ...) in a directory are an error wrapping ErrCompressedShard
// rather than being skipped.
//
// Each shard's index is loaded from its cache when the cache matches the
// shard's size and modification time, and otherwise built by reading the
// tar headers and saved to the cache: beside the shard (path + ".dhidx")
// when cacheDir is empty, else in cacheDir. Failing to write the cache is
// not an error (the shard may sit on a read-only file system): the index
// is then kept in memory.
func OpenDataset(pathOrGlob string, cacheDir string) (*Dataset, error) {
	return shard.OpenDataset(pathOrGlob, cacheDir, 0, 1)
}

// OpenDatasetPart opens the dataset as OpenDataset does, with the same
// result, but indexes its shards starting with the part-th of parts
// equal runs of them and going on in order, wrapping around. Ranks that
// open one dataset at the same time pass their rank and the rank count:
// on a cold index cache each then builds the indexes of its own run
// first and finds most of the others' in the cache when it gets there,
// instead of every rank building every index (and reading every shard's
// headers) at once.
func OpenDatasetPart(pathOrGlob string, cacheDir string, part, parts int) (*Dataset, error) {
	return shard.OpenDataset(pathOrGlob, cacheDir, part, parts)
}
