package decoding

import (
	"context"
	"encoding/hex"
	"fmt"
	"math"
	"math/big"
	"sort"

	"github.com/datahelix/datahelix/internal/av"
	"github.com/datahelix/datahelix/internal/video"
)

// videoStats is what decoding a clip or a task cost.
type videoStats struct {
	frames  int // frames FFmpeg decoded
	missed  int // targets filled with a frame of another timestamp
	damaged int // packets with damage the decoder found (av.Stats.DamagedPackets), and undecodable targets
	refed   int // of frames, those decoded again for missed targets (redecodeMissed)
}

// decodeVideo decodes the sampled frames of the clip in data (targets,
// from ClipTargets) into dst, the clip's [F,S,S,3] tensor (F from
// ClipFrames): one task from
// video.PlanTasks, DecodeVideoTask. A clip with fewer than F frames repeats
// frames to fill every slot, spread evenly in presentation order.
func (d *Decoder) decodeVideo(ctx context.Context, s *Sample, targets []int, data []byte, v *VideoInfo, dst []byte) (videoStats, error) {
	f := d.ClipFrames(len(targets))
	cfg := d.clipConfig(s, v)
	if len(targets) == 0 {
		return videoStats{}, fmt.Errorf("%w: the record lists no frames", ErrCorrupt)
	}
	var total videoStats
	for _, task := range video.PlanTasks(v, targets, 1) {
		st, err := d.videoTask(ctx, cfg, data, v, task, dst)
		total.frames += st.frames
		total.missed += st.missed
		total.damaged += st.damaged
		if err != nil {
			return total, err
		}
	}
	video.Spread(dst, f, cfgPlane(cfg), len(targets))
	return total, nil
}

// DecodeVideoTask decodes one task of a clip: it seeks to the task's
// keyframe (unless that is the first frame), decodes forward, seeking
// again only when a later keyframe lies between what was decoded and the
// next target, and writes each target frame as S x S RGB into dst at
// slot*S*S*3. A leading picture of an open GOP (shown before its
// keyframe) is decoded from the keyframe before, as video.PlanTasks plans:
// also when it is the task's first target and Keyframe is its own. A
// target FFmpeg did not output after a seek to a keyframe is decoded
// again from the keyframe before (redecodeMissed). dst is the sample's
// [F,S,S,3] tensor; tasks of one clip write disjoint slots, so several
// goroutines may fill one tensor at once. data is the clip's bytes and v
// its record. It returns how many packets the decoder found damaged
// (Output.Damaged; av.Stats.DamagedPackets), plus the targets before the
// first keyframe that FFmpeg decoded without output, in a stream that
// does not begin with a keyframe. A task may decode into the next task's
// first group of pictures, so a damaged packet there counts in both: the
// tasks' sum is at least the whole clip's count, and is more than 0
// exactly when that one is.
//
// With per-frame timing in v, a target is its exact pts. Without it (a
// record that only estimates the frame count), target i is the time
// v.FrameTime(i) and the frame shown at that time is written; seeks then
// use the demuxer's own keyframe index.
func (d *Decoder) DecodeVideoTask(ctx context.Context, data []byte, v *VideoInfo, task video.Task, dst []byte) (damaged int, err error) {
	ctx, cancel := d.deadline(ctx)
	defer cancel()
	st, err := d.videoTask(ctx, d.cfg, data, v, task, dst)
	return st.damaged, err
}

// DecodeClipTask is DecodeVideoTask for the clip of sample s, with its
// transform (Options.Transform): the task's frames get the sample's crop
// and flip. Tasks must be planned over ClipTargets.
func (d *Decoder) DecodeClipTask(ctx context.Context, s *Sample, v *VideoInfo, task video.Task, dst []byte) (damaged int, err error) {
	if v == nil || v.Member < 0 || v.Member >= len(s.Members) {
		return 0, fmt.Errorf("%w: record has no video member", ErrNoPayload)
	}
	ctx, cancel := d.deadline(ctx)
	defer cancel()
	st, err := d.videoTask(ctx, d.clipConfig(s, v), s.Members[v.Member].Data, v, task, dst)
	return st.damaged, err
}

