package decoding

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/datahelix/datahelix/internal/mp4"
	"github.com/datahelix/datahelix/internal/webm"
)

// ErrNoPayload reports a sample none of whose members is a recognised
// video, image or text payload.
var ErrNoPayload = errors.New("decode: no recognised payload")

// Member kinds, from the last component of a member's extension.
const (
	kindOther = iota
	kindVideo
	kindImage
	kindText
)

// memberKind classifies an extension such as "mp4", "0.jpg" or "seg.txt"
// by its last dot-separated component.
func memberKind(ext string) int {
	switch lastComponent(ext) {
	case "mp4", "mov", "m4v", "webm", "mkv":
		return kindVideo
	case "jpg", "jpeg", "png", "webp":
		return kindImage
	case "txt", "text", "json", "caption", "cls":
		return kindText
	}
	return kindOther
}

// recognisedExts lists the extensions memberKind recognises, by kind,
// for errors about samples with none of them.
const recognisedExts = "video mp4 mov m4v webm mkv, image jpg jpeg png webp, text txt text json caption cls"

// unreadMedia returns what a member holds when its extension names media
// datahelix does not decode — "audio", "image" or "video" — and "" for
// any other extension. Such a member is refused where dropping it would
// change what the sample means (see ParseRecord), not skipped like
// members of unknown kinds.
func unreadMedia(ext string) string {
	switch lastComponent(ext) {
	case "m4a", "mp3", "wav", "flac", "ogg", "oga", "opus", "aac", "weba":
		return "audio"
	case "gif", "tif", "tiff", "bmp", "avif", "heic", "heif", "jxl", "jp2":
		return "image"
	case "avi", "flv", "wmv", "mpg", "mpeg", "3gp", "ogv":
		return "video"
	}
	return ""
}

// isMetadataExt reports whether a text member is metadata rather than a
// caption or text part: json and cls members, and text members named as
// metadata ("metadata.txt", the member list of a Hugging Face M4 web
// document).
func isMetadataExt(ext string) bool {
	switch lastComponent(ext) {
	case "json", "cls":
		return true
	}
	if i := strings.LastIndexByte(ext, '.'); i >= 0 {
		for c := range strings.SplitSeq(ext[:i], ".") {
			if c == "metadata" {
				return true
			}
		}
	}
	return false
}

func lastComponent(ext string) string {
	if i := strings.LastIndexByte(ext, '.'); i >= 0 {
		return ext[i+1:]
	}
	return ext
}

// docPosition returns the position of a member in an interleaved
// document: the number that starts its extension, alone, after a
// lower-case name and an underscore, or after a name that says position
// ("3.jpg", "12.txt", "0.text.txt", "img_3.jpg", "image3.jpg",
// "page2.txt" count as positions 3, 12, 0, 3, 3 and 2). ok is false for
// plain extensions like "jpg" and for other names that end in a digit,
// such as the captioning models of "blip2.txt" or "qwen2.txt".
func docPosition(ext string) (pos int, ok bool) {
	head, _, found := strings.Cut(ext, ".")
	if !found {
		return 0, false
	}
	name := strings.TrimRight(head, "0123456789")
	if name == head {
		return 0, false
	}
	switch name {
	case "", "img", "image", "text", "txt", "page", "part", "seg", "segment":
	default:
		if !strings.HasSuffix(name, "_") || strings.Trim(name, "abcdefghijklmnopqrstuvwxyz_") != "" {
			return 0, false
		}
	}
	n, err := strconv.Atoi(head[len(name):])
	if err != nil {
		return 0, false // beyond int
	}
	return n, true
}

// ParseRecord builds the lightweight record of a sample from the bytes
// of its members, without decoding, under the limits of lim
// (MaxTextBytes, MaxPixels, MaxImagePixels, MaxImages and Codecs; zero
// fields take the DefaultLimits value): what the planner and the cost
// model need to know of a sample.
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
// format's error, and text members larger than lim's MaxTextBytes
// together fail it with ErrLimit before they are read. A sample that would otherwise lose part of what it means fails with
// ErrUnsupported: without a clip, an image or video member of a format
// datahelix does not read (gif, tiff, bmp, avif, heic, avi, flv, ...),
// audio (m4a, mp3, wav, ...) with no picture beside it, or images
// embedded in JSON (MMC4's "image_base64") with no image member; beside
// a clip, other media are ignored as thumbnails and audio tracks, and
// audio beside an image as a clip's audio track is. So does a text member
// in UTF-16 or UTF-32 (by its byte order mark: PowerShell 5 writes
// UTF-16), whose bytes as UTF-8 are garbage, and a clip of a codec
// decoding refuses (MPEG-4 Part 2, MJPEG, ...: outside lim's
// Codecs). A sample decoding would refuse over a safety limit the record
// shows fails with ErrLimit: a clip or an image of more pixels than
// lim allows, a document of more images. Every error is a
// *SampleError naming the shard, sample and member.
func ParseRecord(s *Sample, lim Limits) (*Record, error) {
	return parseRecord(s, lim.withDefaults(), false)
}

