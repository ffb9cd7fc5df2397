package mp4

import (
	"fmt"
	"slices"

	"github.com/datahelix/datahelix/internal/video"
)

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
		return brokenTrack{fmt.Errorf("%w: video track of %d frames without chunk offsets (stco/co64)", ErrFormat, n)}
	}
	if counts[2] == 0 {
		return brokenTrack{fmt.Errorf("%w: video track of %d frames without stsc entries", ErrFormat, n)}
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
		return 0, nil, fmt.Errorf("%w: truncated %s", ErrFormat, typ)
	}
	n, room := uint64(be32(p, 0)), uint64(len(p)-4)/uint64(rec)
	if n > room {
		return 0, nil, fmt.Errorf("%w: %s counts %d entries, but its %d bytes of %d-byte entries hold at most %d",
			ErrFormat, typ, n, len(p)-4, rec, room)
	}
	return int(n), p[4:], nil
}

// readStsz returns per-frame sizes from an stsz box.
func readStsz(b []byte) ([]uint32, int, error) {
	_, _, p, ok := fullBox(b)
	if !ok || len(p) < 8 {
		return nil, 0, fmt.Errorf("%w: truncated stsz", ErrFormat)
	}
	constant, n := be32(p, 0), uint64(be32(p, 4))
	if n > video.MaxFrames {
		return nil, 0, fmt.Errorf("%w: stsz counts %d frames, more than %d", ErrFormat, n, video.MaxFrames)
	}
	if constant == 0 && n > uint64(len(p)-8)/4 {
		return nil, 0, fmt.Errorf("%w: stsz has %d sizes in %d bytes", ErrFormat, n, len(p)-8)
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
		return nil, 0, fmt.Errorf("%w: truncated stz2", ErrFormat)
	}
	field, n := uint64(p[3]), uint64(be32(p, 4))
	if field != 4 && field != 8 && field != 16 {
		return nil, 0, fmt.Errorf("%w: stz2 field size %d", ErrFormat, field)
	}
	if n > video.MaxFrames || n > uint64(len(p)-8)*8/field {
		return nil, 0, fmt.Errorf("%w: stz2 has %d sizes in %d bytes", ErrFormat, n, len(p)-8)
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
		return 0, brokenTrack{fmt.Errorf("%w: missing stts", ErrFormat)}
	}
	n, p, err := tableEntries("stts", b, 8)
	if err != nil {
		return 0, err
	}
	if n == 0 && len(dts) > 0 {
		return 0, brokenTrack{fmt.Errorf("%w: stts has no entries for %d frames", ErrFormat, len(dts))}
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
