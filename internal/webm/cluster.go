package webm

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/datahelix/datahelix/internal/video"
)

// isLevel1 reports whether id is a child of Segment, which ends a cluster
// of unknown size.
func isLevel1(id uint32) bool {
	switch id {
	case mkvClusterID, mkvCuesID, mkvSeekHeadID, mkvInfoID, mkvTracksID, mkvChaptersID, mkvTagsID, mkvAttachmentsID, ebmlHeaderID, mkvSegmentID:
		return true
	}
	return false
}

// cluster reads the video blocks of one cluster and returns how many bytes
// of b it used (all of them unless the cluster has unknown size). open is
// true for a cluster of unknown size, and for one cut short by the end of
// the file: either ends at its first incomplete element.
func (s *mkvScan) cluster(b []byte, open bool) (int, error) {
	var base int64
	dropped := false // FFmpeg resyncs to the next cluster: the rest is lost
	it := ebmlIter{b: b}
	for {
		rest := it.b
		id, body, _, ok := it.next()
		if !ok {
			if it.err != nil && open && len(rest) > 0 {
				return len(b), nil // truncated live stream: stop here
			}
			if it.err != nil {
				return 0, it.err
			}
			return len(b), nil
		}
		if open && isLevel1(id) {
			return len(b) - len(rest), nil
		}
		if dropped {
			continue
		}
		var err error
		switch id {
		case mkvClusterTimeID:
			base = int64(min(ebmlUint(body), math.MaxInt64/4))
		case mkvSimpleBlockID:
			dropped, err = s.block(body, base, -1, 0)
		case mkvBlockGroupID:
			if blk := child32(body, mkvBlockID); blk != nil {
				key := 0
				if child32(body, mkvReferenceBlock) == nil {
					key = 1
				}
				dropped, err = s.block(blk, base, key, ebmlUint(child32(body, mkvBlockDuration)))
			}
		}
		if err != nil {
			return 0, err
		}
	}
}

// block records the frames of one (Simple)Block if it belongs to the video
// track, as FFmpeg's matroska_parse_block turns it into packets. key is
// 1 or 0 for a BlockGroup (by its ReferenceBlock), -1 for a SimpleBlock
// (its flags say); dur is the BlockGroup's BlockDuration (0 for none). It
// returns drop when FFmpeg would stop reading the cluster here: a block
// of a track Tracks does not list, or video laced wrongly.
func (s *mkvScan) block(b []byte, base int64, key int, dur uint64) (drop bool, err error) {
	track, n, ok := ebmlVint(b)
	if !ok || !s.tracks[track] {
		return true, nil
	}
	if len(b) <= n+3 || track != s.track.number {
		return false, nil // FFmpeg skips a block without payload
	}
	rel := int64(int16(binary.BigEndian.Uint16(b[n:])))
	flags := b[n+2]
	sizes, ok := mkvLaces(b[n+3:], flags)
	if !ok {
		return true, nil
	}
	frames := len(sizes)
	if s.blocks+frames > video.MaxFrames {
		return false, fmt.Errorf("%w: more than %d video frames", ErrFormat, video.MaxFrames)
	}
	s.blocks += frames
	if key < 0 {
		key = int(flags >> 7)
	}
	// The lace timing of matroska_parse_block: the block's duration (its
	// BlockDuration, else DefaultDuration per frame) split evenly, in
	// wrapping unsigned arithmetic as there; a frame after a lace of no
	// duration has no timestamp, and SampleFrames must not pick it. A
	// block before time 0 (the leading B-frames of an open GOP that
	// ffmpeg -ss -c copy cut) has none either: all its frames are
	// Discarded.
	bd := min(dur, math.MaxInt64)
	if bd == 0 {
		bd = s.track.defaultDuration * uint64(frames) / s.tcs
	}
	abs, u := base+rel, uint64(frames)
	pts := uint64(abs) - s.delayTicks()
	timed := abs >= 0
	for i := 0; i < frames; i++ {
		if key == 1 && i == 0 {
			s.info.Keyframes = append(s.info.Keyframes, s.info.Frames)
		}
		if !timed {
			s.info.Discarded = append(s.info.Discarded, s.info.Frames)
		}
		size := uint32(min(sizes[i]+s.track.stripped, math.MaxUint32))
		s.info.FrameBytes = append(s.info.FrameBytes, size)
		s.info.FramePTS = append(s.info.FramePTS, int64(pts))
		s.info.Bytes += int64(size)
		s.info.Frames++
		if lace := bd*uint64(i+1)/u - bd*uint64(i)/u; lace != 0 && timed {
			pts += lace
		} else {
			timed = false
		}
	}
	return false, nil
}

// delayTicks is the track's CodecDelay in timecode ticks, rounded to the
// nearest as FFmpeg's av_rescale_q rounds it.
func (s *mkvScan) delayTicks() uint64 {
	d := s.track.codecDelay
	if d == 0 {
		return 0
	}
	q, r := d/s.tcs, d%s.tcs
	if r >= s.tcs-r {
		q++
	}
	return min(q, math.MaxInt64/4)
}

// mkvLaces splits the payload of a block into its frames' sizes by the
// lacing of its flags (bits 0x06: none, Xiph, fixed-size or EBML), with
// the checks of FFmpeg's matroska_parse_laces; ok is false for a lacing
// FFmpeg rejects.
func mkvLaces(p []byte, flags byte) (sizes []int, ok bool) {
	lacing := flags >> 1 & 3
	if lacing == 0 {
		return []int{len(p)}, true
	}
	if len(p) == 0 {
		return nil, false
	}
	count := int(p[0]) + 1
	p = p[1:]
	sizes = make([]int, count)
	switch lacing {
	case 1: // Xiph: each size but the last as a run of 255s and a final byte
		total := 0
		for i := 0; i < count-1; i++ {
			for {
				if len(p) <= total {
					return nil, false
				}
				c := int(p[0])
				p = p[1:]
				sizes[i] += c
				total += c
				if c != 0xff {
					break
				}
			}
		}
		if len(p) < total {
			return nil, false
		}
		sizes[count-1] = len(p) - total
	case 2: // fixed-size
		if len(p)%count != 0 {
			return nil, false
		}
		for i := range sizes {
			sizes[i] = len(p) / count
		}
	case 3: // EBML: the first size, then signed differences
		v, n, ok := ebmlVint(p)
		if !ok || v > math.MaxInt32 {
			return nil, false
		}
		p = p[n:]
		sizes[0] = int(v)
		total := int64(v)
		for i := 1; i < count-1; i++ {
			d, n, ok := ebmlVint(p)
			if !ok {
				return nil, false
			}
			p = p[n:]
			next := int64(sizes[i-1]) + int64(d) - (1<<(7*n-1) - 1)
			if next < 0 || next > math.MaxInt32 {
				return nil, false
			}
			sizes[i] = int(next)
			total += next
		}
		if int64(len(p)) < total {
			return nil, false
		}
		sizes[count-1] = len(p) - int(total)
	}
	return sizes, true
}
