package mp4

import (
	"errors"
	"fmt"
	"math"

	"github.com/datahelix/datahelix/internal/video"
)

// mp4Track is what Parse keeps of the first video track while walking
// the boxes; the frame slices are filled by sampleTable and fragments.
type mp4Track struct {
	id        uint32
	timescale uint32
	duration  uint64
	codec     string
	width     int
	height    int
	rotation  float64 // VideoInfo.Rotation

	// enabled is the tkhd's track_enabled flag (FFmpeg's default
	// disposition), impaired whether a kind box gives the track a role
	// FFmpeg reads as for the hearing or visually impaired (readKinds),
	// and sttsDuration the sum of the stts entries: with the frame sizes
	// they pick the track FFmpeg decodes (score).
	enabled, impaired bool
	sttsDuration      int64

	// err is the brokenTrack error of a track FFmpeg keeps without a bit
	// rate; the other fields but enabled and impaired may be unset.
	err error

	// edits is the edit list (elst) as stored; advanced is false when
	// FFmpeg would not apply it frame by frame (see parseMoov).
	edits    []mp4Edit
	advanced bool

	// trex defaults for fragments.
	trexDuration, trexSize, trexFlags uint32

	bytes []uint32 // per frame, decode order
	// dts and pts hold each frame's decode and composition time (decode
	// time plus composition offset) before the edit list is applied.
	dts, pts []int64
	// nMoov counts the frames of the moov sample table (fragments follow);
	// nCtts how many of them have a ctts entry, hasCtts whether FFmpeg
	// keeps the ctts box.
	nMoov, nCtts int
	hasCtts      bool
	// moovShift and dtsShift are FFmpeg's dts_shift (the largest negated
	// negative composition offset) once the moov is read and once the
	// fragments are too: FFmpeg lowers the moov frames' decode times by
	// the first and adds the second to every packet's pts.
	moovShift, dtsShift int64
	// firstDTS and endDTS bound the decode timeline: the first frame's
	// decode time and the time after the last frame.
	firstDTS, endDTS int64
	// key holds each frame's sync flag: from stss for the moov frames
	// (every frame when it is absent), from the sample flags for the
	// fragments'.
	key []bool
}

// Parse reads the cost features of the video track of an MP4/MOV file
// held in memory that FFmpeg 5.1 decodes (av_find_best_stream; see
// videoScore): codec and dimensions from the stsd entry, timescale
// and duration from mdhd, per-frame sizes (stsz/stz2), timing (stts, ctts,
// the edit list) and sync frames (stss), and the samples of movie fragments
// (moof/traf/trun with tfhd and trex defaults). The moov box may come
// before or after mdat. The frames, their FramePTS and Duration follow
// FFmpeg's mov demuxer (5.1, advanced edit lists; see editIndex): a frame
// is listed once per packet FFmpeg reads, with the pts ffprobe reports
// for it (negative composition offsets raise every pts, FFmpeg's
// dts_shift), and Duration is the stream duration ffprobe reports. Frames
// the edit list hides but FFmpeg still decodes (the pre-roll of a cut
// that does not start on a keyframe) stay listed, with negative pts; the
// packets after the last frame an edit list shows, which FFmpeg reads
// and discards, are not listed. A hidden frame decoded before a shown
// one (a P-frame past an edit's end, its B-frames inside) stays listed.
// Every listed frame FFmpeg hides, pre-roll included, is in Discarded.
func Parse(data []byte) (*video.Track, error) {
	var moov []byte
	var moofs [][]byte
	brand := ""
	it := boxIter{b: data}
	for {
		typ, body, ok := it.next()
		if !ok {
			break
		}
		switch string(typ[:]) {
		case "ftyp":
			if len(body) >= 4 {
				brand = string(body[:4])
			}
		case "moov":
			if moov == nil {
				moov = body
			}
		case "moof":
			if len(moofs) < video.MaxFrames {
				moofs = append(moofs, body)
			}
		}
	}
	if moov == nil {
		if it.err != nil {
			return nil, it.err
		}
		return nil, fmt.Errorf("%w: no moov box", ErrFormat)
	}
	tr, movieTimescale, err := parseMoov(data, moov, moofs)
	if err != nil {
		return nil, err
	}
	if len(tr.bytes) == 0 {
		return nil, fmt.Errorf("%w: video track has no frames", ErrFormat)
	}
	container := "mp4"
	if brand == "qt  " {
		container = "mov"
	}
	return tr.info(container, movieTimescale)
}