// ParseRecordFor builds the record of a sample as a decoder with opts
// reads it: ParseRecord under opts.Limits, and with audio output on
// (opts.AudioRate) the sample's audio too (Record.Audio: the clip's
// audio track, else its first audio member, from the container header),
// and samples of sound alone are audio samples (ModalityAudio) rather
// than refused: an audio member (m4a, mp3, wav, flac, ogg, opus, ...)
// with no picture beside it, or a clip member with only an audio track.
func ParseRecordFor(s *Sample, opts Options) (*Record, error) {
	return parseRecord(s, opts.Limits.withDefaults(), opts.AudioRate > 0)
}

// parseRecord is ParseRecord, reading the sample's audio when audio is
// set (ParseRecordFor). lim must have its defaults filled in.
func parseRecord(s *Sample, lim Limits, audio bool) (*Record, error) {
	if err := checkTextSize(s, lim.MaxTextBytes); err != nil {
		return nil, err
	}
	r := &Record{Shard: s.Shard, Key: s.Key, Epoch: s.Epoch}
	type image struct {
		info ImageInfo
		pos  int
	}
	var images []image
	var captions, metadata *TextInfo
	add := func(sum **TextInfo, bytes, tokens int) {
		if *sum == nil {
			*sum = &TextInfo{}
		}
		(*sum).Bytes += bytes
		(*sum).Tokens += tokens
	}
	interleaved, jsonDoc := false, false
	unreadPicture, audioMember, embedded := -1, -1, -1 // members refused unless a clip or picture makes them extras
	embeddedHow := ""
	for i, m := range s.Members {
		r.Bytes += int64(len(m.Data))
		kind := memberKind(m.Ext)
		if _, ok := docPosition(m.Ext); ok && kind != kindOther {
			interleaved = true
		}
		var err error
		switch kind {
		case kindVideo:
			if r.Video != nil {
				continue // only the first clip counts
			}
			if len(m.Data) == 0 {
				err = emptyMember{mp4.ErrFormat}
				break
			}
			r.Video, err = parseVideo(m.Data)
			if err == nil {
				r.Video.Member = i
			} else if audio && audioOnlyClip(&s.Members[i], i, lim) {
				// A clip of sound alone: an audio member.
				r.Video, err = nil, nil
				if audioMember < 0 {
					audioMember = i
				}
			}
		case kindImage:
			if len(m.Data) == 0 {
				err = emptyMember{ErrBadImage}
				break
			}
			var info ImageInfo
			if info, err = parseImageHeader(m.Data); err == nil {
				info.Member = i
				pos, _ := docPosition(m.Ext)
				images = append(images, image{info, pos})
			}
		case kindText:
			if enc := wideBOM(m.Data); enc != "" {
				err = fmt.Errorf("%w: %s text (it starts with that byte order mark), which reads as garbage and NUL bytes in UTF-8: re-encode it as UTF-8, e.g. with iconv -f %s -t UTF-8", ErrUnsupported, enc, enc[:6])
				break
			}
			switch {
			case isJSONExt(m.Ext):
				j, ok := scanJSON(m.Data)
				switch {
				case !ok:
					add(&metadata, len(m.Data), estimateTokens(m.Data))
				case j.doc:
					add(&captions, j.docBytes, j.docTokens)
					jsonDoc = true
				default:
					add(&metadata, len(m.Data), j.tokens)
				}
				if ok && j.embedded != "" && embedded < 0 {
					embedded, embeddedHow = i, j.embedded
				}
			case isMetadataExt(m.Ext):
				t := parseText(m.Data, m.Ext)
				add(&metadata, t.Bytes, t.Tokens)
			default:
				t := parseText(m.Data, m.Ext)
				add(&captions, t.Bytes, t.Tokens)
			}
		default:
			switch unreadMedia(m.Ext) {
			case "audio":
				if audioMember < 0 {
					audioMember = i
				}
			case "image", "video":
				if unreadPicture < 0 {
					unreadPicture = i
				}
			}
		}
		if err != nil {
			return nil, newSampleError(s, m.Name, err)
		}
	}
	if audio && (r.Video != nil || len(images) == 0) {
		clip := -1
		if r.Video != nil {
			clip = r.Video.Member
		}
		var err error
		if r.Audio, err = recordAudio(s, clip, audioMember, lim); err != nil {
			return nil, err
		}
	}
	if r.Video == nil && (len(images) > 0 || captions != nil || metadata != nil) {
		refused := audioMember
		if r.Audio != nil {
			refused = -1 // decoded as an audio sample
		}
		if err := refuseUnread(s, unreadPicture, refused, embedded, embeddedHow, len(images) > 0); err != nil {
			return nil, err
		}
	}
	r.Text = captions
	if r.Text == nil && r.Video == nil && len(images) == 0 {
		r.Text = metadata
	}
	sort.SliceStable(images, func(a, b int) bool { return images[a].pos < images[b].pos })
	for _, im := range images {
		r.Images = append(r.Images, im.info)
	}
	switch {
	case r.Video != nil:
		r.Modality = ModalityVideo
	case r.Audio != nil:
		r.Modality = ModalityAudio
	case len(r.Images) > 0 && r.Text != nil && (len(r.Images) > 1 || interleaved || jsonDoc):
		r.Modality = ModalityDocument
	case len(r.Images) > 0:
		r.Modality = ModalityImage
	case r.Text != nil:
		r.Modality = ModalityText
	default:
		recognised := recognisedExts
		if audioMember >= 0 {
			recognised += "; audio only with audio output on (--audio-rate, Options.AudioRate)"
		}
		if isFileSample(s) {
			what := "the file name has no extension"
			if ext := s.Members[0].Ext; ext != "" {
				what = fmt.Sprintf("extension .%s", ext)
			}
			return nil, newSampleError(s, "", fmt.Errorf("%w: %s; recognised: %s", ErrNoPayload, what, recognised))
		}
		exts := make([]string, len(s.Members))
		for i, m := range s.Members {
			exts[i] = m.Ext
		}
		return nil, newSampleError(s, "", fmt.Errorf("%w: members [%s]; recognised: %s", ErrNoPayload, strings.Join(exts, " "), recognised))
	}
	if err := checkRecordLimits(s, r, lim); err != nil {
		return nil, err
	}
	return r, nil
}

