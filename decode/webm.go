package decode

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// ErrBadWebM reports a WebM/Matroska file whose EBML structure cannot be
// read, or that has no video track.
var ErrBadWebM = errors.New("decode: invalid WebM/Matroska")

// Matroska element IDs (with their length markers, as written).
const (
	ebmlHeaderID      = 0x1A45DFA3
	ebmlDocTypeID     = 0x4282
	mkvSegmentID      = 0x18538067
	mkvInfoID         = 0x1549A966
	mkvTimecodeScale  = 0x2AD7B1
	mkvDurationID     = 0x4489
	mkvTracksID       = 0x1654AE6B
	mkvTrackEntryID   = 0xAE
	mkvTrackNumberID  = 0xD7
	mkvTrackTypeID    = 0x83
	mkvCodecID        = 0x86
	mkvDefaultDurID   = 0x23E383
	mkvVideoID        = 0xE0
	mkvPixelWidthID   = 0xB0
	mkvPixelHeightID  = 0xBA
	mkvClusterID      = 0x1F43B675
	mkvClusterTimeID  = 0xE7
	mkvSimpleBlockID  = 0xA3
	mkvBlockGroupID   = 0xA0
	mkvBlockID        = 0xA1
	mkvReferenceBlock = 0xFB
	mkvCuesID         = 0x1C53BB6B
	mkvSeekHeadID     = 0x114D9B74
	mkvChaptersID     = 0x1043A770
	mkvTagsID         = 0x1254C367
	mkvAttachmentsID  = 0x1941A469
	mkvTrackTypeVideo = 1
	unknownSize       = -1
)

// elemNames are the Matroska elements a message names, by ID.
var elemNames = map[uint32]string{
	ebmlHeaderID: "EBML header", mkvSegmentID: "Segment", mkvInfoID: "Info", mkvTracksID: "Tracks",
	mkvTrackEntryID: "TrackEntry", mkvVideoID: "Video", mkvClusterID: "Cluster", mkvSimpleBlockID: "SimpleBlock",
	mkvBlockGroupID: "BlockGroup", mkvBlockID: "Block", mkvCuesID: "Cues", mkvSeekHeadID: "SeekHead",
	mkvChaptersID: "Chapters", mkvTagsID: "Tags", mkvAttachmentsID: "Attachments",
}

// elemName names element id for a message: "Cluster (0x1F43B675)", or
// "element 0x4D80" for one without a name here.
func elemName(id uint32) string {
	if n, ok := elemNames[id]; ok {
		return fmt.Sprintf("%s (0x%X)", n, id)
	}
	return fmt.Sprintf("element 0x%X", id)
}

// ebmlElem reads one element header at the start of b: its ID (up to 4
// bytes, marker kept), its data size (unknownSize for the reserved
// all-ones value) and the header length.
func ebmlElem(b []byte) (id uint32, size int64, hdr int, ok bool) {
	if len(b) == 0 || b[0] == 0 {
		return 0, 0, 0, false
	}
	idLen := 1
	for b[0]&(0x80>>(idLen-1)) == 0 {
		idLen++
	}
	if idLen > 4 || len(b) < idLen {
		return 0, 0, 0, false
	}
	for _, c := range b[:idLen] {
		id = id<<8 | uint32(c)
	}
	v, n, ok := ebmlVint(b[idLen:])
	if !ok {
		return 0, 0, 0, false
	}
	if v == 1<<(7*n)-1 {
		return id, unknownSize, idLen + n, true
	}
	if v > math.MaxInt64/2 {
		return 0, 0, 0, false
	}
	return id, int64(v), idLen + n, true
}

// ebmlVint reads a variable-length integer with its length marker removed.
func ebmlVint(b []byte) (v uint64, n int, ok bool) {
	if len(b) == 0 || b[0] == 0 {
		return 0, 0, false
	}
	n = 1
	for b[0]&(0x80>>(n-1)) == 0 {
		n++
	}
	if len(b) < n {
		return 0, 0, false
	}
	v = uint64(b[0] & (0xff >> n))
	for _, c := range b[1:n] {
		v = v<<8 | uint64(c)
	}
	return v, n, true
}

