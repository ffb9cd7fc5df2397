package decode

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
)

// readKinds reads the kind boxes of an MP4/MOV file as FFmpeg 5.1's mov
// demuxer does (mov_read_kind) and returns, for each trak box of its first
// moov in order, whether one gives it a role FFmpeg reads as for the
// hearing or visually impaired (ff_mov_track_kind_table): the DASH role
// scheme with a caption or description value (ffmpeg writes such a box in
// the trak's udta for those dispositions).
//
// FFmpeg reads a kind box wherever its box walk (mov_read_default) finds
// one, and gives it to the last stream begun before it. The walk reads
// the top-level boxes of the file (its input is seekable), and descends
// into the first moov and the boxes it reads as containers: trak, mdia,
// minf, stbl, dinf, edts, udta, tref, mvex, moof, traf, sinf, schi and
// ilst; meta from its hdlr box on (mov_read_meta looks for the hdlr type
// 4 bytes at a time); wave of over 8 bytes once a stream exists (but for
// a few audio codecs, whose data it is); the boxes after the fields of a
// video track's sample entries (stsd), but for those of another type than
// the first that it skips. In a container other than the file and the
// moov, a trak or mdat box ends the container ("trak/mdat not at
// top-level"). So a kind box inside a trak (in its udta, tref, the sinf
// of a sample entry...) goes to that trak; one after the traks, in the
// moov (its udta, mvex, meta) or after it (a top-level kind, a moof), to
// the last trak; one before the first trak to none. A trak at the top
// level of the file is a stream too, which parseMoov does not list: kind
// boxes after it go to no listed track. readKinds does not follow FFmpeg
// into the sample entries of other tracks, nor into a moov inside another
// box.
//
// The walk ends early in a file a sidx box indexes whole (DASH, CMAF):
// once FFmpeg has read the moov, an mdat box of at least one byte (at the
// top level or in the moov) and such a sidx (frag_index.complete), it
// stops right after the box that completed the three, wherever it is
// (mov_read_default), and picks the stream before it reads further. A
// sidx counts (mov_read_sidx) when of version 0 or 1, its reference ID is
// the track ID (tkhd) of a stream begun before it (-1, as unsigned, for
// one without a tkhd), and the offset after its references (the box's
// end plus its first offset and referenced sizes) is the file's end, or
// the start of its last N bytes, N being the file's last 4 bytes as a
// 32-bit size (an mfra box; FFmpeg does not check that it is one). FFmpeg
// reads a box's fields past its end when it is short, and zeros past the
// file's end; so does readKinds. It does not follow FFmpeg into the mfra
// it reads first when a free box before the moov says "Anevia", nor, in
// the sample entries of a trak at the top level, into the boxes after a
// stop.
//
// FFmpeg refuses the whole file, whichever track it would decode, for a
// kind box of under 6 bytes anywhere, and for one after the first stream
// that it cannot read: of a version or flags other than 0 ("Unsupported
// 'kind' box"), or whose scheme and value do not both end with a NUL byte
// inside the box. It refuses it too for a tkhd box for a stream (the
// last begun) that has a track ID (a second tkhd in a trak); for an mdhd
// box for one whose timescale is set (a second mdhd in a trak, or one
// after the trak, whose end set it) or of a version over 1, whatever the
// track's type; for a sidx that would count but for a timescale of 0 or
// over 2^31-1, no references, a reference to a sidx (reference_type 1)
// or offsets or times overflowing 64 bits; and for containers nested more
// than maxBoxDepth deep ("Atoms too deeply nested"). readKinds fails with
// ErrBadMP4 for them too, but for an mdhd after a trak FFmpeg keeps
// without a timescale ("missing mandatory atoms, broken header").
func readKinds(file []byte) ([]bool, error) {
	w := kindWalk{file: file, cur: noStream, streams: make([]walkStream, 0, 4)}
	err := w.walk(file, 0, [4]byte{}, 0)
	return w.impaired, err
}

// maxBoxDepth is how deep FFmpeg 5.1 nests the containers it reads
// (mov_read_default), the file being depth 0, the moov 1 and its traks 2:
// it refuses a file with a container deeper.
const maxBoxDepth = 10

// Values of kindWalk.cur other than the index of a trak of the moov.
const (
	noStream    = -1 // FFmpeg has begun no stream yet
	otherStream = -2 // the last stream is one parseMoov does not list
)

// noTrackID is the track ID of a stream without a tkhd: FFmpeg's -1,
// which it compares as unsigned with a sidx's reference ID.
const noTrackID = math.MaxUint32

