package decode

import (
	"context"
	"encoding/hex"
	"fmt"
	"math"
	"math/big"
	"sort"

	"github.com/datahelix/datahelix/decode/av"
)

// videoStats is what decoding a clip or a task cost.
type videoStats struct {
	frames  int // frames FFmpeg decoded
	missed  int // targets filled with a frame of another timestamp
	damaged int // packets with damage the decoder found (av.Stats.DamagedPackets), and undecodable targets
}

// decodeVideo decodes the F sampled frames of the clip in data into dst,
// the clip's [F,S,S,3] tensor: SampleFrames, one task from
// PlanVideoTasks, DecodeVideoTask. A clip with fewer than F frames repeats
// frames to fill every slot, spread evenly in presentation order.
func (d *Decoder) decodeVideo(ctx context.Context, data []byte, v *VideoInfo, dst []byte) (videoStats, error) {
	f := d.opts.Frames
	targets := SampleFrames(v, f)
	if len(targets) == 0 {
		return videoStats{}, fmt.Errorf("%w: the record lists no frames", ErrCorrupt)
	}
	var total videoStats
	for _, task := range PlanVideoTasks(v, targets, 1) {
		st, err := d.videoTask(ctx, data, v, task, dst)
		total.frames += st.frames
		total.missed += st.missed
		total.damaged += st.damaged
		if err != nil {
			return total, err
		}
	}
	d.SpreadFrames(dst, len(targets))
	return total, nil
}

// SpreadFrames completes the tensor of a clip for which SampleFrames
// returned n < F frames: once its tasks have filled slots 0..n-1, it
// repeats them over all F slots, in presentation order and evenly (slot k
// takes frame k*n/F), as Decode does. It does nothing when n >= F.
func (d *Decoder) SpreadFrames(dst []byte, n int) {
	f, plane := d.opts.Frames, d.opts.Size*d.opts.Size*3
	if n <= 0 || n >= f || len(dst) < f*plane {
		return
	}
	// From the back, so that every source slot (k*n/f <= k) is read before
	// it is overwritten.
	for k := f - 1; k >= 0; k-- {
		if src := k * n / f; src != k {
			copy(dst[k*plane:(k+1)*plane], dst[src*plane:(src+1)*plane])
		}
	}
}

// DecodeVideoTask decodes one task of a clip: it seeks to the task's
// keyframe (unless that is the first frame), decodes forward, seeking
// again only when a later keyframe lies between what was decoded and the
// next target, and writes each target frame as S x S RGB into dst at
// slot*S*S*3. dst is the sample's [F,S,S,3] tensor; tasks of one clip
// write disjoint slots, so several goroutines may fill one tensor at once.
// data is the clip's bytes and v its record. It returns how many packets
// the decoder found damaged (Output.Damaged; av.Stats.DamagedPackets),
// plus the targets before the first keyframe that FFmpeg decoded without
// output, in a stream that does not begin with a keyframe. A task may
// decode into the next task's first group of pictures, so a damaged
// packet there counts in both: the tasks' sum is at least the whole
// clip's count, and is more than 0 exactly when that one is.
//
// With per-frame timing in v, a target is its exact pts. Without it (a
// record that only estimates the frame count), target i is the time
// v.FrameTime(i) and the frame shown at that time is written; seeks then
// use the demuxer's own keyframe index.
func (d *Decoder) DecodeVideoTask(ctx context.Context, data []byte, v *VideoInfo, task VideoTask, dst []byte) (damaged int, err error) {
	ctx, cancel := d.deadline(ctx)
	defer cancel()
	st, err := d.videoTask(ctx, data, v, task, dst)
	return st.damaged, err
}

