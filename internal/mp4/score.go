package mp4

import (
	"math"
	"math/bits"
)

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
