package decode

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
)

// mp4Track is what ParseMP4 keeps of the first video track while walking
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

// ParseMP4 reads the cost features of the video track of an MP4/MOV file
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
func ParseMP4(data []byte) (*VideoInfo, error) {
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
			if len(moofs) < MaxVideoFrames {
				moofs = append(moofs, body)
			}
		}
	}
	if moov == nil {
		if it.err != nil {
			return nil, it.err
		}
		return nil, fmt.Errorf("%w: no moov box", ErrBadMP4)
	}
	tr, movieTimescale, err := parseMoov(data, moov, moofs)
	if err != nil {
		return nil, err
	}
	if len(tr.bytes) == 0 {
		return nil, fmt.Errorf("%w: video track has no frames", ErrBadMP4)
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

// videoScore is what av_find_best_stream (FFmpeg 5.1, which package av
// calls before reading any frame) rates a video stream by: a point unless
// its disposition is for the hearing or visually impaired, one more for
// the default disposition, then its bit rate. It takes the first stream
// of the best score.
type videoScore struct {
	disposition int
	bitRate     int64
}

// beats reports whether a stream scoring s replaces the best so far, which
// scores best: only by scoring more, so that the first of equals stays.
func (s videoScore) beats(best videoScore) bool {
	if s.disposition != best.disposition {
		return s.disposition > best.disposition
	}
	return s.bitRate > best.bitRate
}

// score rates the track as FFmpeg's mov demuxer sets its disposition and
// bit rate: the default disposition from the tkhd enabled flag, the
// impaired ones from a kind box (mov_read_kind), and the bit rate from
// the sizes of the moov's frames over the stream duration (mdhd's, or the
// stts total when shorter), in truncating unsigned arithmetic
// (mov_build_index) — or, in a file with a trex box, from the moov's and
// the fragments' frames over that duration raised to the fragments' end,
// rounded (mov_read_header). The edit list does not count: FFmpeg rates
// the track before applying it. A broken track (tr.err) has bit rate 0.
func (tr *mp4Track) score(fragmented bool) videoScore {
	var s videoScore
	if !tr.impaired {
		s.disposition++
	}
	if tr.enabled {
		s.disposition++
	}
	if tr.err != nil {
		return s
	}
	// mdhd's duration is read into a signed 64-bit value.
	dur := int64(tr.duration)
	if tr.sttsDuration != 0 {
		dur = min(dur, tr.sttsDuration)
	}
	var moovBytes, allBytes uint64
	for i, b := range tr.bytes {
		if i < tr.nMoov {
			moovBytes += uint64(b)
		}
		allBytes += uint64(b)
	}
	if dur > 0 && tr.nMoov > 0 {
		s.bitRate = int64(moovBytes * 8 * uint64(tr.timescale) / uint64(dur))
	}
	if !fragmented {
		return s
	}
	if len(tr.bytes) > tr.nMoov {
		dur = max(dur, tr.endDTS)
	}
	if dur > 0 {
		hi, lo := bits.Mul64(allBytes, 8*uint64(tr.timescale))
		lo, carry := bits.Add64(lo, uint64(dur)/2, 0)
		hi += carry
		s.bitRate = 0 // on overflow, as FFmpeg
		if hi < uint64(dur) {
			if q, _ := bits.Div64(hi, lo, uint64(dur)); q <= math.MaxInt64 {
				s.bitRate = int64(q)
			}
		}
	}
	return s
}

// brokenTrack is the error of a video track FFmpeg 5.1 keeps, with bit
// rate 0, but that ParseMP4 cannot describe: frames without stts entries,
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
	tr.rotation = displayRotation(matrix, movie)
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
		return tr, brokenTrack{fmt.Errorf("%w: video track without an mdhd", ErrBadMP4)}
	case ok && v == 1 && len(p) >= 28:
		tr.timescale, tr.duration = be32(p, 16), be64(p, 20)
	case ok && v == 0 && len(p) >= 16:
		tr.timescale, tr.duration = be32(p, 8), uint64(be32(p, 12))
	default:
		return nil, fmt.Errorf("%w: video track without a valid mdhd", ErrBadMP4)
	}
	if tr.timescale == 0 {
		return nil, fmt.Errorf("%w: mdhd timescale is 0", ErrBadMP4)
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

// readMatrix reads into m the 3x3 matrix (row-major, as stored) of a
// full box of version v whose payload is p, at offset off0 of a version 0
// payload or off1 of a version 1 one; it leaves m alone for another
// version or a payload too short.
func readMatrix(m *[9]int32, p []byte, v uint8, off0, off1 int) {
	off := off0
	if v == 1 {
		off = off1
	}
	if v > 1 || len(p) < off+36 {
		return
	}
	for k := range m {
		m[k] = int32(be32(p, off+4*k))
	}
}

// displayRotation returns the rotation of the display matrix FFmpeg 5.1's
// mov demuxer gives a track, the tkhd matrix times the mvhd one
// (mov_read_tkhd), as av_display_rotation_get reads it: degrees
// counterclockwise, -180 to 180. FFmpeg exports no identity matrix, and
// none can be read from a degenerate one: both give 0.
func displayRotation(track, movie [9]int32) float64 {
	// res[i][j] = sum over e of track[i][e]*movie[e][j], shifted by the
	// fixed point of row e (16.16, 16.16, 2.30).
	var m [9]int32
	shift := [3]uint{16, 16, 30}
	for i := range 3 {
		for j := range 3 {
			var sum int64
			for e := range 3 {
				sum += int64(track[3*i+e]) * int64(movie[3*e+j]) >> shift[e]
			}
			m[3*i+j] = int32(sum)
		}
	}
	if m == [9]int32{0x10000, 0, 0, 0, 0x10000, 0, 0, 0, 1 << 30} {
		return 0
	}
	fp := func(k int) float64 { return float64(m[k]) / 0x10000 }
	s0, s1 := math.Hypot(fp(0), fp(3)), math.Hypot(fp(1), fp(4))
	if s0 == 0 || s1 == 0 {
		return 0
	}
	return -math.Atan2(fp(1)/s1, fp(0)/s0) * 180 / math.Pi
}

// Turn returns the clockwise turn, 0, 90, 180 or 270 degrees, that shows
// the clip upright, as the ffmpeg 5.1 CLI (get_rotation) and package av
// (av.StreamInfo.Rotation) read it from Rotation: rounded to whole
// degrees, then to the nearest multiple of 90.
func (v *VideoInfo) Turn() int {
	theta := -math.Round(v.Rotation)
	theta -= 360 * math.Floor(theta/360+0.9/360)
	angle := int(theta)
	if angle < 0 || angle >= 360 {
		angle = 0
	}
	return (angle + 45) / 90 % 4 * 90
}

// mp4Edit is one elst entry: a segment of dur movie-timescale ticks
// showing the media from mediaTime (-1 for an empty segment).
type mp4Edit struct {
	dur       uint64
	mediaTime int64
}

// readEdits keeps the entries of the elst box.
func (tr *mp4Track) readEdits(elst []byte) error {
	v, _, p, ok := fullBox(elst)
	if !ok || len(p) < 4 {
		return nil
	}
	n := uint64(be32(p, 0))
	p = p[4:]
	rec := uint64(12)
	if v == 1 {
		rec = 20
	}
	if n > uint64(len(p))/rec {
		return fmt.Errorf("%w: elst has %d entries in %d bytes", ErrBadMP4, n, len(p))
	}
	tr.edits = make([]mp4Edit, n)
	for i := range tr.edits {
		e := p[uint64(i)*rec:]
		if v == 1 {
			tr.edits[i] = mp4Edit{be64(e, 0), int64(be64(e, 8))}
		} else {
			tr.edits[i] = mp4Edit{uint64(be32(e, 0)), int64(int32(be32(e, 4)))}
		}
	}
	return nil
}

// readStsd reads the codec and dimensions of the first sample entry.
func (tr *mp4Track) readStsd(stsd []byte) error {
	_, _, p, ok := fullBox(stsd)
	if !ok || len(p) < 4 || be32(p, 0) == 0 {
		return fmt.Errorf("%w: video track without a sample description", ErrBadMP4)
	}
	it := boxIter{b: p[4:]}
	typ, entry, ok := it.next()
	if !ok || len(entry) < 28 {
		return fmt.Errorf("%w: truncated video sample entry", ErrBadMP4)
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

// sampleTable reads frame sizes, timing and sync frames from stbl.
func (tr *mp4Track) sampleTable(stbl []byte) error {
	var sizes []uint32
	var n int
	var err error
	if b := child(stbl, "stsz"); b != nil {
		sizes, n, err = readStsz(b)
	} else if b := child(stbl, "stz2"); b != nil {
		sizes, n, err = readStz2(b)
	}
	if err != nil || n == 0 {
		return err
	}
	// The chunk tables are not read here, but FFmpeg's demuxer allocates
	// them by their counts before checking those against the box: a
	// forged count made it fail with "Cannot allocate memory".
	var counts [3]int // stco, co64, stsc
	for i, t := range []struct {
		typ string
		rec int
	}{{"stco", 4}, {"co64", 8}, {"stsc", 12}} {
		if b := child(stbl, t.typ); b != nil {
			if counts[i], _, err = tableEntries(t.typ, b, t.rec); err != nil {
				return err
			}
		}
	}
	// Without chunk offsets or stsc entries FFmpeg cannot find the frames:
	// it keeps the track but reads none of them (mov_read_trak).
	if counts[0] == 0 && counts[1] == 0 {
		return brokenTrack{fmt.Errorf("%w: video track of %d frames without chunk offsets (stco/co64)", ErrBadMP4, n)}
	}
	if counts[2] == 0 {
		return brokenTrack{fmt.Errorf("%w: video track of %d frames without stsc entries", ErrBadMP4, n)}
	}
	tr.bytes, tr.dts, tr.nMoov = sizes, make([]int64, n), n
	end, err := readStts(child(stbl, "stts"), tr.dts)
	if err != nil {
		return err
	}
	tr.endDTS = end
	tr.pts = slices.Clone(tr.dts)
	if tr.nCtts, tr.hasCtts, tr.moovShift, err = addCtts(child(stbl, "ctts"), tr.pts); err != nil {
		return err
	}
	tr.dtsShift = tr.moovShift
	tr.key = make([]bool, n)
	stss := child(stbl, "stss")
	if stss == nil {
		for i := range tr.key {
			tr.key[i] = true
		}
		return nil
	}
	cnt, p, err := tableEntries("stss", stss, 4)
	if err != nil {
		return err
	}
	for i := 0; i < cnt; i++ {
		if k := int(be32(p, 4*i)) - 1; k >= 0 && k < n {
			tr.key[k] = true
		}
	}
	return nil
}

// tableEntries checks a sample table box whose payload is a 32-bit entry
// count followed by entries of rec bytes (stts, ctts, stss, stsc, stco,
// co64) and returns the count and the entries.
func tableEntries(typ string, b []byte, rec int) (int, []byte, error) {
	_, _, p, ok := fullBox(b)
	if !ok || len(p) < 4 {
		return 0, nil, fmt.Errorf("%w: truncated %s", ErrBadMP4, typ)
	}
	n, room := uint64(be32(p, 0)), uint64(len(p)-4)/uint64(rec)
	if n > room {
		return 0, nil, fmt.Errorf("%w: %s counts %d entries, but its %d bytes of %d-byte entries hold at most %d",
			ErrBadMP4, typ, n, len(p)-4, rec, room)
	}
	return int(n), p[4:], nil
}

// readStsz returns per-frame sizes from an stsz box.
func readStsz(b []byte) ([]uint32, int, error) {
	_, _, p, ok := fullBox(b)
	if !ok || len(p) < 8 {
		return nil, 0, fmt.Errorf("%w: truncated stsz", ErrBadMP4)
	}
	constant, n := be32(p, 0), uint64(be32(p, 4))
	if n > MaxVideoFrames {
		return nil, 0, fmt.Errorf("%w: stsz counts %d frames, more than %d", ErrBadMP4, n, MaxVideoFrames)
	}
	if constant == 0 && n > uint64(len(p)-8)/4 {
		return nil, 0, fmt.Errorf("%w: stsz has %d sizes in %d bytes", ErrBadMP4, n, len(p)-8)
	}
	sizes := make([]uint32, n)
	for i := range sizes {
		if constant != 0 {
			sizes[i] = constant
		} else {
			sizes[i] = be32(p, 8+4*i)
		}
	}
	return sizes, int(n), nil
}

// readStz2 returns per-frame sizes from a compact stz2 box.
func readStz2(b []byte) ([]uint32, int, error) {
	_, _, p, ok := fullBox(b)
	if !ok || len(p) < 8 {
		return nil, 0, fmt.Errorf("%w: truncated stz2", ErrBadMP4)
	}
	field, n := uint64(p[3]), uint64(be32(p, 4))
	if field != 4 && field != 8 && field != 16 {
		return nil, 0, fmt.Errorf("%w: stz2 field size %d", ErrBadMP4, field)
	}
	if n > MaxVideoFrames || n > uint64(len(p)-8)*8/field {
		return nil, 0, fmt.Errorf("%w: stz2 has %d sizes in %d bytes", ErrBadMP4, n, len(p)-8)
	}
	sizes := make([]uint32, n)
	q := p[8:]
	for i := range sizes {
		switch field {
		case 4:
			sizes[i] = uint32(q[i/2]>>(4*(1-i%2))) & 15
		case 8:
			sizes[i] = uint32(q[i])
		case 16:
			sizes[i] = uint32(q[2*i])<<8 | uint32(q[2*i+1])
		}
	}
	return sizes, int(n), nil
}

// readStts fills dts with decode times from an stts box and returns the
// decode time after the last frame. Frames past the table keep the last
// delta, as FFmpeg does for short tables.
func readStts(b []byte, dts []int64) (int64, error) {
	if b == nil {
		return 0, brokenTrack{fmt.Errorf("%w: missing stts", ErrBadMP4)}
	}
	n, p, err := tableEntries("stts", b, 8)
	if err != nil {
		return 0, err
	}
	if n == 0 && len(dts) > 0 {
		return 0, brokenTrack{fmt.Errorf("%w: stts has no entries for %d frames", ErrBadMP4, len(dts))}
	}
	var t, delta int64
	i := 0
	for e := 0; e < n && i < len(dts); e++ {
		cnt, d := be32(p, 8*e), int64(int32(be32(p, 8*e+4)))
		if d < 0 {
			d = 1 // FFmpeg's fix for corrupt negative durations
		}
		delta = d
		for ; cnt > 0 && i < len(dts); cnt-- {
			dts[i] = t
			t += delta
			i++
		}
	}
	for ; i < len(dts); i++ {
		dts[i] = t
		t += delta
	}
	return t, nil
}

// addCtts adds the composition offsets of a ctts box (signed in both
// versions, as FFmpeg reads them) to the decode times in pts and returns
// how many frames it covers, whether FFmpeg keeps the box and its
// dts_shift: the largest negated negative offset of an entry but the last
// two. No box, no entries, or an offset beyond ±2^28 in an entry but the
// last two (which makes FFmpeg drop the table) mean zero offsets.
func addCtts(b []byte, pts []int64) (int, bool, int64, error) {
	if b == nil {
		return 0, false, 0, nil
	}
	n, p, err := tableEntries("ctts", b, 8)
	if err != nil || n == 0 {
		return 0, false, 0, err
	}
	var shift int64
	for e := 0; e+2 < n; e++ {
		off := int64(int32(be32(p, 8*e+4)))
		if off > 1<<28 || off < -(1<<28) {
			return 0, false, 0, nil
		}
		shift = max(shift, -off)
	}
	i := 0
	for e := 0; e < n && i < len(pts); e++ {
		cnt, off := be32(p, 8*e), int64(int32(be32(p, 8*e+4)))
		for ; cnt > 0 && i < len(pts); cnt-- {
			pts[i] += off
			i++
		}
	}
	return i, true, shift, nil
}

// info assembles the VideoInfo: the moov frames as FFmpeg indexes them
// under the edit list, then the fragments' frames.
func (tr *mp4Track) info(container string, movieTimescale uint32) (*VideoInfo, error) {
	v := &VideoInfo{
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
		return nil, fmt.Errorf("%w: the edit list leaves no frames of the video track", ErrBadMP4)
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

// timeOffset is what FFmpeg subtracts from the composition times when it
// does not apply the edit list frame by frame (fragmented files): the
// media time of the first non-empty edit, less the duration of a leading
// empty edit (only the first entry counts as one).
func (tr *mp4Track) timeOffset(movieTimescale uint32) int64 {
	var empty uint64
	start := 0
	var mediaTime int64
	for i, e := range tr.edits {
		switch {
		case i == 0 && e.mediaTime == -1:
			empty, start = e.dur, 1
		case i == start && e.mediaTime >= 0:
			mediaTime = e.mediaTime
		}
	}
	if movieTimescale == 0 {
		return mediaTime
	}
	return mediaTime - rescale(empty, tr.timescale, movieTimescale)
}

// rescale converts a duration of movie-timescale ticks to track ticks,
// rounding to nearest as av_rescale does; it saturates at 2^62 so that
// sums of a few stay in range.
func rescale(d uint64, trackTS, movieTS uint32) int64 {
	const limit = 1 << 62
	hi, lo := bits.Mul64(d, uint64(trackTS))
	lo, carry := bits.Add64(lo, uint64(movieTS/2), 0)
	hi += carry
	if hi >= uint64(movieTS) {
		return limit
	}
	q, _ := bits.Div64(hi, lo, uint64(movieTS))
	return int64(min(q, limit))
}

// editIndexResult is the moov part of the track as FFmpeg indexes it:
// the sample behind each packet, the packet's pts, whether FFmpeg
// discards its frame (its composition time lies outside the edit), and
// the stream duration; frames[shown:] are the packets after the last one
// an edit shows.
type editIndexResult struct {
	frames   []int
	pts      []int64
	discard  []bool
	duration int64
	shown    int
}

// editIndex applies the edit list to the moov frames as FFmpeg 5.1's
// mov_fix_index does (advanced edit lists, its default). Each non-empty
// edit contributes the frames from the last keyframe whose composition
// time is at or before the edit's media time up to the second keyframe
// after the edit's end (the first when there is no ctts); FFmpeg
// discards those whose composition time lies outside the edit. The frames
// get new decode times: consecutive from the edit's start on the
// presentation timeline, counted from the first frame the edit shows,
// earlier ones (the pre-roll) counting back from it. A frame's pts is its
// new decode time plus its composition offset, less the smallest such pts
// of the shown frames when that is positive (net of leading empty edits),
// so that the first shown frame has pts 0 — not the edit's media time,
// which need not fall on a frame. The duration is that of all the edits,
// capped by mdhd's.
func (tr *mp4Track) editIndex(key []bool, movieTimescale uint32) (editIndexResult, error) {
	n := len(key)
	var r editIndexResult
	var dts []int64 // new decode times, parallel to r.frames
	var entryEnd, empty int64
	minPTS := int64(-1)
	nonEmpty := false
	budget := 4 * MaxVideoFrames // bounds the work a forged elst can cause
	for _, e := range tr.edits {
		dur := rescale(e.dur, tr.timescale, movieTimescale)
		counter := entryEnd
		entryEnd = min(entryEnd+dur, 1<<62)
		if !nonEmpty && e.mediaTime == -1 {
			empty += dur
			continue
		}
		nonEmpty = true
		start := tr.editStart(e.mediaTime, key, false, &budget)
		if start < 0 {
			start = tr.editStart(e.mediaTime, key, true, &budget)
		}
		start = max(start, 0)
		end := e.mediaTime + dur
		shown := false
		pre := len(dts) // the pre-roll before the first shown frame starts here
		keyAfter := false
		for i := start; i < n; i++ {
			if budget--; budget < 0 || len(r.frames) >= MaxVideoFrames {
				return r, fmt.Errorf("%w: the edit list (%d entries) lists more than %d frames", ErrBadMP4, len(tr.edits), MaxVideoFrames)
			}
			fd := dur
			if i+1 < n {
				fd = tr.dts[i+1] - tr.dts[i]
			}
			cts, ctts := tr.pts[i], tr.pts[i]-tr.dts[i]
			inside := cts >= e.mediaTime && cts < end
			if inside {
				r.shown = len(r.frames) + 1
				if p := counter + ctts; minPTS < 0 {
					minPTS = p
				} else {
					minPTS = min(minPTS, p)
				}
				if !shown {
					shown = true
					// The pre-roll ends where this frame starts.
					t := counter
					for j := len(dts) - 1; j >= pre; j-- {
						t -= tr.dts[r.frames[j]+1] - tr.dts[r.frames[j]]
						dts[j] = t
					}
				}
			}
			r.frames = append(r.frames, i)
			r.discard = append(r.discard, !inside)
			dts = append(dts, counter)
			if shown {
				counter += fd
			}
			if cts+fd >= end && key[i] {
				if tr.hasCtts && !keyAfter {
					// Trailing B-frames after this keyframe may still
					// belong to the edit: stop at the next one.
					keyAfter = true
					continue
				}
				break
			}
		}
	}
	shift := max(minPTS-empty, 0)
	r.pts = make([]int64, len(dts))
	for j, i := range r.frames {
		r.pts[j] = dts[j] + tr.pts[i] - tr.dts[i] - shift
	}
	r.duration = entryEnd
	return r, nil
}

// editStart finds the frame FFmpeg starts an edit at (find_prev_closest_index):
// the last frame whose decode time is at or before mediaTime, moved back
// to a keyframe unless any is set, then, with a ctts table, further back
// to a keyframe whose composition time is at or before mediaTime. It
// returns -1 when there is none.
func (tr *mp4Track) editStart(mediaTime int64, key []bool, any bool, budget *int) int {
	n := len(key)
	// Binary search as ff_index_search_timestamp does, backwards.
	a, b := -1, n
	if n > 0 && tr.dts[n-1] < mediaTime {
		a = n - 1
	}
	for b-a > 1 {
		m := (a + b) / 2
		if tr.dts[m] >= mediaTime {
			b = m
		}
		if tr.dts[m] <= mediaTime {
			a = m
		}
	}
	m := a
	for !any && m >= 0 && !key[m] {
		m--
		*budget--
	}
	if m < 0 {
		return -1
	}
	for i := m; i > 0 && tr.dts[i] == tr.dts[i-1]; i-- {
		if any || key[i-1] {
			m = i - 1
		}
		*budget--
	}
	if !tr.hasCtts {
		return m
	}
	for m >= 0 && m < tr.nCtts && !(tr.pts[m] <= mediaTime && key[m]) {
		m--
		*budget--
	}
	return m
}