// ebmlUint reads an unsigned integer element body of up to 8 bytes.
func ebmlUint(b []byte) uint64 {
	var v uint64
	for _, c := range b[:min(len(b), 8)] {
		v = v<<8 | uint64(c)
	}
	return v
}

// ebmlFloat reads a 4- or 8-byte float element body; other sizes and
// non-finite values give 0.
func ebmlFloat(b []byte) float64 {
	var f float64
	switch len(b) {
	case 4:
		f = float64(math.Float32frombits(binary.BigEndian.Uint32(b)))
	case 8:
		f = math.Float64frombits(binary.BigEndian.Uint64(b))
	}
	if math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
		return 0
	}
	return f
}

// ebmlIter walks the elements packed in b. Elements of unknown size are
// returned with the rest of b as their body; the caller reports how much
// of it it used with skipTo.
type ebmlIter struct {
	b   []byte
	off int // offset of b[0] in the file
	err error
}

func (it *ebmlIter) next() (id uint32, body []byte, unknown, ok bool) {
	if len(it.b) == 0 || it.err != nil {
		return 0, nil, false, false
	}
	id, size, hdr, ok := ebmlElem(it.b)
	if !ok {
		it.err = fmt.Errorf("%w: bad element header at offset %d", ErrBadWebM, it.off)
		return 0, nil, false, false
	}
	if size == unknownSize {
		body = it.b[hdr:]
		it.b, it.off = nil, it.off+len(it.b)
		return id, body, true, true
	}
	if size > int64(len(it.b)-hdr) {
		it.err = fmt.Errorf("%w: %s of %d bytes runs past its parent at offset %d (truncated?)", ErrBadWebM, elemName(id), size, it.off)
		return 0, nil, false, false
	}
	end := hdr + int(size)
	body = it.b[hdr:end:end]
	it.b, it.off = it.b[end:], it.off+end
	return id, body, false, true
}

// mkvTrack is the video track description from Tracks.
type mkvTrack struct {
	number          uint64
	codec           string
	width, height   int
	defaultDuration uint64 // ns per frame, 0 when absent
}

// ParseWebM reads the cost features of the first video track of a
// WebM/Matroska file held in memory: codec and dimensions from Tracks,
// duration from Info, and one frame per video block of the clusters
// (SimpleBlocks and BlockGroups, laced frames counted), with keyframes
// from the SimpleBlock flags or the absence of ReferenceBlock. FramePTS are
// the block timestamps in the file's timecode scale, which FFmpeg also
// uses (Timescale 1000 for the usual 1 ms scale). A file without clusters
// gets an estimated frame count from its duration and the track's default
// frame duration. A truncated last cluster is read as far as it goes.
func ParseWebM(data []byte) (*VideoInfo, error) {
	it := ebmlIter{b: data}
	id, hdrBody, _, ok := it.next()
	if !ok || id != ebmlHeaderID {
		return nil, fmt.Errorf("%w: no EBML header", ErrBadWebM)
	}
	container := "matroska"
	if string(child32(hdrBody, ebmlDocTypeID)) == "webm" {
		container = "webm"
	}
	for len(it.b) > 0 {
		id, size, hdr, ok := ebmlElem(it.b)
		if !ok {
			return nil, fmt.Errorf("%w: bad element header at offset %d", ErrBadWebM, it.off)
		}
		if id == mkvSegmentID {
			// A segment longer than the file (truncated) or of unknown
			// size extends to the end of the data.
			seg := it.b[hdr:]
			if size != unknownSize && size < int64(len(seg)) {
				seg = seg[:size]
			}
			return parseSegment(seg, container, data)
		}
		if _, _, _, ok := it.next(); !ok {
			return nil, it.err
		}
	}
	return nil, fmt.Errorf("%w: no Segment", ErrBadWebM)
}

// child32 returns the body of the first element with the given ID in b.
func child32(b []byte, want uint32) []byte {
	it := ebmlIter{b: b}
	for {
		id, body, unknown, ok := it.next()
		if !ok || unknown {
			return nil
		}
		if id == want {
			return body
		}
	}
}

// mkvScan collects the video frames of the clusters of a segment.
type mkvScan struct {
	track  *mkvTrack
	tcs    uint64 // timecode scale, ns per tick
	info   VideoInfo
	blocks int
}

