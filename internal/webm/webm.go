package webm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/datahelix/datahelix/internal/av"
	"github.com/datahelix/datahelix/internal/video"
)

// ErrFormat reports a WebM/Matroska file whose EBML structure cannot be
// read, or that has no video track.
var ErrFormat = errors.New("decode: invalid WebM/Matroska")

// Matroska element IDs (with their length markers, as written).
const (
	ebmlHeaderID       = 0x1A45DFA3
	ebmlDocTypeID      = 0x4282
	mkvSegmentID       = 0x18538067
	mkvInfoID          = 0x1549A966
	mkvTimecodeScale   = 0x2AD7B1
	mkvDurationID      = 0x4489
	mkvTracksID        = 0x1654AE6B
	mkvTrackEntryID    = 0xAE
	mkvTrackNumberID   = 0xD7
	mkvTrackTypeID     = 0x83
	mkvCodecID         = 0x86
	mkvCodecPrivateID  = 0x63A2
	mkvDefaultDurID    = 0x23E383
	mkvVideoID         = 0xE0
	mkvPixelWidthID    = 0xB0
	mkvPixelHeightID   = 0xBA
	mkvClusterID       = 0x1F43B675
	mkvClusterTimeID   = 0xE7
	mkvSimpleBlockID   = 0xA3
	mkvBlockGroupID    = 0xA0
	mkvBlockID         = 0xA1
	mkvReferenceBlock  = 0xFB
	mkvBlockDuration   = 0x9B
	mkvFlagDefaultID   = 0x88
	mkvFlagHearingID   = 0x55AB
	mkvFlagVisualID    = 0x55AC
	mkvCodecDelayID    = 0x56AA
	mkvEncodingsID     = 0x6D80
	mkvEncodingID      = 0x6240
	mkvEncScopeID      = 0x5032
	mkvEncTypeID       = 0x5033
	mkvCompressionID   = 0x5034
	mkvCompAlgoID      = 0x4254
	mkvCompSettingsID  = 0x4255
	mkvCompHeaderStrip = 3
	mkvProjectionID    = 0x7670
	mkvProjTypeID      = 0x7671
	mkvProjPrivateID   = 0x7672
	mkvProjYawID       = 0x7673
	mkvProjPitchID     = 0x7674
	mkvProjRollID      = 0x7675
	mkvCuesID          = 0x1C53BB6B
	mkvSeekHeadID      = 0x114D9B74
	mkvChaptersID      = 0x1043A770
	mkvTagsID          = 0x1254C367
	mkvAttachmentsID   = 0x1941A469
	mkvTrackTypeVideo  = 1
	unknownSize        = -1
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

// mkvTrack is the video track description from Tracks.
type mkvTrack struct {
	number          uint64
	codec           string
	width, height   int
	defaultDuration uint64 // ns per frame, 0 when absent
	codecDelay      uint64 // ns FFmpeg subtracts from every block timestamp
	stripped        int    // header-stripping bytes FFmpeg puts back in front of each frame
	rotation        float64
}

// Parse reads the cost features of the video track of a WebM/Matroska
// file held in memory that FFmpeg 5.1 decodes (av_find_best_stream: the
// first of those with the best FlagDefault and impaired flags): codec,
// dimensions and rotation (of a Projection, which FFmpeg turns into a
// display matrix) from Tracks, duration from Info, and one frame per video
// block of the clusters (SimpleBlocks and BlockGroups, each laced frame
// counted with its own size), with keyframes from the SimpleBlock flags or
// the absence of ReferenceBlock. FramePTS are the block timestamps in the
// file's timecode scale, minus the track's CodecDelay, as FFmpeg gives
// them (Timescale 1000 for the usual 1 ms scale); laced frames after the
// first are timed by the block's duration split evenly, and those FFmpeg
// leaves without a timestamp (laced without BlockDuration nor
// DefaultDuration, or in a block timed before 0) are listed in Discarded.
// A file without clusters gets an estimated frame count from its duration
// and the track's default frame duration. A file cut short is read, as
// FFmpeg reads it, up to its last whole block; the blocks of a cluster
// after one naming a track that Tracks does not list, or laced wrongly,
// are dropped, as FFmpeg drops them.
func Parse(data []byte) (*video.Track, error) {
	it := ebmlIter{b: data}
	id, hdrBody, _, ok := it.next()
	if !ok || id != ebmlHeaderID {
		return nil, fmt.Errorf("%w: no EBML header", ErrFormat)
	}
	container := "matroska"
	if string(child32(hdrBody, ebmlDocTypeID)) == "webm" {
		container = "webm"
	}
	for len(it.b) > 0 {
		id, size, hdr, ok := ebmlElem(it.b)
		if !ok {
			return nil, fmt.Errorf("%w: bad element header at offset %d", ErrFormat, it.off)
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
	return nil, fmt.Errorf("%w: no Segment", ErrFormat)
}

// mkvScan collects the video frames of the clusters of a segment.
type mkvScan struct {
	track  *mkvTrack
	tracks map[uint64]bool // the TrackNumbers Tracks lists
	tcs    uint64          // timecode scale, ns per tick
	info   video.Track
	blocks int
}

func parseSegment(seg []byte, container string, file []byte) (*video.Track, error) {
	s := &mkvScan{tcs: 1000000}
	var duration float64
	for len(seg) > 0 {
		it := ebmlIter{b: seg, off: len(file) - len(seg)}
		id, body, unknown, ok := it.next()
		if !ok {
			if cut, err := s.cutCluster(seg, it.err); cut {
				if err != nil {
					return nil, err
				}
				break
			}
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
				t, numbers, err := videoTrack(body)
				if err != nil {
					return nil, err
				}
				s.track, s.tracks = t, numbers
			}
		case mkvClusterID:
			if s.track == nil {
				return nil, fmt.Errorf("%w: cluster before the Tracks element", ErrFormat)
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
				return nil, fmt.Errorf("%w: %s of unknown size", ErrFormat, elemName(id))
			}
		}
	}
	if s.track == nil {
		return nil, fmt.Errorf("%w: no video track", ErrFormat)
	}
	return s.finish(container, duration)
}

// cutCluster reads the whole blocks of a cluster at the start of seg that
// runs past its end (a file cut short), as FFmpeg reads them, and reports
// whether there was one. When no frame at all could be read, it returns
// cutErr, the error naming the cut element.
func (s *mkvScan) cutCluster(seg []byte, cutErr error) (bool, error) {
	id, size, hdr, ok := ebmlElem(seg)
	if !ok || id != mkvClusterID || size == unknownSize || size <= int64(len(seg)-hdr) || s.track == nil {
		return false, nil
	}
	if _, err := s.cluster(seg[hdr:], true); err != nil {
		return true, err
	}
	if s.info.Frames == 0 {
		return true, cutErr
	}
	return true, nil
}

// videoTrack returns the video TrackEntry of a Tracks element that FFmpeg
// 5.1 decodes, with the TrackNumbers of all entries. Of the entries
// FFmpeg turns into video streams (TrackType video, a CodecID starting
// with "V"), av_find_best_stream takes the first of those scoring most:
// one point unless FlagHearingImpaired or FlagVisualImpaired is set, one
// more for FlagDefault (which is 1 when absent).
func videoTrack(tracks []byte) (*mkvTrack, map[uint64]bool, error) {
	it := ebmlIter{b: tracks}
	var best []byte
	bestScore := -1
	numbers := map[uint64]bool{}
	for {
		id, e, _, ok := it.next()
		if !ok {
			if it.err != nil {
				return nil, nil, it.err
			}
			break
		}
		if id != mkvTrackEntryID {
			continue
		}
		numbers[ebmlUint(child32(e, mkvTrackNumberID))] = true
		codec := child32(e, mkvCodecID)
		if ebmlUint(child32(e, mkvTrackTypeID)) != mkvTrackTypeVideo || len(codec) == 0 || codec[0] != 'V' {
			continue
		}
		score := 0
		if ebmlUint(child32(e, mkvFlagHearingID)) == 0 && ebmlUint(child32(e, mkvFlagVisualID)) == 0 {
			score++
		}
		if f := child32(e, mkvFlagDefaultID); f == nil || ebmlUint(f) != 0 {
			score++
		}
		if score > bestScore {
			best, bestScore = e, score
		}
	}
	if best == nil {
		return nil, nil, fmt.Errorf("%w: no video track", ErrFormat)
	}
	video := child32(best, mkvVideoID)
	return &mkvTrack{
		number:          ebmlUint(child32(best, mkvTrackNumberID)),
		codec:           trackCodec(best),
		width:           int(min(ebmlUint(child32(video, mkvPixelWidthID)), 1<<30)),
		height:          int(min(ebmlUint(child32(video, mkvPixelHeightID)), 1<<30)),
		defaultDuration: ebmlUint(child32(best, mkvDefaultDurID)),
		codecDelay:      ebmlUint(child32(best, mkvCodecDelayID)),
		stripped:        strippedHeader(child32(best, mkvEncodingsID)),
		rotation:        mkvRotation(child32(video, mkvProjectionID)),
	}, numbers, nil
}

// mkvRotation returns the rotation of the display matrix FFmpeg 5.1 makes
// of a track's Projection (mkv_create_display_matrix), as ffprobe prints
// it (VideoInfo.Rotation): a rectangular projection without private data
// turned by ProjectionPoseRoll degrees counterclockwise, mirrored first
// when ProjectionPoseYaw is 180 or -180. FFmpeg ignores other poses (a
// pitch, another yaw), and other projections give spherical data, no
// matrix.
func mkvRotation(proj []byte) float64 {
	if proj == nil || ebmlUint(child32(proj, mkvProjTypeID)) != 0 {
		return 0
	}
	if p := child32(proj, mkvProjPrivateID); len(p) > 0 && p[0] != 0 {
		return 0
	}
	yaw, pitch, roll := mkvAngle(child32(proj, mkvProjYawID)), mkvAngle(child32(proj, mkvProjPitchID)), mkvAngle(child32(proj, mkvProjRollID))
	if pitch != 0 || (yaw != 0 && yaw != 180 && yaw != -180) || math.IsNaN(roll) || math.IsInf(roll, 0) {
		return 0
	}
	// av_display_rotation_set(m, -roll), or (roll) mirrored by
	// av_display_matrix_flip when yaw is 180.
	angle := -roll
	if yaw != 0 {
		angle = roll
	}
	rad := -angle * math.Pi / 180
	c, s := int32(math.Cos(rad)*(1<<16)), int32(math.Sin(rad)*(1<<16))
	m := [9]int32{c, -s, 0, s, c, 0, 0, 0, 1 << 30}
	if yaw != 0 {
		m[0], m[3] = -m[0], -m[3]
	}
	return video.DisplayRotation(m, [9]int32{1 << 16, 0, 0, 0, 1 << 16, 0, 0, 0, 1 << 30})
}

// mkvAngle reads a float element of 4 or 8 bytes, negative values kept
// (ebmlFloat drops them); other sizes, and an absent element, give 0.
func mkvAngle(b []byte) float64 {
	switch len(b) {
	case 4:
		return float64(math.Float32frombits(binary.BigEndian.Uint32(b)))
	case 8:
		return math.Float64frombits(binary.BigEndian.Uint64(b))
	}
	return 0
}

// strippedHeader returns how many bytes FFmpeg puts back in front of each
// frame of a track whose ContentEncodings strip a common header from its
// frames (ContentCompAlgo 3): FFmpeg applies the first ContentEncoding
// when it is a compression (ContentEncodingType 0) of the frames
// (ContentEncodingScope bit 1, the default). Other compressions (zlib)
// change sizes in ways only decompressing tells; their frames keep their
// stored sizes.
func strippedHeader(encodings []byte) int {
	enc := child32(encodings, mkvEncodingID)
	if enc == nil {
		return 0
	}
	scope := uint64(1)
	if b := child32(enc, mkvEncScopeID); b != nil {
		scope = ebmlUint(b)
	}
	comp := child32(enc, mkvCompressionID)
	if ebmlUint(child32(enc, mkvEncTypeID)) != 0 || scope&1 == 0 || comp == nil || ebmlUint(child32(comp, mkvCompAlgoID)) != mkvCompHeaderStrip {
		return 0
	}
	return len(child32(comp, mkvCompSettingsID))
}

// finish converts timing to the track's timescale and fills the frame
// count estimate for files without clusters.
func (s *mkvScan) finish(container string, duration float64) (*video.Track, error) {
	v := &s.info
	v.Container, v.Codec = container, s.track.codec
	v.Width, v.Height, v.Rotation = s.track.width, s.track.height, s.track.rotation
	mult := int64(1)
	switch {
	case s.tcs > 1000000000:
		return nil, fmt.Errorf("%w: timecode scale %d ns is over a second", ErrFormat, s.tcs)
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
		return nil, fmt.Errorf("%w: no video blocks and no duration to estimate the frame count from", ErrFormat)
	}
	frames := float64(v.Duration) / float64(v.Timescale) * 1e9 / float64(s.track.defaultDuration)
	if frames < 1 || frames > video.MaxFrames {
		return nil, fmt.Errorf("%w: estimated frame count %.0f out of range", ErrFormat, frames)
	}
	v.Frames, v.FrameCountEstimated = int(math.Round(frames)), true
	v.FrameBytes, v.FramePTS, v.Keyframes = nil, nil, []int{0}
	return v, nil
}

// trackCodec returns the FFmpeg codec name of a video TrackEntry: its
// CodecID's (mkvCodec), or for a V_MS/VFW/FOURCC track, which holds what
// an AVI held (FFV1, WMV, MPEG-4 Part 2, H.264 ...), the codec FFmpeg
// reads its BITMAPINFOHEADER's compression fourcc as, as the Matroska
// demuxer does when the header is whole (40 bytes or more).
func trackCodec(entry []byte) string {
	id := string(child32(entry, mkvCodecID))
	if priv := child32(entry, mkvCodecPrivateID); id == "V_MS/VFW/FOURCC" && len(priv) >= 40 {
		if name := av.VfWCodec(binary.LittleEndian.Uint32(priv[16:])); name != "" {
			return name
		}
	}
	return mkvCodec(id)
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
	case "V_MPEG4/MS/V3":
		return "msmpeg4v3"
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