// parseMoov reads every video track of moov, the first moov of file,
// with its samples in the fragments moofs, and returns the one FFmpeg
// decodes (videoScore) and the movie timescale from mvhd. A video track
// FFmpeg keeps but cannot read (brokenTrack: it logs "missing mandatory
// atoms, broken header", as for a track without stts, or "timescale not
// set") is scored by its tkhd enabled flag and kind boxes with bit rate
// 0, as FFmpeg scores it; its error fails the file only when it is the
// track FFmpeg decodes. Any other error of a video track, and a kind,
// tkhd, mdhd, sidx or stsd box FFmpeg refuses anywhere in file, or a
// trak past package av's 16 streams (readKinds: an mdhd of version 2, of
// any track), fails the file whichever track FFmpeg would decode: FFmpeg
// refuses such files too (a table count its box cannot hold makes it
// allocate or read that many entries), or rates the track by a bit rate
// this parser does not know. At most two tracks are held at once: the
// best so far and the one being read.
func parseMoov(file, moov []byte, moofs [][]byte) (*mp4Track, uint32, error) {
	var movieTimescale uint32
	var movie [9]int32 // the mvhd matrix; zero without an mvhd, as in FFmpeg
	var traks [][]byte
	var mvex []byte
	it := boxIter{b: moov}
	for {
		typ, body, ok := it.next()
		if !ok {
			break
		}
		switch string(typ[:]) {
		case "mvhd":
			if v, _, p, ok := fullBox(body); ok {
				if v == 1 && len(p) >= 20 {
					movieTimescale = be32(p, 16)
				} else if v == 0 && len(p) >= 12 {
					movieTimescale = be32(p, 8)
				}
				readMatrix(&movie, p, v, 32, 44)
			}
		case "trak":
			traks = append(traks, body)
		case "mvex":
			mvex = body
		}
	}
	if it.err != nil {
		return nil, 0, it.err
	}
	impaired, err := readKinds(file)
	if err != nil {
		return nil, 0, err
	}
	// FFmpeg rates the streams of a file with a trex box (any track's) by
	// their fragments too.
	fragmented := child(mvex, "trex") != nil
	var best *mp4Track
	var bestScore videoScore
	var handlers []string
	// FFmpeg turns its advanced edit-list handling off for good at the
	// first track whose stts is empty (a fragmented file's moov), before
	// building that track's index.
	advanced := true
	for i, trak := range traks {
		if emptyStts(trak) {
			advanced = false
		}
		tr, err := parseTrak(trak, movie)
		if err != nil && !errors.As(err, new(brokenTrack)) {
			return nil, 0, err
		}
		if tr == nil {
			if best == nil {
				h := trakHandler(trak)
				if h == "vide" {
					h = "vide holding mp3 (its esds), which FFmpeg reads as audio"
				}
				handlers = append(handlers, h)
			}
			continue
		}
		tr.impaired = i < len(impaired) && impaired[i]
		if tr.err = err; err == nil {
			tr.advanced = advanced
			tr.readTrex(mvex)
			for _, moof := range moofs {
				if err := tr.fragment(moof); err != nil {
					return nil, 0, err
				}
			}
		}
		if s := tr.score(fragmented); best == nil || s.beats(bestScore) {
			best, bestScore = tr, s
		}
	}
	if best == nil {
		return nil, 0, noVideoTrack{handlers}
	}
	if best.err != nil {
		return nil, 0, best.err
	}
	return best, movieTimescale, nil
}

