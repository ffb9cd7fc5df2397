package decode

import "github.com/datahelix/datahelix/internal/decoding"

// Modality is the kind of content a sample carries; it selects the cost
// model and the decoder. Its String method gives the lower-case name used
// in tables, JSON and flags: "text", "image", "video", "document",
// "audio" (sound alone, read with Options.AudioRate) or "unknown".
type Modality = decoding.Modality

// The modalities a sample can have. A document interleaves text and
// images; an audio sample is read only with Options.AudioRate set.
const (
	ModalityUnknown  = decoding.ModalityUnknown
	ModalityText     = decoding.ModalityText
	ModalityImage    = decoding.ModalityImage
	ModalityVideo    = decoding.ModalityVideo
	ModalityDocument = decoding.ModalityDocument
	ModalityAudio    = decoding.ModalityAudio
)

// Member is one file of a WebDataset sample, such as "000123.mp4": its
// Name inside the tar ("clips/000123.mp4"), its Ext (everything after the
// key's first dot, lower case: "mp4", "0.jpg", "json") and its Data.
type Member = decoding.Member

// Sample is one WebDataset sample: the members of a shard that share a
// key. Shard is the path of the shard it came from, Key its WebDataset
// key ("clips/000123").
type Sample = decoding.Sample
