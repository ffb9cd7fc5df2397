package decode

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
}

// VideoInfo holds the cost features of a clip, read from its container
// without decoding.
type VideoInfo struct {
	Container string // "mp4", "mov", "webm" or "matroska"
	Codec     string // FFmpeg codec name: "h264", "hevc", "av1", "vp9", "vp8"
	Width     int
	Height    int
	// Rotation is the rotation of the track's display matrix (MP4/MOV:
	// tkhd times mvhd; Matroska: the one FFmpeg makes of a Projection) in
	// degrees counterclockwise, -180 to 180, as av_display_rotation_get
	// reads it (ffprobe prints it truncated to an integer); 0 when there
	// is none. Turn gives the turn that shows the clip upright.
	Rotation  float64
	Timescale uint32 // ticks per second of Duration and FramePTS
	Duration  int64  // in Timescale ticks
	Frames    int    // frames in the track (estimated when FrameCountEstimated)
	// FrameCountEstimated is true when Frames was derived from duration and
	// frame rate instead of counted; per-frame slices are then nil.
	FrameCountEstimated bool
	// FrameBytes is the compressed size of each frame in decode order.
	FrameBytes []uint32
	// FramePTS is each frame's presentation time in Timescale ticks, in
	// decode order, edit lists applied so that it matches the timestamps
	// FFmpeg reports for the same stream.
	FramePTS []int64
	// Keyframes lists the decode-order indices of sync frames, ascending.
	// When the container does not say which frames are sync frames it
	// holds only frame 0: decoding must start at the beginning.
	Keyframes []int
	// Discarded lists, ascending, the decode-order indices of frames
	// FFmpeg does not show at a time of their own: those an MP4 edit list
	// hides (AVINDEX_DISCARD_FRAME; ffprobe flags their packets D), such
	// as the pre-roll of a cut and a P-frame past an edit's end that
	// B-frames before the end refer to, and the Matroska frames FFmpeg's
	// demuxer leaves without a timestamp (laced without a duration, or in
	// a block timed before 0). SampleFrames never picks them. FFmpeg 5.1
	// decodes them without output, except the untimed Matroska frames it
	// can decode, and AV1 frames (its libdav1d decoder ignores the
	// discard flag).
	Discarded []int
	// Bytes is the compressed size of the track's frames (the sum of
	// FrameBytes when those are known).
	Bytes int64
	// Member is the index in Sample.Members of the video member (set by
	// ParseRecord).
	Member int
}

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
}
