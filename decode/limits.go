package decode

import "github.com/datahelix/datahelix/internal/decoding"

// Limits bound the work and memory one sample may cost, so that a hostile
// or corrupt sample fails alone with a typed error instead of crashing,
// hanging or exhausting the process: the pixels of a video frame
// (MaxPixels) and of an image (MaxImagePixels), the frames decoded per
// sample (MaxFramesDecoded), the wall time per sample (SampleDeadline),
// FFmpeg's probing (MaxProbeSize, MaxAnalyzeDuration), the images of a
// document (MaxImages), the bytes of a sample's text members
// (MaxTextBytes), and the allowed containers and codecs (Formats, Codecs:
// FFmpeg names, comma-separated). Zero fields take the DefaultLimits
// value.
type Limits = decoding.Limits

// DefaultLimits returns limits safe for training data: video up to 4096 x
// 2304 (4K UHD and DCI 4K at 16:9), images up to 8192 x 8192, 65536 frames
// and 60 s per sample, 1 MiB of probing, 64 images per document, 16 MiB
// of text per sample, the containers mov, mp4, matroska and webm and the
// codecs h264, hevc, vp9, vp8 and av1.
func DefaultLimits() Limits { return decoding.DefaultLimits() }