// brokenTrack is the error of a video track FFmpeg 5.1 keeps, with bit
// rate 0, but that Parse cannot describe: frames without stts entries,
// without chunk offsets (stco/co64) or without stsc entries, which FFmpeg
// logs as "missing mandatory atoms, broken header" and reads no packets
// of; or no mdhd, which it logs as "timescale not set" and times in the
// movie's timescale. parseMoov fails the file with it only when FFmpeg
// would decode that track.
type brokenTrack struct{ err error }

func (e brokenTrack) Error() string { return e.err.Error() }
func (e brokenTrack) Unwrap() error { return e.err }

// parseTrak reads a trak box, movie being the matrix of the mvhd read
// before it; it returns nil, nil for a track that is not video, and the
// track as far as it was read (its enabled flag at least) with a
// brokenTrack error.
func parseTrak(trak []byte, movie [9]int32) (*mp4Track, error) {
	if !trakIsVideo(trak) {
		return nil, nil
	}
	mdia := child(trak, "mdia")
	tr := &mp4Track{}
	var matrix [9]int32
	if v, flags, p, ok := fullBox(child(trak, "tkhd")); ok {
		tr.enabled = flags&1 != 0
		if v == 1 && len(p) >= 20 {
			tr.id = be32(p, 16)
		} else if v == 0 && len(p) >= 12 {
			tr.id = be32(p, 8)
		}
		readMatrix(&matrix, p, v, 36, 48)
	}
	tr.rotation = video.DisplayRotation(matrix, movie)
	// FFmpeg makes the stream of an mp3 sample entry audio as it reads
	// the stsd (mov_finalize_stsd_codec), whatever else the track lacks,
	// an mdhd too: the codec is read first (but an mdhd FFmpeg refuses
	// fails the file whatever the codec, in readKinds). A sample
	// description it cannot read fails the file, once the mdhd is known.
	stbl := child(child(mdia, "minf"), "stbl")
	stsdErr := tr.readStsd(child(stbl, "stsd"))
	if stsdErr == nil && tr.codec == "mp3" {
		return nil, nil
	}
	mdhd := child(mdia, "mdhd")
	v, _, p, ok := fullBox(mdhd)
	switch {
	case mdhd == nil:
		return tr, brokenTrack{fmt.Errorf("%w: video track without an mdhd", ErrFormat)}
	case ok && v == 1 && len(p) >= 28:
		tr.timescale, tr.duration = be32(p, 16), be64(p, 20)
	case ok && v == 0 && len(p) >= 16:
		tr.timescale, tr.duration = be32(p, 8), uint64(be32(p, 12))
	default:
		return nil, fmt.Errorf("%w: video track without a valid mdhd", ErrFormat)
	}
	if tr.timescale == 0 {
		return nil, fmt.Errorf("%w: mdhd timescale is 0", ErrFormat)
	}
	if err := tr.readEdits(child(child(trak, "edts"), "elst")); err != nil {
		return nil, err
	}
	if stsdErr != nil {
		return nil, stsdErr
	}
	tr.sttsDuration = sttsDuration(child(stbl, "stts"))
	if err := tr.sampleTable(stbl); err != nil {
		if errors.As(err, new(brokenTrack)) {
			return tr, err
		}
		return nil, err
	}
	return tr, nil
}

