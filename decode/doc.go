// Package decode turns WebDataset shards into samples, lightweight records,
// cost estimates and decoded tensors.
//
// The data flow, in the order a rank uses it:
//
//   - [OpenDataset] and [OpenShard] index tar shards (key → member offsets
//     and sizes) with archive/tar and cache the index beside the shard, so
//     [Shard.ReadSample] fetches a whole sample with one ReadAt.
//   - [ParseRecord] reads a [Record] from the compressed bytes in memory,
//     without decoding: container boxes of MP4/MOV ([ParseMP4]) and
//     WebM/Matroska ([ParseWebM]), image headers ([ParseImageHeader]) and
//     text statistics ([ParseText]). Every parser of outside bytes is
//     bounded and fuzzed: forged counts return errors, never panics or
//     giant allocations.
//   - [SampleFrames] picks the frames a clip contributes, uniformly over
//     its presentation timeline, and [PlanVideoTasks] turns them into
//     keyframe-aligned decode tasks, simulating the decoder's seeks.
//   - [CostModel] predicts a sample's preparation time in integer
//     microseconds from its record, learning online from measured decode
//     times; [EvaluateCostModel] measures its held-out error on a dataset
//     (`datahelix costmodel`) and [Inspect] lists records and estimates
//     (`datahelix inspect`).
//
// The decoder itself (FFmpeg and libjpeg-turbo through cgo) lives beside
// these files and consumes the same Sample and Record values.
package decode
