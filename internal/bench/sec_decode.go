package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/datahelix/datahelix/decode"
	"github.com/datahelix/datahelix/internal/av"
	"github.com/datahelix/datahelix/internal/bench/realrun"
	"github.com/datahelix/datahelix/internal/bench/report"
	"github.com/datahelix/datahelix/internal/bench/workload"
	"github.com/datahelix/datahelix/internal/decoding"
	"github.com/datahelix/datahelix/internal/gen"
	"github.com/datahelix/datahelix/internal/shard"
	"github.com/datahelix/datahelix/internal/shardindex"
)

// DecodePresets are the generator's video presets the decode section
// measures.
var DecodePresets = []string{"howto100m", "kinetics", "webvid", "panda70m", "activitynet"}

// Decode section settings: clips per preset (the first of the preset's
// seed-1 dataset) and decodes per clip and side (the fastest counts).
const (
	decodeClips  = 3
	decodeRepeat = 3
)

// FFmpegBench is what `ffmpeg -benchmark` reports about its run: user and
// system CPU time and real time of its decode loop, and the frames it
// wrote (-1 when it printed no frame count).
type FFmpegBench struct {
	User, System, Real time.Duration
	Frames             int
}

var (
	ffmpegBenchRE  = regexp.MustCompile(`bench: utime=([0-9.]+)s stime=([0-9.]+)s rtime=([0-9.]+)s`)
	ffmpegFramesRE = regexp.MustCompile(`frame=\s*(\d+)`)
)

// ParseFFmpegBench reads the -benchmark line (and the last frame count)
// of ffmpeg's standard error.
func ParseFFmpegBench(out []byte) (FFmpegBench, error) {
	m := ffmpegBenchRE.FindSubmatch(out)
	if m == nil {
		return FFmpegBench{}, fmt.Errorf("%w: no \"bench: utime=\" line in ffmpeg's output: %s", realrun.ErrReal, realrun.Tail(out, 300))
	}
	var f FFmpegBench
	for i, d := range []*time.Duration{&f.User, &f.System, &f.Real} {
		s, err := strconv.ParseFloat(string(m[i+1]), 64)
		if err != nil || s < 0 || s > 1e6 {
			return FFmpegBench{}, fmt.Errorf("%w: ffmpeg's benchmark line %q: bad time %q", realrun.ErrReal, m[0], m[i+1])
		}
		*d = time.Duration(s * float64(time.Second))
	}
	f.Frames = -1
	if all := ffmpegFramesRE.FindAllSubmatch(out, -1); len(all) > 0 {
		if n, err := strconv.Atoi(string(all[len(all)-1][1])); err == nil {
			f.Frames = n
		}
	}
	return f, nil
}

// decodeMeasure is one preset's sums over its clips (fastest of the
// repeats per clip and side).
type decodeMeasure struct {
	preset        string
	clips         int
	codecs        map[string]int
	frames        int // decoded by us, all clips
	ffFrames      int // written by ffmpeg (-1: not reported)
	ours, ffmpeg  time.Duration
	sampled       time.Duration // 8 frames through decode.Decoder
	sampledFrames int           // frames that decode decoded
}

// decodeDataset returns a generated dataset of at least n clips of preset
// with seed 1, one shard: the calibration's when bench calibrate made one
// (its first clips are the same), else a small one generated now.
func decodeDataset(ctx context.Context, re realrun.RealEnv, preset string, n int) (string, error) {
	base := filepath.Join(re.CacheDir, "bench", "data")
	suffix := gen.CacheName("-seed1")
	matches, _ := filepath.Glob(filepath.Join(base, preset+"-n*"+suffix))
	for _, m := range matches {
		k, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(filepath.Base(m), preset+"-n"), suffix))
		if err != nil || k < n {
			continue
		}
		if gen.Current(m) {
			return m, nil
		}
	}
	dir := filepath.Join(base, gen.CacheName(fmt.Sprintf("%s-n%d-seed1", preset, n)))
	t0 := time.Now()
	made, err := gen.Ensure(ctx, gen.Config{Preset: preset, Samples: n, Shards: 1, Seed: 1}, dir)
	if err != nil {
		return "", fmt.Errorf("bench: generate %s clips: %w", preset, err)
	}
	if made {
		re.Logf("decode: generated %d %s clips in %.0fs", n, preset, time.Since(t0).Seconds())
	}
	return dir, nil
}

