package mp4

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
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
// 4 bytes at a time); wave of over 8 bytes once a stream exists, but for
// a few audio codecs (kindWalk.wave); the boxes after the fields of a
// video track's sample entries (stsd), but for those it skips
// (kindWalk.stsd). A box running past its container is cut to it
// (walkIter). In a container other than the file and the moov, a trak or
// mdat box ends the container ("trak/mdat not at top-level"). So a kind
// box inside a trak (in its udta, tref, the sinf of a sample entry...)
// goes to that trak; one after the traks, in the moov (its udta, mvex,
// meta) or after it (a top-level kind, a moof), to the last trak; one
// before the first trak to none. A trak at the top level of the file is
// a stream too, which parseMoov does not list: kind boxes after it go to
// no listed track. readKinds does not follow FFmpeg into the sample
// entries of other tracks, nor into a moov inside another box, nor into
// the cover art streams of an ilst (mov_read_covr), nor into a free or
// hoov box it reads as a moov.
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
// or offsets or times overflowing 64 bits; for containers nested more
// than maxBoxDepth deep ("Atoms too deeply nested"); for the stsd boxes
// kindWalk.stsd describes, in any track; for a wave box of over 2^30
// bytes; and, opened by package av, for a trak box that would begin
// stream maxStreams+1. readKinds fails with ErrFormat for them too, but
// for an mdhd after a trak FFmpeg keeps without a timescale ("missing
// mandatory atoms, broken header"). It fails too for sidx boxes of over
// maxSidxRefs references in all, which FFmpeg takes minutes to read.
func readKinds(file []byte) ([]bool, error) {
	w, err := walkKinds(file)
	return w.impaired, err
}

// walkKinds runs readKinds' walk of file and returns its state.
func walkKinds(file []byte) (kindWalk, error) {
	w := kindWalk{file: file, cur: noStream, streams: make([]walkStream, 0, 4)}
	err := w.walk(file, 0, [4]byte{}, 0)
	return w, err
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

// maxStreams is the max_streams option with which package av opens a file
// (internal/av/av.c, avformat_open_input): FFmpeg refuses a file whose walk
// begins a stream more ("Number of streams exceeds max_streams"), at its
// trak box, and so does readKinds. This bounds the streams a sidx box
// looks its reference ID up in. TestMaxStreamsIsAV checks it against
// av.c.
const maxStreams = 16

// maxSidxRefs bounds the references of the sidx boxes readKinds reads in
// a file, counting those it reads inside the file only (past its end they
// read as zeros and change nothing, so readKinds stops there). A forged
// file makes FFmpeg read up to 65535 references from each sidx box of 32
// bytes, into the boxes after it; it then indexes each (update_frag_index)
// and takes minutes, past package av's deadline, for about a million.
// readKinds refuses a file with more.
const maxSidxRefs = 1 << 20

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
	// sidxRefs counts the sidx references read inside the file, up to
	// maxSidxRefs.
	sidxRefs int
	// stack[:frames] names the containers the walk is in, for errors
	// only: at most maxBoxDepth+1, the last one refused.
	stack  [maxBoxDepth + 1]boxFrame
	frames int
}

// walkStream is what the walk keeps of a stream FFmpeg has begun: its
// track ID, whether its timescale is set (by an mdhd box, or as its trak
// ends), and what its stsd box sets.
type walkStream struct {
	id        uint32
	timescale bool
	// stsd is whether an stsd box was read for the stream; tag is
	// FFmpeg's codec_tag: the type of the last sample entry it read (I420
	// for a visual one named "Planar Y'CbCr 8-bit 4:2:0"), zero before.
	stsd bool
	tag  [4]byte
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
	return fmt.Errorf("%w: %s has %s, for which FFmpeg 5.1 refuses the file", ErrFormat, w.path(), fmt.Sprintf(what, args...))
}

