package mp4

import (
	"fmt"
	"math"
	"math/bits"

	"github.com/datahelix/datahelix/internal/video"
)

// Fragment flag bits (ISO/IEC 14496-12, 8.8.7 and 8.8.8).
const (
	tfhdBaseDataOffset      = 0x1
	tfhdSampleDescIndex     = 0x2
	tfhdDefaultDuration     = 0x8
	tfhdDefaultSize         = 0x10
	tfhdDefaultFlags        = 0x20
	trunDataOffset          = 0x1
	trunFirstSampleFlags    = 0x4
	trunDuration            = 0x100
	trunSize                = 0x200
	trunFlags               = 0x400
	trunCTSOffset           = 0x800
	sampleIsNonSync         = 0x10000
	sampleDependsOnOthers   = 0x1000000
	trunPerSampleFieldsMask = trunDuration | trunSize | trunFlags | trunCTSOffset
)

// readTrex keeps the fragment defaults of the track from mvex/trex.
func (tr *mp4Track) readTrex(mvex []byte) {
	it := boxIter{b: mvex}
	for {
		typ, body, ok := it.next()
		if !ok {
			return
		}
		if string(typ[:]) != "trex" {
			continue
		}
		_, _, p, ok := fullBox(body)
		if ok && len(p) >= 20 && be32(p, 0) == tr.id {
			tr.trexDuration, tr.trexSize, tr.trexFlags = be32(p, 8), be32(p, 12), be32(p, 16)
			return
		}
	}
}

// fragment appends the samples of the track's traf boxes in one moof.
func (tr *mp4Track) fragment(moof []byte) error {
	it := boxIter{b: moof}
	for {
		typ, traf, ok := it.next()
		if !ok {
			return nil
		}
		if string(typ[:]) == "traf" {
			if err := tr.traf(traf); err != nil {
				return err
			}
		}
	}
}

// traf reads one track fragment: its tfhd defaults, the tfdt base decode
// time and every trun.
func (tr *mp4Track) traf(traf []byte) error {
	_, flags, p, ok := fullBox(child(traf, "tfhd"))
	if !ok || len(p) < 4 || be32(p, 0) != tr.id {
		return nil // another track's fragment
	}
	dur, size, sflags := tr.trexDuration, tr.trexSize, tr.trexFlags
	q := p[4:]
	for _, f := range []struct {
		bit uint32
		n   int
		dst *uint32
	}{{tfhdBaseDataOffset, 8, nil}, {tfhdSampleDescIndex, 4, nil}, {tfhdDefaultDuration, 4, &dur}, {tfhdDefaultSize, 4, &size}, {tfhdDefaultFlags, 4, &sflags}} {
		if flags&f.bit == 0 {
			continue
		}
		if len(q) < f.n {
			return fmt.Errorf("%w: truncated tfhd", ErrFormat)
		}
		if f.dst != nil {
			*f.dst = be32(q, 0)
		}
		q = q[f.n:]
	}
	t := tr.endDTS
	if v, _, p, ok := fullBox(child(traf, "tfdt")); ok {
		if v == 1 && len(p) >= 8 {
			t = int64(be64(p, 0))
		} else if v == 0 && len(p) >= 4 {
			t = int64(be32(p, 0))
		}
	}
	if len(tr.bytes) == 0 {
		tr.firstDTS = t
	}
	it := boxIter{b: traf}
	for {
		typ, body, ok := it.next()
		if !ok {
			return it.err
		}
		if string(typ[:]) != "trun" {
			continue
		}
		var err error
		if t, err = tr.trun(body, t, dur, size, sflags); err != nil {
			return err
		}
		tr.endDTS = t
	}
}

// trun appends the samples of one track run starting at decode time t and
// returns the decode time after them.
func (tr *mp4Track) trun(body []byte, t int64, dur, size, sflags uint32) (int64, error) {
	_, flags, p, ok := fullBox(body)
	if !ok || len(p) < 4 {
		return t, fmt.Errorf("%w: truncated trun", ErrFormat)
	}
	n := uint64(be32(p, 0))
	p = p[4:]
	first, hasFirst := sflags, false
	if flags&trunDataOffset != 0 {
		if len(p) < 4 {
			return t, fmt.Errorf("%w: truncated trun", ErrFormat)
		}
		p = p[4:]
	}
	if flags&trunFirstSampleFlags != 0 {
		if len(p) < 4 {
			return t, fmt.Errorf("%w: truncated trun", ErrFormat)
		}
		first, hasFirst = be32(p, 0), true
		p = p[4:]
	}
	rec := 4 * uint64(bits.OnesCount32(flags&trunPerSampleFieldsMask))
	if uint64(len(tr.bytes))+n > video.MaxFrames {
		return t, fmt.Errorf("%w: fragments hold more than %d frames", ErrFormat, video.MaxFrames)
	}
	if rec > 0 && n > uint64(len(p))/rec {
		return t, fmt.Errorf("%w: trun has %d samples in %d bytes", ErrFormat, n, len(p))
	}
	for i := uint64(0); i < n; i++ {
		d, s, f, c := dur, size, sflags, int32(0)
		if i == 0 && hasFirst {
			f = first
		}
		if flags&trunDuration != 0 {
			d, p = be32(p, 0), p[4:]
		}
		if flags&trunSize != 0 {
			s, p = be32(p, 0), p[4:]
		}
		if flags&trunFlags != 0 {
			f, p = be32(p, 0), p[4:]
		}
		if flags&trunCTSOffset != 0 {
			// Signed in both versions, as FFmpeg reads it.
			c, p = int32(be32(p, 0)), p[4:]
		}
		tr.bytes = append(tr.bytes, s)
		tr.dts = append(tr.dts, t)
		tr.pts = append(tr.pts, t+int64(c))
		// FFmpeg raises dts_shift at every negative offset of a run
		// (to 2^31-1 at -2^31).
		tr.dtsShift = max(tr.dtsShift, min(-int64(c), math.MaxInt32))
		// A sync sample neither is flagged non-sync nor depends on others
		// (FFmpeg's rule).
		tr.key = append(tr.key, f&(sampleIsNonSync|sampleDependsOnOthers) == 0)
		t += int64(d)
	}
	return t, nil
}