// measureDecode decodes the first clips of one preset fully through
// av.DecodeAll (CPU time of this thread) and through `ffmpeg -threads 1`
// (its utime+stime), and sampled through decode.Decoder, alternating.
func measureDecode(ctx context.Context, re realrun.RealEnv, preset, tmp string) (decodeMeasure, error) {
	m := decodeMeasure{preset: preset, codecs: map[string]int{}}
	dir, err := decodeDataset(ctx, re, preset, decodeClips)
	if err != nil {
		return m, err
	}
	ds, err := decode.OpenDataset(dir, shardindex.Dir(re.CacheDir))
	if err != nil {
		return m, fmt.Errorf("bench: %w", err)
	}
	defer ds.Close()
	ffmpeg, err := exec.LookPath("ffmpeg")
	if err != nil {
		return m, fmt.Errorf("%w: ffmpeg: %v", realrun.ErrReal, err)
	}
	cfg := av.DefaultConfig()
	cfg.Timeout = 2 * time.Minute
	dec := decoding.NewDecoder(decoding.Options{Frames: decoding.DefaultFrames, Size: decoding.DefaultSize})
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	sh := shard.ShardsOf(ds)[0]
	for i := 0; i < sh.Len() && m.clips < decodeClips; i++ {
		smp, err := sh.ReadSample(i)
		if err != nil {
			return m, fmt.Errorf("bench: %w", err)
		}
		rec, err := decoding.ParseRecord(smp, decoding.Limits{})
		if err != nil {
			return m, fmt.Errorf("bench: sample %s of %s: %w", smp.Key, smp.Shard, err)
		}
		if rec.Video == nil {
			continue
		}
		data := smp.Members[rec.Video.Member].Data
		file := filepath.Join(tmp, smp.Members[rec.Video.Member].Name)
		if err := os.WriteFile(file, data, 0o644); err != nil {
			return m, fmt.Errorf("bench: %w", err)
		}
		var ours, ff, sampled time.Duration
		var frames, ffFrames, sampledFrames int
		for k := range decodeRepeat {
			var st av.Stats
			d, err := workload.CPUOf(func() (err error) { st, err = av.DecodeAll(ctx, data, cfg); return err })
			if err != nil {
				return m, fmt.Errorf("bench: full decode of %s in %s: %w", smp.Key, smp.Shard, err)
			}
			frames = st.FramesDecoded
			ctxRun, cancel := context.WithTimeout(ctx, 2*time.Minute)
			cmd := exec.CommandContext(ctxRun, ffmpeg, "-nostdin", "-benchmark", "-threads", "1", "-i", file, "-an", "-f", "null", "-")
			out, err := cmd.CombinedOutput()
			cancel()
			if err != nil && ctx.Err() != nil {
				return m, fmt.Errorf("bench: ffmpeg stopped: %w", context.Cause(ctx))
			}
			if err != nil {
				return m, realrun.CommandFailed(cmd, err, out, 300)
			}
			fb, err := ParseFFmpegBench(out)
			if err != nil {
				return m, err
			}
			var o *decode.Output
			dsm, err := workload.CPUOf(func() (err error) { o, err = dec.Decode(ctx, smp, rec); return err })
			if err != nil {
				return m, fmt.Errorf("bench: sampled decode: %w", err)
			}
			sampledFrames = o.DecodedFrames
			if k == 0 || d < ours {
				ours = d
			}
			if c := fb.User + fb.System; k == 0 || c < ff {
				ff = c
			}
			if k == 0 || dsm < sampled {
				sampled = dsm
			}
			ffFrames = fb.Frames
		}
		m.clips++
		m.codecs[rec.Video.Codec]++
		m.frames += frames
		if ffFrames < 0 || m.ffFrames < 0 {
			m.ffFrames = -1
		} else {
			m.ffFrames += ffFrames
		}
		m.ours += ours
		m.ffmpeg += ff
		m.sampled += sampled
		m.sampledFrames += sampledFrames
	}
	if m.clips == 0 {
		return m, fmt.Errorf("bench: %s holds no video clip", dir)
	}
	return m, nil
}

