package decode

import "path/filepath"

// Source is what a loader reads samples from: shards of samples in an
// order every rank sees alike. *Dataset (WebDataset tar shards) is one;
// a program that embeds the loader can serve samples from elsewhere (an
// object store, a database) by implementing it.
type Source interface {
	// NumShards is the number of shards.
	NumShards() int
	// ShardName names shard i in messages and in the dataset's identity
	// (its file name: nodes may keep copies in different directories).
	ShardName(i int) string
	// ShardLen is the number of samples in shard i.
	ShardLen(i int) int
	// ReadSample reads sample index of shard i: its members' bytes.
	ReadSample(shard, index int) (*Sample, error)
}

// NumShards is the number of shards.
func (d *Dataset) NumShards() int { return len(d.Shards) }

// ShardName is shard i's file name.
func (d *Dataset) ShardName(i int) string { return filepath.Base(d.Shards[i].Path()) }

// ShardLen is the number of samples in shard i.
func (d *Dataset) ShardLen(i int) int { return d.Shards[i].Len() }

// ReadSample reads sample index of shard i.
func (d *Dataset) ReadSample(shard, index int) (*Sample, error) {
	return d.Shards[shard].ReadSample(index)
}