// videoTask decodes one task with the av configuration cfg (d.cfg, or a
// clip's with its transform).
func (d *Decoder) videoTask(ctx context.Context, cfg av.Config, data []byte, v *VideoInfo, task video.Task, dst []byte) (videoStats, error) {
	if v == nil || v.Frames <= 0 || v.Timescale == 0 || v.Timescale > math.MaxInt32 {
		return videoStats{}, fmt.Errorf("%w: the record has no frames or no timescale", ErrCorrupt)
	}
	if len(task.Targets) != len(task.Slots) {
		return videoStats{}, fmt.Errorf("decode: task has %d targets and %d slots", len(task.Targets), len(task.Slots))
	}
	if task.Keyframe < 0 || task.Keyframe >= v.Frames {
		return videoStats{}, fmt.Errorf("decode: task keyframe %d outside %d frames", task.Keyframe, v.Frames)
	}
	plane := cfgPlane(cfg)
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
	exact := v.PerFrame()
	sort.SliceStable(order, func(a, b int) bool {
		return v.FrameTime(task.Targets[order[a]]) < v.FrameTime(task.Targets[order[b]])
	})
	// frames[i] is the decode-order frame of targets[i].
	targets, frames := make([]av.Target, 0, len(order)), make([]int, 0, len(order))
	for _, i := range order {
		f := task.Targets[i]
		targets = append(targets, av.Target{PTS: v.FrameTime(f), Slot: task.Slots[i]})
		frames = append(frames, f)
	}
	var runs []int
	if exact {
		starts := make([]int, len(frames))
		for i, f := range frames {
			starts[i] = v.DecodeStart(f)
		}
		runs = planSeeks(v, targets, frames, starts, task.Keyframe)
	} else {
		for i := range targets {
			targets[i].Seek = av.SeekAuto
		}
	}
	cfg.SkipNonRef = exact
	tb := av.Rational{Num: 1, Den: int(v.Timescale)}
	st, err := av.DecodeTargets(ctx, data, cfg, tb, targets, dst)
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
	if exact && st.Missed > 0 && !st.ReadError {
		// Best effort: unless the deadline passed, a second pass that
		// fails leaves the first one's frames in the slots it did not
		// reach, and its count.
		again, redone, err := d.redecodeMissed(ctx, cfg, data, v, targets, frames, runs, st, dst)
		vs.frames += again.FramesDecoded
		vs.refed += again.FramesDecoded
		vs.damaged += again.DamagedPackets
		if err != nil && ctx.Err() != nil {
			return vs, err
		}
		if err == nil {
			vs.missed += again.Missed - redone
			st.ReadError = again.ReadError
		}
	}
	if st.ReadError && vs.missed > 0 {
		return vs, fmt.Errorf("%w: stream ends early (%d sampled frames missing)", ErrCorrupt, vs.missed)
	}
	return vs, nil
}

// planSeeks sets the seeks of targets, sorted by pts, where
// video.PlanTasks simulates them: frames[i] is the decode-order frame of
// targets[i] and starts[i] the keyframe decoding must start from to
// output it (video.Track.DecodeStart). Before the first target it seeks to first, or
// to starts[0] when that is earlier (a leading picture of first), unless
// that is frame 0, where a fresh decoder starts; then to starts[i] when
// that keyframe lies after every frame fed so far or before the keyframe
// of the current run (which cannot output frame i). It returns the
// keyframe each target's run started from, or continued from.
func planSeeks(v *VideoInfo, targets []av.Target, frames, starts []int, first int) []int {
	runs := make([]int, len(targets))
	fed, run := -1, 0 // last decode-order frame fed; keyframe of the current run
	for i := range targets {
		f, k := frames[i], starts[i]
		switch {
		case i == 0:
			run = min(first, k)
			if run > 0 {
				targets[i].Seek, targets[i].SeekPTS = av.SeekTo, v.FramePTS[run]
			}
			fed = run
		case k > fed || k < run:
			targets[i].Seek, targets[i].SeekPTS = av.SeekTo, v.FramePTS[k]
			fed, run = k, k
		default:
			// Decoding on. Past an open GOP's keyframe, for its leading
			// pictures, the run goes on as that keyframe's, as
			// video.PlanTasks splits it.
			run = max(run, k)
		}
		fed = max(fed, f)
		runs[i] = run
	}
	return runs
}

