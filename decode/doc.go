// Package decode turns WebDataset shards into samples and decoded tensors.
//
// The data flow, in the order a rank uses it:
//
//   - [OpenDataset] indexes tar shards (key → member offsets and sizes)
//     with archive/tar and caches the index beside the shard or in a
//     cache directory, so [Dataset.ReadSample] fetches a whole sample with
//     one ReadAt. A [Source] is what a loader reads: a Dataset, or samples
//     a program serves from elsewhere.
//   - [Decoder.Decode] decodes a sample into uint8 tensors, [F,S,S,3] per
//     clip and [S,S,3] per image, with FFmpeg and libjpeg-turbo through
//     cgo. It first reads what the sample holds from the compressed bytes,
//     without decoding: the container of a clip (MP4/MOV and
//     WebM/Matroska), image headers and text statistics. Every parser of
//     outside bytes is bounded and fuzzed: forged counts return errors,
//     never panics or giant allocations. Frames are sampled uniformly over
//     a clip's presentation timeline.
//
// The lightweight records the planner and the cost model read of each
// sample, the cost model and the decoding of a clip task by task are the
// module's own (internal/decoding, internal/costmodel): the loader
// (package spmd) uses them on its samples.
package decode