// kindWalk is the state of readKinds' walk: the flags it returns, the
// streams begun, the one a kind box goes to and whether that is a video
// track, what ends the walk, and the containers it is in.
type kindWalk struct {
	file     []byte
	impaired []bool
	streams  []walkStream // every stream begun, in the moov or not
	cur      int
	video    bool
	// moovRead, mdatRead and indexed are FFmpeg's found_moov, found_mdat
	// and frag_index.complete: the walk ends once all three are set.
	moovRead, mdatRead, indexed bool
	// stack[:frames] names the containers the walk is in, for errors
	// only: at most maxBoxDepth+1, the last one refused.
	stack  [maxBoxDepth + 1]boxFrame
	frames int
}

// walkStream is what the walk keeps of a stream FFmpeg has begun: its
// track ID, and whether its timescale is set (by an mdhd box, or as its
// trak ends).
type walkStream struct {
	id        uint32
	timescale bool
}

// boxFrame is a container of the walk: its type; trak, the number (from
// 1) of a trak of the moov, 0 for one at the top level; entry, whether
// the frame is the sample entries of an stsd.
type boxFrame struct {
	typ   [4]byte
	trak  int
	entry bool
}

// path names the container the walk is in, for an error.
func (w *kindWalk) path() string {
	if w.frames == 0 {
		return "the top level of the file"
	}
	var b strings.Builder
	for i, f := range w.stack[:w.frames] {
		if i > 0 {
			b.WriteByte('/')
		}
		switch {
		case f.entry:
			b.WriteString("stsd entry")
		case string(f.typ[:]) == "trak" && f.trak == 0:
			b.WriteString("the trak at the top level")
		case string(f.typ[:]) == "trak":
			fmt.Fprintf(&b, "trak %d", f.trak)
		default:
			b.Write(f.typ[:])
		}
	}
	return b.String()
}

// push enters a container: the walk, at a depth of at most maxBoxDepth,
// is about to walk its boxes.
func (w *kindWalk) push(f boxFrame) {
	w.stack[w.frames] = f
	w.frames++
}

// done reports whether FFmpeg has stopped its walk.
func (w *kindWalk) done() bool { return w.moovRead && w.mdatRead && w.indexed }

// refuse returns the error of a box FFmpeg refuses the file for, in the
// container the walk is in; what describes the box.
func (w *kindWalk) refuse(what string, args ...any) error {
	return fmt.Errorf("%w: %s has %s, for which FFmpeg 5.1 refuses the file", ErrBadMP4, w.path(), fmt.Sprintf(what, args...))
}

