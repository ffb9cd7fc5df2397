package mp4

import (
	"fmt"
	"math"
	"slices"
)

// The fields of the boxes the kind-box walk (mp4kind.go) reads as FFmpeg
// 5.1 reads them: a track's ID (tkhd), its timescale (mdhd), and the
// references of a sidx, which may make FFmpeg stop its walk.

// tkhd reads the track ID of a tkhd box whose body is at offset at of
// the file, for the last stream (mov_read_tkhd).
func (w *kindWalk) tkhd(at int) error {
	if len(w.streams) == 0 {
		return nil
	}
	s := &w.streams[len(w.streams)-1]
	if s.id != noTrackID {
		return w.refuse("a tkhd box for a track that has one (track ID %d)", s.id)
	}
	r := fileReader{b: w.file, off: at}
	if r.uint(4)>>24 == 1 { // version and flags
		r.off += 16
	} else {
		r.off += 8
	}
	s.id = uint32(r.uint(4))
	return nil
}

// mdhd reads an mdhd box whose body is at offset at of the file, for the
// last stream (mov_read_mdhd).
func (w *kindWalk) mdhd(at int) error {
	if len(w.streams) == 0 {
		return nil
	}
	s := &w.streams[len(w.streams)-1]
	if s.timescale {
		return w.refuse("an mdhd box for a track whose timescale is set (\"Multiple mdhd?\")")
	}
	r := fileReader{b: w.file, off: at}
	if v := r.uint(1); v > 1 {
		return w.refuse("an mdhd box of version %d (FFmpeg reads versions 0 and 1)", v)
	}
	s.timescale = true
	return nil
}

// sidx reads a sidx box whose body, of n bytes, is at offset at of the
// file, as mov_read_sidx does: it sets w.indexed when the box indexes
// the file to its end or to its mfra.
func (w *kindWalk) sidx(at, n int) error {
	r := fileReader{b: w.file, off: at}
	version := r.uint(4) >> 24 // and flags
	if version > 1 {
		return nil
	}
	id := uint32(r.uint(4))
	if !slices.ContainsFunc(w.streams, func(s walkStream) bool { return s.id == id }) {
		return nil
	}
	if ts := r.uint(4); ts == 0 || ts > math.MaxInt32 {
		return w.refuse("a sidx box of timescale %d", ts)
	}
	field := 4
	if version == 1 {
		field = 8
	}
	pts := int64(r.uint(field))
	end, ok := addInt64(int64(at+n), int64(r.uint(field)))
	if !ok {
		return w.refuse("a sidx box whose offsets overflow 64 bits")
	}
	r.off += 2 // reserved
	refs := r.uint(2)
	if refs == 0 {
		return w.refuse("a sidx box without references")
	}
	for range refs {
		if r.off >= len(w.file) {
			// The rest read as zeros, adding nothing and referring to
			// no sidx box.
			break
		}
		if w.sidxRefs++; w.sidxRefs > maxSidxRefs {
			return fmt.Errorf("%w: %s has a sidx box past the %d references readKinds reads in a file (FFmpeg indexes each, for minutes with as many)", ErrFormat, w.path(), maxSidxRefs)
		}
		size, dur := r.uint(4), r.uint(4)
		if size&0x80000000 != 0 {
			return w.refuse("a sidx box referring to a sidx box (reference_type 1, which FFmpeg 5.1 does not read)")
		}
		r.off += 4 // SAP fields
		var ok1, ok2 bool
		end, ok1 = addInt64(end, int64(size))
		pts, ok2 = addInt64(pts, int64(dur))
		if !ok1 || !ok2 {
			return w.refuse("a sidx box whose offsets or times overflow 64 bits")
		}
	}
	size := int64(len(w.file))
	if end == size || end == size-int64(be32(w.file, len(w.file)-4)) {
		w.indexed = true
	}
	return nil
}

// addInt64 returns a+b and whether it does not overflow.
func addInt64(a, b int64) (int64, bool) {
	s := a + b
	return s, (s > a) == (b > 0)
}

// fileReader reads big-endian integers from b at offset off on, moving
// off past them, as FFmpeg's avio reads the fields of a box: past its end
// when it is short, and zero bytes past the end of the file.
type fileReader struct {
	b   []byte
	off int
}

// uint reads an n-byte integer, n at most 8.
func (r *fileReader) uint(n int) uint64 {
	var v uint64
	for range n {
		v <<= 8
		if r.off >= 0 && r.off < len(r.b) {
			v |= uint64(r.b[r.off])
		}
		r.off++
	}
	return v
}