// decodeSection measures the decoder against ffmpeg on the same clips.
func decodeSection(ctx context.Context, _ *report.SectionEnv) (*report.Section, error) {
	re, err := realrun.CurrentRealEnv()
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "datahelix-decode-")
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	defer os.RemoveAll(tmp)
	var ms []decodeMeasure
	for _, p := range DecodePresets {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		re.Logf("decode: %s", p)
		m, err := measureDecode(ctx, re, p, tmp)
		if err != nil {
			return nil, err
		}
		ms = append(ms, m)
	}
	return decodeTable(ms), nil
}

// codecList prints a codec count map in name order: "h264 x2, vp9".
func codecList(c map[string]int) string {
	names := make([]string, 0, len(c))
	for n := range c {
		names = append(names, n)
	}
	slices.Sort(names)
	for i, n := range names {
		if c[n] > 1 {
			names[i] = fmt.Sprintf("%s x%d", n, c[n])
		}
	}
	return strings.Join(names, ", ")
}

// decodeTable builds the section from the per-preset sums; the headline
// is the ratio of our full decode to ffmpeg's over all clips.
func decodeTable(ms []decodeMeasure) *report.Section {
	s := &report.Section{Columns: []string{"preset", "clips", "codecs", "frames", "ours_ms", "ffmpeg_ms", "ours_over_ffmpeg", "sampled8_ms", "sampled8_frames", "sampled8_over_full"}}
	ms2 := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	var ours, ff, sampled time.Duration
	var mismatch []string
	for _, m := range ms {
		s.Rows = append(s.Rows, []any{m.preset, m.clips, codecList(m.codecs), m.frames, ms2(m.ours), ms2(m.ffmpeg), ratioOf(m.ours, m.ffmpeg),
			ms2(m.sampled), m.sampledFrames, ratioOf(m.sampled, m.ours)})
		ours += m.ours
		ff += m.ffmpeg
		sampled += m.sampled
		if m.ffFrames >= 0 && m.ffFrames != m.frames {
			mismatch = append(mismatch, fmt.Sprintf("%s: ffmpeg wrote %d frames, we decoded %d", m.preset, m.ffFrames, m.frames))
		}
	}
	s.Note = fmt.Sprintf("per clip the fastest of %d alternating runs: ours = av.DecodeAll, every frame, CPU time of the decoding thread; "+
		"ffmpeg = `ffmpeg -nostdin -benchmark -threads 1 -i FILE -an -f null -`, its utime+stime (audio left out, as DecodeAll does); "+
		"sampled8 = decode.Decoder.Decode: 8 frames sampled uniformly, resized to 224x224 RGB, the runtime's work per clip", decodeRepeat)
	if len(mismatch) > 0 {
		s.Note += "; frame counts differ: " + strings.Join(mismatch, "; ")
	}
	if len(ms) > 0 {
		s.Headline = fmt.Sprintf("full decode %.2fx ffmpeg -threads 1's CPU time over %d presets; sampled 8-frame decode %.2fx the full decode",
			ratioOf(ours, ff), len(ms), ratioOf(sampled, ours))
	}
	return s
}

// ratioOf is a/b (0 when b is 0).
func ratioOf(a, b time.Duration) float64 {
	if b <= 0 {
		return 0
	}
	return float64(a) / float64(b)
}