// walk reads the boxes of b, at offset off of the file, a container of
// type parent (zero for the file) at FFmpeg's nesting depth.
func (w *kindWalk) walk(b []byte, off int, parent [4]byte, depth int) error {
	if depth > maxBoxDepth {
		return fmt.Errorf("%w: %s is nested more than %d boxes deep, for which FFmpeg 5.1 refuses the file", ErrBadMP4, w.path(), maxBoxDepth)
	}
	top := parent == [4]byte{}
	inMoov := string(parent[:]) == "moov"
	it := boxIter{b: b, off: off}
	for !w.done() {
		typ, body, ok := it.next()
		if !ok {
			return nil
		}
		at := it.off - len(body) // of the body in the file
		var err error
		switch string(typ[:]) {
		case "kind":
			err = w.kind(body)
		case "sidx":
			err = w.sidx(at, len(body))
		case "tkhd":
			err = w.tkhd(at)
		case "mdhd":
			err = w.mdhd(at)
		case "mdat":
			if !top && !inMoov {
				return nil
			}
			w.mdatRead = w.mdatRead || len(body) > 0
		case "moov":
			if top && !w.moovRead {
				err = w.container(typ, body, at, depth)
				w.moovRead = true
			}
		case "trak":
			if !top && !inMoov {
				return nil
			}
			err = w.trak(body, at, inMoov, depth)
		case "dinf", "edts", "mdia", "minf", "stbl", "udta", "tref", "mvex", "moof", "traf", "sinf", "schi", "ilst":
			err = w.container(typ, body, at, depth)
		case "meta":
			for p := 0; len(body)-p > 8; p += 4 {
				if string(body[p:p+4]) == "hdlr" {
					// The boxes from the hdlr's size on; at p == 0 FFmpeg
					// reads the meta's own type as that size, and so one
					// box, the hdlr, to the end.
					from := len(body)
					if p > 0 {
						from = p - 4
					}
					err = w.container(typ, body[from:], at+from, depth)
					break
				}
			}
		case "wave":
			if w.cur != noStream && len(body) > 8 {
				err = w.container(typ, body, at, depth)
			}
		case "stsd":
			if w.video && w.cur != noStream {
				err = w.sampleEntries(body, at, depth+1)
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// container walks the boxes of body, at offset at of the file, a
// container of type typ inside the one at depth.
func (w *kindWalk) container(typ [4]byte, body []byte, at, depth int) error {
	if len(body) == 0 && depth < maxBoxDepth {
		return nil
	}
	w.push(boxFrame{typ: typ})
	err := w.walk(body, at, typ, depth+1)
	w.frames--
	return err
}

// trak begins a stream for a trak box of the moov (inMoov) or of the top
// level and walks its body, at offset at of the file.
func (w *kindWalk) trak(body []byte, at int, inMoov bool, depth int) error {
	w.streams = append(w.streams, walkStream{id: noTrackID})
	s := len(w.streams) - 1
	w.cur = otherStream
	f := boxFrame{typ: [4]byte{'t', 'r', 'a', 'k'}}
	if inMoov {
		w.impaired = append(w.impaired, false)
		w.cur = len(w.impaired) - 1
		f.trak = len(w.impaired)
	}
	w.video = trakIsVideo(body)
	w.push(f)
	err := w.walk(body, at, f.typ, depth+1)
	w.frames--
	// FFmpeg sets the timescale of a trak without an mdhd as it ends
	// (fix_timescale), but for a broken one.
	w.streams[s].timescale = true
	return err
}

// kind reads a kind box.
func (w *kindWalk) kind(body []byte) error {
	// FFmpeg checks the size before looking for a stream.
	if w.cur == noStream && len(body) >= 6 {
		return nil
	}
	imp, err := readKind(body)
	if err != nil {
		return w.refuse("a %v", err)
	}
	if w.cur >= 0 {
		w.impaired[w.cur] = w.impaired[w.cur] || imp
	}
	return nil
}

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

// trakIsVideo reports whether a trak's handler type (hdlr) is vide.
func trakIsVideo(trak []byte) bool {
	_, _, p, ok := fullBox(child(child(trak, "mdia"), "hdlr"))
	return ok && len(p) >= 8 && string(p[4:8]) == "vide"
}

// sampleEntries walks the boxes after the fields of the visual sample
// entries of an stsd box, at offset at of the file, at depth
// (ff_mov_read_stsd_entries): those of the first entry and of the later
// ones FFmpeg does not skip (mov_skip_multiple_stsd).
func (w *kindWalk) sampleEntries(stsd []byte, at, depth int) error {
	_, _, p, ok := fullBox(stsd)
	if !ok || len(p) < 4 {
		return nil
	}
	w.push(boxFrame{typ: [4]byte{'s', 't', 's', 'd'}, entry: true})
	defer func() { w.frames-- }()
	it := boxIter{b: p[4:], off: at + 8}
	var first [4]byte
	for i := range be32(p, 0) {
		typ, entry, ok := it.next()
		if !ok || w.done() {
			return nil
		}
		if i == 0 {
			first = typ
		} else if !stsdEntryRead(first, typ) {
			continue
		}
		// 78 bytes of fields (with no palette: FFmpeg reads one inline
		// for some depths of 8 bits or less), then boxes when over 8 bytes.
		if len(entry) > 78+8 {
			if err := w.walk(entry[78:], it.off-len(entry)+78, [4]byte{'s', 't', 's', 'd'}, depth); err != nil {
				return err
			}
		}
	}
	return nil
}

// stsdEntryRead reports whether FFmpeg 5.1 reads a later sample entry of
// type typ in an stsd whose first entry has type first, rather than skip
// it ("multiple fourcc not supported").
func stsdEntryRead(first, typ [4]byte) bool {
	switch {
	case first == typ, string(first[:]) == "AV1x" && string(typ[:]) == "AVup":
		return true
	}
	switch string(first[:]) {
	case "apcn", "apch", "dvpp", "dvcp", "jpeg":
		return true
	}
	return false
}

// readKind reads a kind box (version 0, flags 0, then a scheme and a value,
// each ended by a NUL) and reports whether FFmpeg reads it as a role for
// the hearing or visually impaired; scheme and value match by prefix, as
// av_strstart matches them. Its error describes the box.
func readKind(body []byte) (bool, error) {
	if len(body) < 6 {
		return false, fmt.Errorf("kind box of %d bytes, under the 6 of a version, flags and two NULs", len(body))
	}
	v, flags, p, _ := fullBox(body)
	if v != 0 || flags != 0 {
		return false, fmt.Errorf("kind box of version %d, flags %x (FFmpeg reads only version 0, flags 0)", v, flags)
	}
	scheme, rest, ok1 := bytes.Cut(p, []byte{0})
	value, _, ok2 := bytes.Cut(rest, []byte{0})
	if !ok1 || !ok2 {
		return false, errors.New("kind box whose scheme and value do not both end with a NUL byte")
	}
	return bytes.HasPrefix(scheme, []byte("urn:mpeg:dash:role:2011")) &&
		(bytes.HasPrefix(value, []byte("caption")) || bytes.HasPrefix(value, []byte("description"))), nil
}
