// Package decode turns WebDataset shards into samples, lightweight records
// and decoded tensors.
//
// The data flow, in the order a rank uses it:
//
//   - [OpenDataset] and [OpenShard] index tar shards (key → member offsets
//     and sizes) with archive/tar and cache the index beside the shard or in
//     a cache directory, so [Shard.ReadSample] fetches a whole sample with
//     one ReadAt.
//   - [ParseRecord] reads a [Record] from the compressed bytes in memory,
//     without decoding: the container of a clip (MP4/MOV and
//     WebM/Matroska, parsed by the module's internal mp4 and webm
//     packages), image headers and text statistics. Every parser of
//     outside bytes is bounded and fuzzed: forged counts return errors,
//     never panics or giant allocations.
//   - The module's internal video package picks the frames a clip
//     contributes, uniformly over its presentation timeline, and turns
//     them into keyframe-aligned decode tasks.
//   - The module's cost model (internal/costmodel) predicts a sample's
//     preparation time from its record, learning online from measured
//     decode times.
//   - [Decoder.Decode] decodes a sample into uint8 tensors, [F,S,S,3] per
//     clip and [S,S,3] per image, with FFmpeg and libjpeg-turbo through cgo.
package decode