// redecodeMissed decodes again, from the keyframe before their run's,
// the targets DecodeTargets filled with a frame of another time (Got in
// the time base first.TimeBase) although their run started at a
// keyframe with one before it; frames, runs and the targets are
// videoTask's. FFmpeg 5.1's H.264 decoder, decoding from a seek to a
// keyframe that is not an IDR picture (an open GOP's I-frame with a
// recovery point), outputs a frame decoded before that keyframe was
// output only if it outputs it before draining at the end of the
// stream: from a seek into a short last GOP, it drops the clip's last
// frames. Decoding through that keyframe from the one before, without a
// seek, outputs them. Nothing is decoded again for a clip that missed
// no target. first is the first pass's stats; the second decodes within
// what the first left of the task's limits on frames and packets. It
// returns the stats of the second pass and how many targets it decoded
// again.
func (d *Decoder) redecodeMissed(ctx context.Context, cfg av.Config, data []byte, v *VideoInfo, targets []av.Target, frames, runs []int, first av.Stats, dst []byte) (av.Stats, int, error) {
	var again []av.Target
	var againFrames, starts []int
	var index []int // the position in targets of each of again
	for i, t := range targets {
		k := sort.SearchInts(v.Keyframes, runs[i])
		if k == 0 || cmpTime(t.PTS, v.Timescale, t.Got, first.TimeBase) == 0 {
			continue
		}
		again = append(again, av.Target{PTS: t.PTS, Slot: t.Slot})
		againFrames = append(againFrames, frames[i])
		starts = append(starts, v.Keyframes[k-1])
		index = append(index, i)
	}
	if len(again) == 0 {
		return av.Stats{}, 0, nil
	}
	planSeeks(v, again, againFrames, starts, starts[0])
	// The two passes share the task's limits on frames and packets.
	cfg.SkipNonRef = true
	cfg.MaxFrames -= first.FramesDecoded
	cfg.MaxPackets -= first.Packets
	if cfg.MaxFrames <= 0 || cfg.MaxPackets <= 0 {
		return av.Stats{}, 0, nil
	}
	st, err := av.DecodeTargets(ctx, data, cfg, av.Rational{Num: 1, Den: int(v.Timescale)}, again, dst)
	for j, i := range index {
		targets[i].Got = again[j].Got
	}
	return st, len(again), err
}

// cmpTime compares pts/timescale seconds with got in tb exactly
// (pts*Den against got*Num*timescale): -1 when pts is earlier, 0 when
// they are equal, +1 when it is later.
func cmpTime(pts int64, timescale uint32, got int64, tb av.Rational) int {
	a := new(big.Int).Mul(big.NewInt(pts), big.NewInt(int64(tb.Den)))
	b := new(big.Int).Mul(big.NewInt(got), big.NewInt(int64(tb.Num)*int64(timescale)))
	return a.Cmp(b)
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
		if cmpTime(t.PTS, timescale, t.Got, tb) < 0 {
			n++ // FFmpeg output a later frame
		}
	}
	return n
}

// frameMD5s decodes every frame of the clip in data and returns one
// lower-case hex MD5 per frame, in the order the decoder outputs them
// (presentation order), over the frame's planes in its native pixel format
// without padding: the md5 column of `ffmpeg -i FILE -f framemd5 -`.
func frameMD5s(ctx context.Context, data []byte, lim Limits) ([]string, error) {
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
