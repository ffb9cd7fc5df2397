// Package decoding is the machinery behind the public decode package:
// samples and their lightweight records (ParseRecord, with the container,
// image-header and text parsers and their fuzzers), the safety limits and
// the error kinds, and decoding into tensors with FFmpeg (internal/av)
// and libjpeg-turbo (internal/tjpeg). decode shows what a program
// embedding the loader needs of it, as aliases and a thin Decoder.
//
// The rest is the module's own: decoding one task of a split clip
// (Decoder.DecodeVideoTask) and the text of such a clip (SampleText),
// records under a loader's limits (ParseRecord's lim), the frame and
// pixel hashes of `datahelix decode --md5` (SampleMD5s), and plain media
// files given alone as one-member samples (FileSample, IsMediaFile,
// ExpandMediaGlob).
package decoding
