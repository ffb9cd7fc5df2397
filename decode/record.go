package decode

import (
	"github.com/datahelix/datahelix/internal/decoding"
	"github.com/datahelix/datahelix/internal/video"
)

// Modality is the kind of content a sample carries; it selects the cost
// model and the decoder. Its String method gives the lower-case name used
// in tables, JSON and flags: "text", "image", "video", "document",
// "audio" (a sample of sound alone, read with Options.AudioRate; it has
// no constant here) or "unknown".
type Modality = decoding.Modality

// The modalities a sample can have. A document interleaves text and images.
const (
	ModalityUnknown  = decoding.ModalityUnknown
	ModalityText     = decoding.ModalityText
	ModalityImage    = decoding.ModalityImage
	ModalityVideo    = decoding.ModalityVideo
	ModalityDocument = decoding.ModalityDocument
)

// Member is one file of a WebDataset sample, such as "000123.mp4": its
// Name inside the tar ("clips/000123.mp4"), its Ext (everything after the
// key's first dot, lower case: "mp4", "0.jpg", "json") and its Data.
type Member = decoding.Member

// Sample is one WebDataset sample: the members of a shard that share a
// key. Shard is the path of the shard it came from, Key its WebDataset
// key ("clips/000123").
type Sample = decoding.Sample

// VideoInfo holds the cost features of a clip, read from its container
// without decoding: codec, dimensions, rotation, timing, per-frame sizes
// and keyframes (see the fields of video.Track). Its FrameTime and Turn
// give a frame's presentation time and the turn that shows it upright.
type VideoInfo = video.Track

// ImageInfo holds the cost features of one image, read from its header:
// Format ("jpeg", "png", "webp"), Width, Height, Bytes, Progressive (a
// progressive JPEG), Subsampling (a JPEG's chroma subsampling: "444",
// "422", "420", "440", "411", "gray"; "" otherwise) and Member, the
// index in Sample.Members of the image member.
type ImageInfo = decoding.ImageInfo

// TextInfo holds the cost features of a text payload: its Bytes and
// estimated Tokens.
type TextInfo = decoding.TextInfo

// Record is the lightweight description of a sample built from its
// compressed bytes without decoding: what the planner and the cost model
// need to know. It holds the sample's Shard and Key, its Modality, the
// compressed Bytes of all its members, and the Video, Images and Text
// its modality has, and its Audio (codec, rate, channels, start and
// duration from the container header, and the member holding it) when
// read with audio output on.
type Record = decoding.Record

// ParseRecord builds the lightweight record of a sample from the bytes of
// its members, without decoding:
//
//   - the first video member (mp4, mov, m4v, webm, mkv; parsed by content:
//     EBML files with webm.Parse, others with mp4.Parse) gives Video;
//   - every image member (jpg, jpeg, png, webp) gives an entry of Images,
//     ordered by document position ("0.jpg", "1.jpg", ...) and then by
//     member order;
//   - Text adds up the sample's captions and text parts (txt, text,
//     caption; not "metadata.txt") and the "texts" or "text_list" strings
//     of a JSON document (OBELICS and MINT-1T keep a document's text
//     there, with its images in members "N.jpg" at the same positions,
//     MMC4 in "text_list"). Other json and cls members are metadata, such
//     as img2dataset's and video2dataset's json beside a picture: they are
//     the Text of a sample with neither picture nor caption (a sample
//     holding only json is text), and no other's.
//
// Extensions are matched on their last component, so "0.jpg" and
// "seg.txt" count. The modality is video when there is a video member;
// document when there are images and text and either more than one image,
// any member carrying a document position (an interleaved document) or a
// JSON document; image for images alone or with a caption; text for text
// alone. Members of other kinds only count in Bytes.
//
// A sample without any recognised member is ErrNoPayload; a recognised
// member that does not parse (or is empty) fails the record with the
// format's error, and text members larger than DefaultLimits'
// MaxTextBytes together fail it with ErrLimit before they are read. A
// sample that would otherwise lose part of what it means fails with
// ErrUnsupported: without a clip, an image or video member of a format
// datahelix does not read (gif, tiff, bmp, avif, heic, avi, flv, ...),
// audio (m4a, mp3, wav, ...) with no picture beside it, or images
// embedded in JSON (MMC4's "image_base64") with no image member; beside
// a clip, other media are ignored as thumbnails and audio tracks, and
// audio beside an image as a clip's audio track is. So does a text member
// in UTF-16 or UTF-32 (by its byte order mark: PowerShell 5 writes
// UTF-16), whose bytes as UTF-8 are garbage, and a clip of a codec
// decoding refuses (MPEG-4 Part 2, MJPEG, ...: outside DefaultLimits'
// Codecs). A sample decoding would refuse over a safety limit the record
// shows fails with ErrLimit: a clip or an image of more pixels than
// DefaultLimits allows, a document of more images. Every error is a
// *SampleError naming the shard, sample and member.
func ParseRecord(s *Sample) (*Record, error) {
	return decoding.ParseRecord(s, Limits{})
}
