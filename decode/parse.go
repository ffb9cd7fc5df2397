package decode

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
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

// isMetadataExt reports whether a text member is metadata (json, cls)
// rather than a caption or text part.
func isMetadataExt(ext string) bool {
	switch lastComponent(ext) {
	case "json", "cls":
		return true
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
// document: the number that starts its extension ("3.jpg", "12.txt",
// "img_3.jpg" count as positions 3, 12 and 3). ok is false for plain
// extensions like "jpg".
func docPosition(ext string) (pos int, ok bool) {
	i := strings.IndexByte(ext, '.')
	if i <= 0 {
		return 0, false
	}
	head := strings.TrimLeft(ext[:i], "abcdefghijklmnopqrstuvwxyz_")
	n, err := strconv.Atoi(head)
	if err != nil || n < 0 || head == "" {
		return 0, false
	}
	return n, true
}

// ParseRecord builds the lightweight record of a sample from the bytes of
// its members, without decoding:
//
//   - the first video member (mp4, mov, m4v, webm, mkv; parsed by content:
//     EBML files with ParseWebM, others with ParseMP4) gives Video;
//   - every image member (jpg, jpeg, png, webp) gives an entry of Images,
//     ordered by document position ("0.jpg", "1.jpg", ...) and then by
//     member order;
//   - text members add up into Text: the captions and text parts (txt,
//     text, caption) when the sample has any, else its metadata (json,
//     cls) — a LAION-style sample's json beside its caption is metadata,
//     while a sample holding only json is text.
//
// Extensions are matched on their last component, so "0.jpg" and
// "seg.txt" count. The modality is video when there is a video member;
// document when there are images and text and either more than one image
// or any member carrying a document position (an interleaved document);
// image for images alone or with a caption; text for text alone. Members
// of other kinds only count in Bytes. A sample without any recognised
// member is ErrNoPayload; a recognised member that does not parse (or is
// empty) fails the record with the format's error, and text members
// larger than DefaultLimits' MaxTextBytes together fail it with ErrLimit
// before they are read. Every error is a *SampleError naming the shard,
// sample and member.
func ParseRecord(s *Sample) (*Record, error) {
	return ParseRecordLimits(s, Limits{})
}

// ParseRecordLimits is ParseRecord with the text limit of lim
// (MaxTextBytes; zero takes the DefaultLimits value).
func ParseRecordLimits(s *Sample, lim Limits) (*Record, error) {
	if err := checkTextSize(s, lim.withDefaults().MaxTextBytes); err != nil {
		return nil, err
	}
	r := &Record{Shard: s.Shard, Key: s.Key}
	type image struct {
		info ImageInfo
		pos  int
	}
	var images []image
	var captions, metadata *TextInfo
	interleaved := false
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
				err = emptyMember{ErrBadMP4}
				break
			}
			r.Video, err = parseVideo(m.Data)
			if err == nil {
				r.Video.Member = i
			}
		case kindImage:
			if len(m.Data) == 0 {
				err = emptyMember{ErrBadImage}
				break
			}
			var info ImageInfo
			if info, err = ParseImageHeader(m.Data); err == nil {
				info.Member = i
				pos, _ := docPosition(m.Ext)
				images = append(images, image{info, pos})
			}
		case kindText:
			t := ParseText(m.Data, m.Ext)
			sum := &captions
			if isMetadataExt(m.Ext) {
				sum = &metadata
			}
			if *sum == nil {
				*sum = &TextInfo{}
			}
			(*sum).Bytes += t.Bytes
			(*sum).Tokens += t.Tokens
		}
		if err != nil {
			return nil, newSampleError(s, m.Name, err)
		}
	}
	r.Text = captions
	if r.Text == nil {
		r.Text = metadata
	}
	sort.SliceStable(images, func(a, b int) bool { return images[a].pos < images[b].pos })
	for _, im := range images {
		r.Images = append(r.Images, im.info)
	}
	switch {
	case r.Video != nil:
		r.Modality = ModalityVideo
	case len(r.Images) > 0 && r.Text != nil && (len(r.Images) > 1 || interleaved):
		r.Modality = ModalityDocument
	case len(r.Images) > 0:
		r.Modality = ModalityImage
	case r.Text != nil:
		r.Modality = ModalityText
	default:
		if isFileSample(s) {
			what := "the file name has no extension"
			if ext := s.Members[0].Ext; ext != "" {
				what = fmt.Sprintf("extension .%s", ext)
			}
			return nil, newSampleError(s, "", fmt.Errorf("%w: %s; recognised: %s", ErrNoPayload, what, recognisedExts))
		}
		exts := make([]string, len(s.Members))
		for i, m := range s.Members {
			exts[i] = m.Ext
		}
		return nil, newSampleError(s, "", fmt.Errorf("%w: members [%s]; recognised: %s", ErrNoPayload, strings.Join(exts, " "), recognisedExts))
	}
	return r, nil
}

// parseVideo picks the container parser from the bytes: EBML
// (WebM/Matroska) or ISO BMFF (MP4/MOV).
func parseVideo(data []byte) (*VideoInfo, error) {
	if len(data) >= 4 && data[0] == 0x1A && data[1] == 0x45 && data[2] == 0xDF && data[3] == 0xA3 {
		return ParseWebM(data)
	}
	return ParseMP4(data)
}

// emptyMember is the error of a 0-byte video or image member; it matches
// its format's error (ErrBadMP4, ErrBadImage).
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