// walk reads the boxes of b, at offset off of the file, a container of
// type parent (zero for the file) at FFmpeg's nesting depth.
func (w *kindWalk) walk(b []byte, off int, parent [4]byte, depth int) error {
	if depth > maxBoxDepth {
		return fmt.Errorf("%w: %s is nested more than %d boxes deep, for which FFmpeg 5.1 refuses the file", ErrFormat, w.path(), maxBoxDepth)
	}
	top := parent == [4]byte{}
	inMoov := string(parent[:]) == "moov"
	it := walkIter{b: b, off: off}
	for !w.done() {
		typ, body, at, ok := it.next()
		if !ok {
			return nil
		}
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
			err = w.wave(body, at, depth)
		case "stsd":
			err = w.stsd(body, at, depth+1)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// walkIter reads the boxes of a container as mov_read_default does: a
// box whose size runs past the container is cut to it (FFmpeg reads it
// and goes on after it, where boxIter ends the walk), one of size 0 runs
// to the container's end, and the walk of the container ends at a box of
// under 8 bytes, at a 64-bit size that does not fit (or of under 16), and
// with under 8 bytes left.
type walkIter struct {
	b     []byte // the container's body, cut at the end of the file
	off   int    // the offset of b[0] in the file
	total int    // the bytes of b read
}

// next returns the next box's type, its body cut to the container, and
// the offset of the body in the file.
func (it *walkIter) next() (typ [4]byte, body []byte, at int, ok bool) {
	if it.total > len(it.b)-8 {
		return typ, nil, 0, false
	}
	size := int64(be32(it.b, it.total))
	copy(typ[:], it.b[it.total+4:it.total+8])
	it.total += 8
	if size == 1 && it.total+8 <= len(it.b) {
		// FFmpeg takes the 64-bit size as signed, less its 8 bytes.
		size = int64(binary.BigEndian.Uint64(it.b[it.total:]) - 8)
		it.total += 8
	}
	if size == 0 {
		size = int64(len(it.b) - it.total + 8)
	}
	if size < 0 { // a 64-bit size of under 8 bytes or over 2^63+7
		return typ, nil, 0, false
	}
	if size -= 8; size < 0 { // under 8 bytes: size 1 without room, a 64-bit one of under 16
		return typ, nil, 0, false
	}
	n := int(min(size, int64(len(it.b)-it.total)))
	body = it.b[it.total : it.total+n : it.total+n]
	at = it.off + it.total
	it.total += n
	return typ, body, at, true
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
	if len(w.streams) == maxStreams {
		return fmt.Errorf("%w: %s has a trak box that would be stream %d, over the %d of FFmpeg's max_streams with which package av opens files (it refuses the file: \"Number of streams exceeds max_streams\")",
			ErrFormat, w.path(), maxStreams+1, maxStreams)
	}
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

// trakIsVideo reports whether a trak's handler type (hdlr) is vide.
func trakIsVideo(trak []byte) bool {
	t, ok := handlerType(trak)
	return ok && string(t) == "vide"
}

// stsd reads an stsd box whose body is at offset at of the file, at
// depth, for the last stream (mov_read_stsd, ff_mov_read_stsd_entries),
// refusing the file as FFmpeg does, whatever the track's type: for a
// second stsd for the stream, an entry count under 1, over 1024 or over
// the box's size over 8, and an entry of under 8 bytes. It sets the
// stream's codec_tag, and walks the boxes after the fields of the visual
// sample entries FFmpeg reads: the first and the later ones it does not
// skip (mov_skip_multiple_stsd), until the walk ends. An entry runs from
// the end of the one before by its size, not cut to the stsd, but for a
// visual one shorter than the 78 bytes of fields FFmpeg reads after its
// header (86 when of 16 bytes or more; with no palette: FFmpeg reads one
// inline for some depths of 8 bits or less): the next one begins after
// them. readKinds reads the entries of other types by their sizes only.
// Of FFmpeg's refusals of an stsd whose entries run past the end of the
// file ("reached eof, corrupted STSD atom") it models only that of an
// entry header that does.
func (w *kindWalk) stsd(body []byte, at, depth int) error {
	if len(w.streams) == 0 {
		return nil
	}
	s := &w.streams[len(w.streams)-1]
	r := fileReader{b: w.file, off: at + 4} // after version and flags
	n := int32(r.uint(4))
	if n <= 0 || int(n) > len(body)/8 || n > 1024 {
		return w.refuse("an stsd box of %d entries in %d bytes (FFmpeg reads 1 to 1024 of 8 bytes or more: \"invalid STSD entries\")", n, len(body))
	}
	if s.stsd {
		return w.refuse("a second stsd box for a track (\"Duplicate stsd found in this track\")")
	}
	s.stsd = true
	w.push(boxFrame{typ: [4]byte{'s', 't', 's', 'd'}, entry: true})
	defer func() { w.frames-- }()
	for pos := r.off; n > 0; n-- {
		if w.done() {
			return nil
		}
		r := fileReader{b: w.file, off: pos}
		size := int(r.uint(4))
		if size <= 7 {
			return w.refuse("an entry of %d bytes, under the 8 of its header (\"invalid size\")", size)
		}
		if pos+8 > len(w.file) {
			return w.refuse("an entry whose header runs past the end of the file (\"reached eof, corrupted STSD atom\")")
		}
		var typ [4]byte
		copy(typ[:], w.file[pos+4:pos+8])
		next := pos + size
		if !stsdEntryRead(s.tag, typ) {
			pos = next
			continue
		}
		s.tag = typ
		if !w.video {
			pos = next
			continue
		}
		fields := pos + 16 // the visual fields, after the reserved bytes and data reference index
		if size < 16 {
			fields = pos + 8
		}
		// FFmpeg sets codec_tag I420 for this compressor name (a Pascal
		// string of at most 31 bytes), matching its first 25 bytes.
		const i420 = "Planar Y'CbCr 8-bit 4:2:0"
		if name := fields + 34; name+1+len(i420) <= len(w.file) && w.file[name] >= byte(len(i420)) &&
			string(w.file[name+1:name+1+len(i420)]) == i420 {
			s.tag = [4]byte{'I', '4', '2', '0'}
		}
		boxes := fields + 70
		if next-boxes > 8 && boxes < len(w.file) {
			if err := w.walk(w.file[boxes:min(next, len(w.file))], boxes, [4]byte{'s', 't', 's', 'd'}, depth); err != nil {
				return err
			}
		}
		pos = max(next, boxes)
	}
	return nil
}

// stsdEntryRead reports whether FFmpeg 5.1 reads a sample entry of type
// typ in a track of codec_tag tag (zero for the first entry it reads),
// rather than skip it ("multiple fourcc not supported").
func stsdEntryRead(tag, typ [4]byte) bool {
	switch {
	case tag == [4]byte{}, tag == typ, string(tag[:]) == "AV1x" && string(typ[:]) == "AVup":
		return true
	}
	switch string(tag[:]) {
	case "apcn", "apch", "dvpp", "dvcp", "jpeg":
		return true
	}
	return false
}

// wave reads a wave box whose body is at offset at of the file, at depth
// (mov_read_wave), for the last stream: FFmpeg refuses one of over 2^30
// bytes; it takes one of a QDM2, QDMC or Speex stream as the codec's data,
// so as one of an ALAC stream of 24 bytes or more unless it begins with a
// frma box that fits (readKinds takes the ALAC stream to have no codec
// data yet; with some, FFmpeg walks the boxes after the first 8 bytes);
// it walks the boxes of any other over 8 bytes.
func (w *kindWalk) wave(body []byte, at, depth int) error {
	if len(w.streams) == 0 {
		return nil
	}
	if len(body) > 1<<30 {
		return w.refuse("a wave box of %d bytes, over 2^30", len(body))
	}
	if len(body) <= 8 {
		return nil
	}
	typ := [4]byte{'w', 'a', 'v', 'e'}
	if w.video { // FFmpeg takes a video track's codec from its video tags
		return w.container(typ, body, at, depth)
	}
	switch tag := w.streams[len(w.streams)-1].tag; string(tag[:]) {
	case "QDM2", "QDMC", "spex", "SPXN", "ms\xa1\x09":
		return nil
	case "alac":
		if len(body) >= 24 {
			size := be32(body, 0)
			if string(body[4:8]) != "frma" || size < 8 || int(size) > len(body)-8 {
				return nil
			}
		}
	}
	return w.container(typ, body, at, depth)
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