func (d *Decoder) videoTask(ctx context.Context, data []byte, v *VideoInfo, task VideoTask, dst []byte) (videoStats, error) {
	if v == nil || v.Frames <= 0 || v.Timescale == 0 || v.Timescale > math.MaxInt32 {
		return videoStats{}, fmt.Errorf("%w: the record has no frames or no timescale", ErrCorrupt)
	}
	if len(task.Targets) != len(task.Slots) {
		return videoStats{}, fmt.Errorf("decode: task has %d targets and %d slots", len(task.Targets), len(task.Slots))
	}
	if task.Keyframe < 0 || task.Keyframe >= v.Frames {
		return videoStats{}, fmt.Errorf("decode: task keyframe %d outside %d frames", task.Keyframe, v.Frames)
	}
	plane := d.opts.Size * d.opts.Size * 3
	order := make([]int, len(task.Targets))
	for i, f := range task.Targets {
		if f < 0 || f >= v.Frames {
			return videoStats{}, fmt.Errorf("decode: task target %d outside %d frames", f, v.Frames)
		}
		if s := task.Slots[i]; s < 0 || (s+1)*plane > len(dst) {
			return videoStats{}, fmt.Errorf("decode: task slot %d outside a %d-byte tensor", s, len(dst))
		}
		order[i] = i
	}
	exact := v.perFrame()
	sort.SliceStable(order, func(a, b int) bool {
		return v.FrameTime(task.Targets[order[a]]) < v.FrameTime(task.Targets[order[b]])
	})
	// Seek where PlanVideoTasks simulated a seek: to the task's keyframe
	// first (unless it is frame 0, where a fresh decoder starts), then to a
	// target's keyframe when it lies after everything decoded so far or the
	// target lies before the current run.
	// frames[i] is the decode-order frame of targets[i].
	targets, frames := make([]av.Target, 0, len(order)), make([]int, 0, len(order))
	fed, run := -1, 0 // last decode-order frame fed; keyframe of the current run
	for n, i := range order {
		f := task.Targets[i]
		t := av.Target{PTS: v.FrameTime(f), Slot: task.Slots[i]}
		k := keyframeBefore(v.Keyframes, f)
		switch {
		case !exact:
			t.Seek = av.SeekAuto
		case n == 0:
			if task.Keyframe > 0 {
				t.Seek, t.SeekPTS = av.SeekTo, v.FramePTS[task.Keyframe]
			}
			fed, run = task.Keyframe, task.Keyframe
		case k > fed || f < run:
			t.Seek, t.SeekPTS = av.SeekTo, v.FramePTS[k]
			run = k
		}
		fed = max(fed, f)
		targets = append(targets, t)
		frames = append(frames, f)
	}
	cfg := d.cfg
	cfg.SkipNonRef = exact
	st, err := av.DecodeTargets(ctx, data, cfg, av.Rational{Num: 1, Den: int(v.Timescale)}, targets, dst)
	vs := videoStats{frames: st.FramesDecoded, damaged: st.DamagedPackets}
	if exact {
		vs.missed = st.Missed
	}
	if err != nil {
		return vs, err
	}
	if exact && len(v.Keyframes) > 0 {
		vs.damaged += undecodable(targets, frames, v.Keyframes[0], st.TimeBase, v.Timescale)
	}
	if st.ReadError && vs.missed > 0 {
		return vs, fmt.Errorf("%w: stream ends early (%d sampled frames missing)", ErrCorrupt, st.Missed)
	}
	return vs, nil
}

// undecodable counts the targets decoded from the start of the stream,
// before any seek, that precede its first keyframe (frames[i] is target
// i's decode-order frame, key the first keyframe) and for which FFmpeg
// output neither their frame nor an earlier one: those of a stream that
// does not start with a keyframe (cut without re-encoding), whose first
// frames refer to frames cut away. FFmpeg decodes those frames without
// output and their slots hold the first frame it outputs; this count is
// the only sign of it. The leading pictures of a first keyframe that
// starts an open GOP, decoded after it, are not counted: FFmpeg drops
// them too, but a stream may start there. A target's Got is in the
// stream's time base tb, its PTS in 1/timescale ticks.
func undecodable(targets []av.Target, frames []int, key int, tb av.Rational, timescale uint32) int {
	n := 0
	for i, t := range targets {
		if t.Seek != av.NoSeek {
			break
		}
		if frames[i] >= key {
			continue
		}
		// t.Got > t.PTS, compared exactly: Got*Num/Den > PTS/timescale.
		got := new(big.Int).Mul(big.NewInt(t.Got), big.NewInt(int64(tb.Num)*int64(timescale)))
		if got.Cmp(new(big.Int).Mul(big.NewInt(t.PTS), big.NewInt(int64(tb.Den)))) > 0 {
			n++
		}
	}
	return n
}

// keyframeBefore returns the last keyframe at or before decode-order frame
// f (0 when none is listed).
func keyframeBefore(keys []int, f int) int {
	i := sort.SearchInts(keys, f+1)
	if i == 0 {
		return 0
	}
	return keys[i-1]
}

// FrameMD5s decodes every frame of the clip in data and returns one
// lower-case hex MD5 per frame, in the order the decoder outputs them
// (presentation order), over the frame's planes in its native pixel format
// without padding: the md5 column of `ffmpeg -i FILE -f framemd5 -`.
func FrameMD5s(ctx context.Context, data []byte, lim Limits) ([]string, error) {
	lim = lim.withDefaults()
	hs, _, err := av.FrameMD5s(ctx, data, lim.avConfig(1, 1))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", classify(err), err)
	}
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = hex.EncodeToString(h.MD5[:])
	}
	return out, nil
}
