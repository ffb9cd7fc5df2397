package decoding

import "github.com/datahelix/datahelix/internal/video"

// Modality is the kind of content a sample carries; it selects the cost
// model and the decoder.
type Modality uint8

// The modalities a sample can have. A document interleaves text and images.
const (
	ModalityUnknown Modality = iota
	ModalityText
	ModalityImage
	ModalityVideo
	ModalityDocument
	// ModalityAudio is a sample of sound alone (an audio file, or an
	// MP4 or WebM with only an audio track), read only with audio
	// output on (Options.AudioRate).
	ModalityAudio
)

// String returns the lower-case name used in tables, JSON and flags.
func (m Modality) String() string {
	switch m {
	case ModalityText:
		return "text"
	case ModalityImage:
		return "image"
	case ModalityVideo:
		return "video"
	case ModalityDocument:
		return "document"
	case ModalityAudio:
		return "audio"
	}
	return "unknown"
}

// Member is one file of a WebDataset sample, such as "000123.mp4".
type Member struct {
	Name string // full member name inside the tar, e.g. "clips/000123.mp4"
	Ext  string // everything after the key's first dot, lower case: "mp4", "jpg", "0.jpg", "json"
	Data []byte
}

// Sample is one WebDataset sample: the members of a shard that share a key.
type Sample struct {
	Shard   string // path of the shard the sample came from
	Key     string // WebDataset key, e.g. "clips/000123"
	Members []Member
	// Epoch is the epoch the sample was handed out in, which with the
	// job's seed and Key seeds its random transforms (Options.Transform);
	// the reader sets it and the exchange carries it, so every rank
	// decodes a sample alike.
	Epoch int
}

// VideoInfo holds the cost features of a clip, read from its container
// without decoding: codec, dimensions, rotation, timing, per-frame sizes
// and keyframes (see the fields of video.Track). Its FrameTime and Turn
// give a frame's presentation time and the turn that shows it upright.
type VideoInfo = video.Track

// ImageInfo holds the cost features of one image, read from its header.
type ImageInfo struct {
	Format      string // "jpeg", "png", "webp"
	Width       int
	Height      int
	Bytes       int
	Progressive bool   // JPEG progressive scan
	Subsampling string // JPEG chroma subsampling: "444", "422", "420", "440", "411", "gray"; "" otherwise
	Member      int    // index in Sample.Members of the image member (set by ParseRecord)
}

// TextInfo holds the cost features of a text payload.
type TextInfo struct {
	Bytes  int
	Tokens int // estimated token count
}

// Record is the lightweight description of a sample built from its
// compressed bytes without decoding: what the planner and the cost model
// need to know.
type Record struct {
	Shard    string
	Key      string
	Modality Modality
	Bytes    int64 // compressed bytes of all members
	Video    *VideoInfo
	Images   []ImageInfo
	Text     *TextInfo
	// Epoch is the sample's (Sample.Epoch), for the cost of a transform
	// drawn per epoch (a segment's start); not a feature of its bytes, so
	// not printed.
	Epoch int `json:"-"`
	// Audio is the sample's audio, read only with audio output on
	// (ParseRecordFor with Options.AudioRate): the clip's audio track,
	// else the sample's first audio member; nil when it has neither.
	Audio *AudioInfo
}