func parseSegment(seg []byte, container string, file []byte) (*VideoInfo, error) {
	s := &mkvScan{tcs: 1000000}
	var duration float64
	for len(seg) > 0 {
		it := ebmlIter{b: seg, off: len(file) - len(seg)}
		id, body, unknown, ok := it.next()
		if !ok {
			if s.info.Frames > 0 && s.track != nil {
				break // truncated after some clusters: keep what was read
			}
			return nil, it.err
		}
		seg = it.b
		switch id {
		case mkvInfoID:
			if ts := ebmlUint(child32(body, mkvTimecodeScale)); ts > 0 {
				s.tcs = ts
			}
			duration = ebmlFloat(child32(body, mkvDurationID))
		case mkvTracksID:
			if s.track == nil {
				t, err := videoTrack(body)
				if err != nil {
					return nil, err
				}
				s.track = t
			}
		case mkvClusterID:
			if s.track == nil {
				return nil, fmt.Errorf("%w: cluster before the Tracks element", ErrBadWebM)
			}
			used, err := s.cluster(body, unknown)
			if err != nil {
				return nil, err
			}
			if unknown {
				seg = body[used:]
			}
		default:
			if unknown {
				return nil, fmt.Errorf("%w: %s of unknown size", ErrBadWebM, elemName(id))
			}
		}
	}
	if s.track == nil {
		return nil, fmt.Errorf("%w: no video track", ErrBadWebM)
	}
	return s.finish(container, duration)
}

// videoTrack returns the first video TrackEntry of a Tracks element.
func videoTrack(tracks []byte) (*mkvTrack, error) {
	it := ebmlIter{b: tracks}
	for {
		id, e, _, ok := it.next()
		if !ok {
			if it.err != nil {
				return nil, it.err
			}
			return nil, fmt.Errorf("%w: no video track", ErrBadWebM)
		}
		if id != mkvTrackEntryID || ebmlUint(child32(e, mkvTrackTypeID)) != mkvTrackTypeVideo {
			continue
		}
		video := child32(e, mkvVideoID)
		return &mkvTrack{
			number:          ebmlUint(child32(e, mkvTrackNumberID)),
			codec:           mkvCodec(string(child32(e, mkvCodecID))),
			width:           int(min(ebmlUint(child32(video, mkvPixelWidthID)), 1<<30)),
			height:          int(min(ebmlUint(child32(video, mkvPixelHeightID)), 1<<30)),
			defaultDuration: ebmlUint(child32(e, mkvDefaultDurID)),
		}, nil
	}
}

// isLevel1 reports whether id is a child of Segment, which ends a cluster
// of unknown size.
func isLevel1(id uint32) bool {
	switch id {
	case mkvClusterID, mkvCuesID, mkvSeekHeadID, mkvInfoID, mkvTracksID, mkvChaptersID, mkvTagsID, mkvAttachmentsID, ebmlHeaderID, mkvSegmentID:
		return true
	}
	return false
}

// cluster reads the video blocks of one cluster and returns how many bytes
// of b it used (all of them unless the cluster has unknown size).
func (s *mkvScan) cluster(b []byte, unknown bool) (int, error) {
	var base int64
	it := ebmlIter{b: b}
	for {
		rest := it.b
		id, body, _, ok := it.next()
		if !ok {
			if it.err != nil && unknown && len(rest) > 0 {
				return len(b), nil // truncated live stream: stop here
			}
			if it.err != nil {
				return 0, it.err
			}
			return len(b), nil
		}
		if unknown && isLevel1(id) {
			return len(b) - len(rest), nil
		}
		switch id {
		case mkvClusterTimeID:
			base = int64(min(ebmlUint(body), math.MaxInt64/4))
		case mkvSimpleBlockID:
			if err := s.block(body, base, true, false); err != nil {
				return 0, err
			}
		case mkvBlockGroupID:
			if blk := child32(body, mkvBlockID); blk != nil {
				if err := s.block(blk, base, false, child32(body, mkvReferenceBlock) == nil); err != nil {
					return 0, err
				}
			}
		}
	}
}

