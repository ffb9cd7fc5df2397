package mp4

import (
	"fmt"
	"math/bits"

	"github.com/datahelix/datahelix/internal/video"
)

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
		return fmt.Errorf("%w: elst has %d entries in %d bytes", ErrFormat, n, len(p))
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
	budget := 4 * video.MaxFrames // bounds the work a forged elst can cause
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
			if budget--; budget < 0 || len(r.frames) >= video.MaxFrames {
				return r, fmt.Errorf("%w: the edit list (%d entries) lists more than %d frames", ErrFormat, len(tr.edits), video.MaxFrames)
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
