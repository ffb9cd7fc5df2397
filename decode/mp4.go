package decode

import (
	"fmt"
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

	// Edit list: the media time the presentation starts at, and the
	// leading empty edits in movie timescale ticks.
	mediaTime  int64
	emptyEdits uint64

	// trex defaults for fragments.
	trexDuration, trexSize, trexFlags uint32

	bytes []uint32 // per frame, decode order
	// pts holds each frame's composition time (decode time plus
	// composition offset) before the edit-list shift.
	pts []int64
	// firstDTS and endDTS bound the decode timeline: the first frame's
	// decode time and the time after the last frame.
	firstDTS, endDTS int64
	key              []bool // fragment sync flags (moov tracks use stss)
	stss             []int  // 0-based sync frame indices from stss
	noStss           bool   // no stss box: every frame is a sync frame
}

// ParseMP4 reads the cost features of the first video track of an MP4/MOV
// file held in memory: codec and dimensions from the stsd entry, timescale
// and duration from mdhd, per-frame sizes (stsz/stz2), timing (stts, ctts,
// the edit list) and sync frames (stss), and the samples of movie fragments
// (moof/traf/trun with tfhd and trex defaults). The moov box may come
// before or after mdat. FramePTS follows FFmpeg's mov demuxer: the
// composition time minus the first edit's media time plus any leading
// empty edit, so a frame's value equals the pts ffprobe reports for it.
// Edit lists with more than one non-empty segment are applied as if they
// had only the first.
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
	tr, movieTimescale, err := parseMoov(moov)
	if err != nil {
		return nil, err
	}
	for _, moof := range moofs {
		if err := tr.fragment(moof); err != nil {
			return nil, err
		}
	}
	if len(tr.bytes) == 0 {
		return nil, fmt.Errorf("%w: video track has no frames", ErrBadMP4)
	}
	container := "mp4"
	if brand == "qt  " {
		container = "mov"
	}
	return tr.info(container, movieTimescale), nil
}

// parseMoov finds the first video track in moov and reads its sample
// table. It also returns the movie timescale from mvhd.
func parseMoov(moov []byte) (*mp4Track, uint32, error) {
	var movieTimescale uint32
	var tr *mp4Track
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
			}
		case "trak":
			if tr == nil {
				t, err := parseTrak(body)
				if err != nil {
					return nil, 0, err
				}
				tr = t
			}
		case "mvex":
			mvex = body
		}
	}
	if it.err != nil {
		return nil, 0, it.err
	}
	if tr == nil {
		return nil, 0, fmt.Errorf("%w: no video track", ErrBadMP4)
	}
	tr.readTrex(mvex)
	return tr, movieTimescale, nil
}