// refuseUnread fails a sample without a clip that holds media it would
// train without: the member index unreadPicture (an image or video of a
// format datahelix does not read), audio (when the sample has no image:
// its text would train alone) or embedded (a JSON member holding images
// as how says, when the sample has no image member); -1 for none.
func refuseUnread(s *Sample, unreadPicture, audio, embedded int, how string, hasImages bool) error {
	switch {
	case unreadPicture >= 0:
		m := s.Members[unreadPicture]
		return newSampleError(s, m.Name, fmt.Errorf("%w: .%s %s; datahelix reads images jpg, jpeg, png, webp and video mp4, mov, m4v, webm, mkv: convert it, rather than train on the sample without it",
			ErrUnsupported, lastComponent(m.Ext), unreadMedia(m.Ext)))
	case audio >= 0 && !hasImages:
		m := s.Members[audio]
		return newSampleError(s, m.Name, fmt.Errorf("%w: .%s audio with no video or image beside it: audio output is off (--audio-rate, Options.AudioRate), and the sample would train on its text alone",
			ErrUnsupported, lastComponent(m.Ext)))
	case embedded >= 0 && !hasImages:
		return newSampleError(s, s.Members[embedded].Name, fmt.Errorf("%w: images embedded in JSON (%s) are not decoded: store them as members KEY.N.jpg (N: the position in the document) beside the JSON",
			ErrUnsupported, how))
	}
	return nil
}

// parseVideo picks the container parser from the bytes: EBML
// (WebM/Matroska) or ISO BMFF (MP4/MOV).
func parseVideo(data []byte) (*VideoInfo, error) {
	if len(data) >= 4 && data[0] == 0x1A && data[1] == 0x45 && data[2] == 0xDF && data[3] == 0xA3 {
		return webm.Parse(data)
	}
	return mp4.Parse(data)
}

// emptyMember is the error of a 0-byte video or image member; it matches
// its format's error (mp4.ErrFormat, ErrBadImage).
type emptyMember struct{ format error }

func (e emptyMember) Error() string { return "empty (0 bytes)" }

func (e emptyMember) Unwrap() error { return e.format }

// checkTextSize fails sample s with ErrLimit when its text members (txt,
// text, caption, json, cls) hold more than max bytes together, naming
// the member that crosses the limit, before any of them is read.
func checkTextSize(s *Sample, max int64) error {
	var total int64
	for _, m := range s.Members {
		if memberKind(m.Ext) != kindText {
			continue
		}
		n := int64(len(m.Data))
		total += n
		switch {
		case n > max:
			return newSampleError(s, m.Name, fmt.Errorf("%w: text of %d bytes, limit %d (MaxTextBytes)", ErrLimit, n, max))
		case total > max:
			return newSampleError(s, m.Name, fmt.Errorf("%w: the sample's text members reach %d bytes here, limit %d (MaxTextBytes)", ErrLimit, total, max))
		}
	}
	return nil
}