// readStsd reads the codec and dimensions of the first sample entry.
func (tr *mp4Track) readStsd(stsd []byte) error {
	_, _, p, ok := fullBox(stsd)
	if !ok || len(p) < 4 || be32(p, 0) == 0 {
		return fmt.Errorf("%w: video track without a sample description", ErrFormat)
	}
	it := boxIter{b: p[4:]}
	typ, entry, ok := it.next()
	if !ok || len(entry) < 28 {
		return fmt.Errorf("%w: truncated video sample entry", ErrFormat)
	}
	tr.width, tr.height = int(entry[24])<<8|int(entry[25]), int(entry[26])<<8|int(entry[27])
	if string(typ[:]) == "encv" && len(entry) > 78 {
		if frma := child(child(entry[78:], "sinf"), "frma"); len(frma) >= 4 {
			copy(typ[:], frma[:4])
		}
	}
	tr.codec = mp4Codec(typ)
	if len(entry) > 78 {
		// FFmpeg takes the codec from an esds in any visual entry
		// (ff_mov_read_esds): an MPEG-4 visual one may carry MPEG-1/2
		// video, JPEG or PNG, and any may name an audio codec.
		if c := esdsCodec(child(entry[78:], "esds")); c != "" {
			tr.codec = c
		}
	}
	return nil
}

// info assembles the VideoInfo: the moov frames as FFmpeg indexes them
// under the edit list, then the fragments' frames.
func (tr *mp4Track) info(container string, movieTimescale uint32) (*video.Track, error) {
	v := &video.Track{
		Container: container,
		Codec:     tr.codec,
		Width:     tr.width,
		Height:    tr.height,
		Rotation:  tr.rotation,
		Timescale: tr.timescale,
		Duration:  int64(min(tr.duration, math.MaxInt64)),
	}
	offset := tr.timeOffset(movieTimescale)
	moov := tr.nMoov
	if tr.advanced && len(tr.edits) > 0 && movieTimescale > 0 && moov > 0 {
		idx, err := tr.editIndex(tr.key[:moov], movieTimescale)
		if err != nil {
			return nil, err
		}
		v.FrameBytes = make([]uint32, 0, len(idx.frames)+len(tr.bytes)-moov)
		v.FramePTS = make([]int64, 0, cap(v.FrameBytes))
		if moov == len(tr.bytes) && idx.shown > 0 {
			// FFmpeg reads the frames after the last one it shows but
			// discards them (they lie past an edit's end and no shown
			// frame needs them): no target needs them listed.
			idx.frames, idx.pts = idx.frames[:idx.shown], idx.pts[:idx.shown]
		}
		// The index was built before the fragments raised dts_shift.
		late := tr.dtsShift - tr.moovShift
		for j, i := range idx.frames {
			if idx.discard[j] {
				v.Discarded = append(v.Discarded, len(v.FramePTS))
			}
			v.FrameBytes = append(v.FrameBytes, tr.bytes[i])
			v.FramePTS = append(v.FramePTS, idx.pts[j]+late)
			if tr.key[i] {
				v.Keyframes = append(v.Keyframes, j)
			}
		}
		v.Duration = min(v.Duration, idx.duration)
	} else {
		moov = 0 // the whole track is shifted by the first edit
	}
	for i := moov; i < len(tr.bytes); i++ {
		if tr.key[i] {
			v.Keyframes = append(v.Keyframes, len(v.FramePTS))
		}
		// FFmpeg lowers the moov frames' decode times by the moov's
		// dts_shift but not the fragments' (mov_build_index, mov_read_trun),
		// and adds the final dts_shift to every pts.
		pts := tr.pts[i] + tr.dtsShift - offset
		if i < tr.nMoov {
			pts -= tr.moovShift
		}
		v.FrameBytes = append(v.FrameBytes, tr.bytes[i])
		v.FramePTS = append(v.FramePTS, pts)
	}
	v.Frames = len(v.FramePTS)
	if v.Frames == 0 {
		return nil, fmt.Errorf("%w: the edit list leaves no frames of the video track", ErrFormat)
	}
	if len(v.Keyframes) == 0 {
		v.Keyframes = []int{0} // unknown: decoding must start at the first frame
	}
	if len(tr.bytes) > tr.nMoov {
		// Fragments extend the stream past mdhd's duration (often 0, or
		// the first fragment's): FFmpeg takes their decode end.
		v.Duration = max(v.Duration, tr.endDTS-tr.firstDTS)
	}
	for _, b := range v.FrameBytes {
		v.Bytes += int64(b)
	}
	return v, nil
}
