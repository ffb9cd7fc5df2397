package decode

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