// block records the frames of one (Simple)Block if it belongs to the video
// track.
func (s *mkvScan) block(b []byte, base int64, simple, groupKey bool) error {
	track, n, ok := ebmlVint(b)
	if !ok || len(b) < n+3 || track != s.track.number {
		return nil
	}
	pts := base + int64(int16(binary.BigEndian.Uint16(b[n:])))
	flags := b[n+2]
	payload := b[n+3:]
	frames := 1
	if flags&0x06 != 0 && len(payload) > 0 { // laced: frame count - 1 first
		frames = int(payload[0]) + 1
	}
	if s.blocks+frames > MaxVideoFrames {
		return fmt.Errorf("%w: more than %d video frames", ErrBadWebM, MaxVideoFrames)
	}
	s.blocks += frames
	key := groupKey
	if simple {
		key = flags&0x80 != 0
	}
	step := int64(0)
	if s.track.defaultDuration > 0 {
		step = int64(s.track.defaultDuration / s.tcs)
	}
	for i := 0; i < frames; i++ {
		if key && i == 0 {
			s.info.Keyframes = append(s.info.Keyframes, s.info.Frames)
		}
		s.info.FrameBytes = append(s.info.FrameBytes, uint32(len(payload)/frames))
		s.info.FramePTS = append(s.info.FramePTS, pts+int64(i)*step)
		s.info.Frames++
	}
	s.info.Bytes += int64(len(payload))
	return nil
}

// finish converts timing to the track's timescale and fills the frame
// count estimate for files without clusters.
func (s *mkvScan) finish(container string, duration float64) (*VideoInfo, error) {
	v := &s.info
	v.Container, v.Codec = container, s.track.codec
	v.Width, v.Height = s.track.width, s.track.height
	mult := int64(1)
	switch {
	case s.tcs > 1000000000:
		return nil, fmt.Errorf("%w: timecode scale %d ns is over a second", ErrBadWebM, s.tcs)
	case 1000000000%s.tcs == 0:
		v.Timescale = uint32(1000000000 / s.tcs)
	default:
		// Ticks that are not a whole fraction of a second: count in ns.
		v.Timescale, mult = 1000000000, int64(s.tcs)
		for i := range v.FramePTS {
			v.FramePTS[i] *= mult
		}
	}
	if duration > 0 && duration < 1<<50 {
		v.Duration = int64(math.Round(duration)) * mult
	}
	if v.Frames > 0 {
		if v.Duration == 0 {
			first, last := v.FramePTS[0], v.FramePTS[0]
			for _, p := range v.FramePTS {
				first, last = min(first, p), max(last, p)
			}
			v.Duration = last - first + int64(min(s.track.defaultDuration, 1<<32))*int64(v.Timescale)/1000000000
		}
		if len(v.Keyframes) == 0 {
			v.Keyframes = []int{0}
		}
		return v, nil
	}
	// No clusters: estimate the count from the duration.
	if s.track.defaultDuration == 0 || v.Duration == 0 {
		return nil, fmt.Errorf("%w: no video blocks and no duration to estimate the frame count from", ErrBadWebM)
	}
	frames := float64(v.Duration) / float64(v.Timescale) * 1e9 / float64(s.track.defaultDuration)
	if frames < 1 || frames > MaxVideoFrames {
		return nil, fmt.Errorf("%w: estimated frame count %.0f out of range", ErrBadWebM, frames)
	}
	v.Frames, v.FrameCountEstimated = int(math.Round(frames)), true
	v.FrameBytes, v.FramePTS, v.Keyframes = nil, nil, []int{0}
	return v, nil
}

// mkvCodec maps a Matroska CodecID to FFmpeg's codec name.
func mkvCodec(id string) string {
	switch id {
	case "V_VP8":
		return "vp8"
	case "V_VP9":
		return "vp9"
	case "V_AV1":
		return "av1"
	case "V_MPEG4/ISO/AVC":
		return "h264"
	case "V_MPEGH/ISO/HEVC":
		return "hevc"
	case "V_MPEG4/ISO/SP", "V_MPEG4/ISO/ASP", "V_MPEG4/ISO/AP":
		return "mpeg4"
	case "V_MPEG1":
		return "mpeg1video"
	case "V_MPEG2":
		return "mpeg2video"
	case "V_THEORA":
		return "theora"
	case "V_MJPEG":
		return "mjpeg"
	case "V_PRORES":
		return "prores"
	}
	return "unknown"
}