// parseTrak reads a trak box; it returns nil, nil for a track that is not
// video.
func parseTrak(trak []byte) (*mp4Track, error) {
	mdia := child(trak, "mdia")
	if _, _, p, ok := fullBox(child(mdia, "hdlr")); !ok || len(p) < 8 || string(p[4:8]) != "vide" {
		return nil, nil
	}
	tr := &mp4Track{}
	if v, _, p, ok := fullBox(child(trak, "tkhd")); ok {
		if v == 1 && len(p) >= 20 {
			tr.id = be32(p, 16)
		} else if v == 0 && len(p) >= 12 {
			tr.id = be32(p, 8)
		}
	}
	v, _, p, ok := fullBox(child(mdia, "mdhd"))
	switch {
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
	stbl := child(child(mdia, "minf"), "stbl")
	if err := tr.readStsd(child(stbl, "stsd")); err != nil {
		return nil, err
	}
	if err := tr.sampleTable(stbl); err != nil {
		return nil, err
	}
	return tr, nil
}

// readEdits keeps the first non-empty edit's media time and the duration
// of the empty edits before it.
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
	for i := uint64(0); i < n; i++ {
		e := p[i*rec:]
		var dur uint64
		var mt int64
		if v == 1 {
			dur, mt = be64(e, 0), int64(be64(e, 8))
		} else {
			dur, mt = uint64(be32(e, 0)), int64(int32(be32(e, 4)))
		}
		if mt == -1 {
			tr.emptyEdits += dur
			continue
		}
		tr.mediaTime = mt
		return nil
	}
	tr.emptyEdits = 0 // only empty edits: nothing to shift
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
	for _, t := range []struct {
		typ string
		rec int
	}{{"stco", 4}, {"co64", 8}, {"stsc", 12}} {
		if b := child(stbl, t.typ); b != nil {
			if _, _, err := tableEntries(t.typ, b, t.rec); err != nil {
				return err
			}
		}
	}
	tr.bytes, tr.pts = sizes, make([]int64, n)
	end, err := readStts(child(stbl, "stts"), tr.pts)
	if err != nil {
		return err
	}
	tr.endDTS = end
	if err := addCtts(child(stbl, "ctts"), tr.pts); err != nil {
		return err
	}
	stss := child(stbl, "stss")
	if stss == nil {
		tr.noStss = true
		return nil
	}
	cnt, p, err := tableEntries("stss", stss, 4)
	if err != nil {
		return err
	}
	tr.stss = make([]int, 0, min(cnt, n))
	for i := 0; i < cnt; i++ {
		if k := int(be32(p, 4*i)) - 1; k >= 0 && k < n {
			tr.stss = append(tr.stss, k)
		}
	}
	if !slices.IsSorted(tr.stss) {
		slices.Sort(tr.stss)
	}
	tr.stss = slices.Compact(tr.stss)
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
		return 0, fmt.Errorf("%w: missing stts", ErrBadMP4)
	}
	n, p, err := tableEntries("stts", b, 8)
	if err != nil {
		return 0, err
	}
	if n == 0 && len(dts) > 0 {
		// FFmpeg refuses such a track too ("missing mandatory atoms").
		return 0, fmt.Errorf("%w: stts has no entries for %d frames", ErrBadMP4, len(dts))
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
// versions, as FFmpeg reads them) to the decode times in pts; no box means
// zero offsets.
func addCtts(b []byte, pts []int64) error {
	if b == nil {
		return nil
	}
	n, p, err := tableEntries("ctts", b, 8)
	if err != nil {
		return err
	}
	i := 0
	for e := 0; e < n && i < len(pts); e++ {
		cnt, off := be32(p, 8*e), int64(int32(be32(p, 8*e+4)))
		for ; cnt > 0 && i < len(pts); cnt-- {
			pts[i] += off
			i++
		}
	}
	return nil
}

// info assembles the VideoInfo, applying the edit-list shift to the
// composition times.
func (tr *mp4Track) info(container string, movieTimescale uint32) *VideoInfo {
	n := len(tr.bytes)
	shift := -tr.mediaTime
	if tr.emptyEdits > 0 && movieTimescale > 0 {
		shift += int64(tr.emptyEdits * uint64(tr.timescale) / uint64(movieTimescale))
	}
	v := &VideoInfo{
		Container:  container,
		Codec:      tr.codec,
		Width:      tr.width,
		Height:     tr.height,
		Timescale:  tr.timescale,
		Duration:   int64(tr.duration),
		Frames:     n,
		FrameBytes: tr.bytes,
		FramePTS:   tr.pts,
	}
	if shift != 0 {
		for i := range v.FramePTS {
			v.FramePTS[i] += shift
		}
	}
	switch {
	case tr.key != nil:
		for i, k := range tr.key {
			if k {
				v.Keyframes = append(v.Keyframes, i)
			}
		}
	case tr.noStss:
		v.Keyframes = make([]int, n)
		for i := range v.Keyframes {
			v.Keyframes[i] = i
		}
	default:
		v.Keyframes = tr.stss
	}
	if len(v.Keyframes) == 0 {
		v.Keyframes = []int{0} // unknown: decoding must start at the first frame
	}
	if v.Duration <= 0 {
		// Fragmented files leave mdhd's duration at 0: use the decode
		// timeline.
		v.Duration = tr.endDTS - tr.firstDTS
	}
	for _, b := range v.FrameBytes {
		v.Bytes += int64(b)
	}
	return v
}
