// Package gen writes synthetic WebDataset shards of real encoded media
// (H.264, HEVC, VP9 and AV1 clips, JPEG, PNG and WebP images, text),
// produced by the ffmpeg CLI, with the length and resolution distributions
// of public datasets (see Presets), deterministically for a seed.
//
// Content is drawn by FFmpeg's lavfi sources (testsrc2, testsrc, life,
// cellauto, mandelbrot) with seeded temporal noise, so it is not trivially
// compressible and decoding it costs what real footage of that size and
// bitrate costs. Each item is encoded by one single-threaded ffmpeg
// process with bit-exact flags: the same seed gives the same bytes with
// the same FFmpeg build.
//
// Member naming follows WebDataset: all members of a sample share its key
// (the sample's global index, "000123") and sit next to each other in the
// tar:
//
//	video:    000123.mp4 (or .webm), 000123.txt (caption), 000123.json
//	image:    000123.jpg (or .png, .webp), 000123.txt, 000123.json
//	document: 000123.0.txt, 000123.1.jpg, 000123.2.txt, 000123.3.png, ...,
//	          000123.json — the number is the position in reading order
//	text:     000123.txt, 000123.json
//
// The .json member holds the generation parameters of the sample (preset,
// source dataset, seed, index, and the encoding of every medium).
//
// Shards are source-homogeneous, as WebDataset mixtures are: all samples
// of a shard follow one source's distributions (the mixed preset takes a
// different source for each shard).
package gen

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
)

// Errors of Generate.
var (
	// ErrPreset reports an unknown preset name.
	ErrPreset = errors.New("gen: unknown preset")
	// ErrConfig reports an invalid Config.
	ErrConfig = errors.New("gen: invalid configuration")
	// ErrFFmpeg reports a failed ffmpeg run (or no ffmpeg at all).
	ErrFFmpeg = errors.New("gen: ffmpeg failed")
	// ErrOutInUse reports an output directory that already holds .tar
	// files this configuration would not write: a dataset read from the
	// directory would mix them with the new shards.
	ErrOutInUse = errors.New("gen: output directory holds other shards")
)

// Config says what to generate.
type Config struct {
	Preset  string // one of Presets()
	Samples int    // samples in all
	Shards  int    // shards to spread them over (contiguous key ranges)
	Out     string // directory for the shards, created if missing
	Seed    uint64
	// DurationScale multiplies every clip duration (0 means the preset's
	// default: 1, or 0.1 for activitynet on this 2-core machine).
	DurationScale float64
	// SizeScale multiplies every picture size (0 means 1): a knob for quick
	// datasets and tests that keeps the distributions' shapes.
	SizeScale float64
	// Workers is the number of ffmpeg processes run at once (0: GOMAXPROCS).
	Workers int
	// FFmpeg is the ffmpeg binary (empty: "ffmpeg" from PATH).
	FFmpeg string
	// Progress, if set, is called after each sample with the count done.
	Progress func(done, total int)
	// Waiting, if set, is called once when Ensure finds another process
	// generating the same dataset and waits for it instead.
	Waiting func()
}

// ShardName returns the file name of shard k of a preset's dataset.
func ShardName(preset string, k int) string {
	return fmt.Sprintf("%s-%06d.tar", preset, k)
}

// Default returns the configuration of the small default dataset the
// runtime generates into a cache directory: the hdmix preset (one source
// per shard: Panda-70M's 720p clips, HowTo100M's 240p clips, ImageNet,
// C4 text), 4 shards of 32 samples, clip durations scaled by 0.3 (HD
// clips of 2.6 s on average, short clips of 1.1 s) to keep it small.
func Default(out string) Config {
	return Config{Preset: "hdmix", Samples: 128, Shards: 4, Out: out, Seed: 1, DurationScale: 0.3}
}

// DefaultDir is the directory of the default dataset of seed in the
// cache directory root, where the runtime generates it once.
func DefaultDir(root string, seed uint64) string {
	return filepath.Join(root, CacheName(fmt.Sprintf("default-%s-seed%d", Default("").Preset, seed)))
}

// EnsureDefault makes sure the default dataset of seed is in the cache
// directory root (Ensure), generating it with workers ffmpeg processes
// (0: GOMAXPROCS) and calling waiting if another process is generating
// it; it returns the dataset's directory and whether it generated it.
func EnsureDefault(ctx context.Context, root string, seed uint64, workers int, waiting func()) (string, bool, error) {
	cfg := Default("")
	cfg.Seed, cfg.Workers, cfg.Waiting = seed, workers, waiting
	dir := DefaultDir(root, seed)
	made, err := Ensure(ctx, cfg, dir)
	return dir, made, err
}

// InterleavedDir is the directory of the default dataset of seed dealt
// across its shards (EnsureInterleaved) in the cache directory root.
func InterleavedDir(root string, seed uint64) string {
	return filepath.Join(root, CacheName(fmt.Sprintf("default-%s-seed%d-interleaved", Default("").Preset, seed)))
}

// EnsureInterleaved makes sure the default dataset of seed dealt across
// its shards (Interleave: the same samples, each shard an equal share of
// every source) is in the cache directory root beside the dataset, which
// must be there (EnsureDefault), made once (Install); it returns its
// directory.
func EnsureInterleaved(root string, seed uint64) (string, error) {
	src, dir := DefaultDir(root, seed), InterleavedDir(root, seed)
	_, err := Install(dir, func(tmp string) error {
		paths, err := filepath.Glob(filepath.Join(src, "*.tar"))
		if err != nil {
			return err
		}
		_, err = Interleave(paths, tmp, Default("").Preset)
		return err
	})
	return dir, err
}

// Bounds of a Config (and of gen's flags).
const (
	// MaxSamples bounds Config.Samples: ten million samples is days of
	// ffmpeg time for any preset with pictures, and far more than a
	// loader benchmark needs; a count beyond it is a typo.
	MaxSamples = 10_000_000
	// MaxShards bounds Config.Shards: with at least one sample a shard,
	// a hundred thousand shard files is more than any dataset here needs.
	MaxShards = 100_000
	// MaxSizeScale bounds Config.SizeScale so that every picture stays
	// within what datahelix decodes (decode.DefaultLimits: a clip's
	// picture up to 4096 x 2304 pixels, an image up to 8192 x 8192): the
	// largest pictures are LAION's web images, up to 3840 px on the long
	// side and square at most (laion and interleaved presets), 7680 x
	// 7680 at 2x (about 2.13x would pass the limit); the largest clips,
	// 1280x720 (panda70m, activitynet), are 2560x1440 at 2x. A larger
	// scale wrote datasets whose samples run refused: every clip of
	// panda70m at 4x.
	MaxSizeScale = 2.0
	// MaxDurationScale bounds Config.DurationScale: clips are capped at
	// 3600 s, and no preset draws a clip shorter than 1 s before
	// scaling, so beyond 3600x every clip would be an hour long.
	MaxDurationScale = 3600.0
)

func (c Config) validate() error {
	switch {
	case c.Samples <= 0 || c.Shards <= 0:
		return fmt.Errorf("%w: samples %d and shards %d must be positive", ErrConfig, c.Samples, c.Shards)
	case c.Samples > MaxSamples:
		return fmt.Errorf("%w: %d samples: want at most %d", ErrConfig, c.Samples, MaxSamples)
	case c.Shards > MaxShards:
		return fmt.Errorf("%w: %d shards: want at most %d", ErrConfig, c.Shards, MaxShards)
	case c.Shards > c.Samples:
		return fmt.Errorf("%w: %d shards for %d samples leaves shards empty", ErrConfig, c.Shards, c.Samples)
	case c.Out == "":
		return fmt.Errorf("%w: no output directory", ErrConfig)
	// NaN fails every comparison: test for the good range.
	case !(c.DurationScale >= 0 && c.DurationScale <= MaxDurationScale):
		return fmt.Errorf("%w: duration scale %v: want a number in 0..%v", ErrConfig, c.DurationScale, MaxDurationScale)
	case !(c.SizeScale >= 0 && c.SizeScale <= MaxSizeScale):
		return fmt.Errorf("%w: size scale %v: want a number in 0..%v", ErrConfig, c.SizeScale, MaxSizeScale)
	}
	_, err := sourceOf(c.Preset, 0)
	return err
}

// Generate writes the dataset cfg describes and returns the shard paths
// in order. Every shard is written into a scratch directory inside
// cfg.Out first, and they are all moved into place only once every one
// is complete, so that an interrupted or failed run leaves cfg.Out as it
// was: an earlier dataset's shards untouched (never some replaced and
// some not), and no directory that Generate created itself. It refuses
// (ErrOutInUse) an output directory holding .tar files other than the
// shards it writes, which a run would read as part of the dataset.
func Generate(ctx context.Context, cfg Config) (paths []string, err error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if err := checkOut(cfg); err != nil {
		return nil, err
	}
	bin := cfg.FFmpeg
	if bin == "" {
		bin = "ffmpeg"
	}
	bin, err = exec.LookPath(bin)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrFFmpeg, err)
	}
	created, err := mkdirAll(cfg.Out)
	defer func() {
		if err != nil {
			removeEmptyDirs(created)
		}
	}()
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp(cfg.Out, ".gen-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp) // deferred after removeEmptyDirs, so it runs first
	rd := &renderer{ffmpeg: bin, tmp: tmp}
	workers := cfg.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	// One pool of ffmpeg processes runs the samples in key order; the
	// sample that completes a shard writes it into tmp, so at most a few
	// shards are held in memory at once.
	type shard struct {
		path    string
		lo, n   int        // its samples' keys: lo..lo+n-1
		samples [][]member // n, made when its first sample is done
		left    int
	}
	shards := make([]*shard, cfg.Shards)
	sources := make([]preset, cfg.Shards)
	for k := range shards {
		lo, hi := k*cfg.Samples/cfg.Shards, (k+1)*cfg.Samples/cfg.Shards
		shards[k] = &shard{path: filepath.Join(cfg.Out, ShardName(cfg.Preset, k)), lo: lo, n: hi - lo, left: hi - lo}
		if sources[k], err = sourceOf(cfg.Preset, k); err != nil {
			return nil, err
		}
	}
	var mu sync.Mutex
	done := 0
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(workers)
	for i := range cfg.Samples {
		k := shardOf(cfg, i)
		g.Go(func() error {
			if gctx.Err() != nil {
				return context.Cause(gctx) // stopped, or another sample failed
			}
			ms, err := render(gctx, rd, cfg, sources[k], i)
			if err != nil {
				return fmt.Errorf("gen: shard %d: %w", k, err)
			}
			mu.Lock()
			sh := shards[k]
			if sh.samples == nil {
				sh.samples = make([][]member, sh.n)
			}
			sh.samples[i-sh.lo] = ms
			sh.left--
			complete := sh.left == 0
			done++
			if cfg.Progress != nil {
				cfg.Progress(done, cfg.Samples)
			}
			mu.Unlock()
			if !complete {
				return nil
			}
			err = writeShard(scratchShard(tmp, sh.path), sh.samples)
			sh.samples = nil
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	paths = make([]string, len(shards))
	for k, sh := range shards {
		paths[k] = sh.path
	}
	// Every shard is complete: only now do they replace the old ones,
	// whatever ctx says (a rename takes no time, and stopping half-way
	// would mix two datasets).
	for k, p := range paths {
		if err := os.Rename(scratchShard(tmp, p), p); err != nil {
			if k == 0 {
				return nil, fmt.Errorf("gen: %w", err)
			}
			return nil, fmt.Errorf("gen: %w (after %s to %s were replaced: %s now mixes two datasets; generate again)",
				err, filepath.Base(paths[0]), filepath.Base(paths[k-1]), cfg.Out)
		}
	}
	return paths, nil
}

// scratchShard is the file in the scratch directory tmp that the shard
// at path is written to before it is moved into place.
func scratchShard(tmp, path string) string {
	return filepath.Join(tmp, "shard-"+filepath.Base(path))
}

// mkdirAll creates dir and its missing parents, as os.MkdirAll does, and
// returns the directories it created, the deepest first (nil when dir
// existed).
func mkdirAll(dir string) ([]string, error) {
	var missing []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil || !errors.Is(err, os.ErrNotExist) {
			break
		}
		missing = append(missing, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return missing, err
	}
	return missing, nil
}

// removeEmptyDirs removes the directories dirs, in order, that are
// empty: those a failed Generate created, unless something else has put
// a file in one meanwhile.
func removeEmptyDirs(dirs []string) {
	for _, d := range dirs {
		os.Remove(d) // fails, and keeps d, unless it is empty
	}
}

// checkOut refuses an output directory holding .tar files other than the
// shards cfg writes (which it replaces): a dataset directory is read as
// all its *.tar files, so generating another preset, or fewer shards, into
// it would silently mix two datasets.
func checkOut(cfg Config) error {
	mine := map[string]bool{}
	for k := range cfg.Shards {
		mine[ShardName(cfg.Preset, k)] = true
	}
	found, err := filepath.Glob(filepath.Join(cfg.Out, "*.tar"))
	if err != nil {
		return err
	}
	var other []string
	for _, p := range found {
		if !mine[filepath.Base(p)] {
			other = append(other, filepath.Base(p))
		}
	}
	if len(other) == 0 {
		return nil
	}
	names := strings.Join(other[:min(len(other), 3)], ", ")
	if len(other) > 3 {
		names += fmt.Sprintf(" and %d more", len(other)-3)
	}
	span := ShardName(cfg.Preset, 0)
	if cfg.Shards > 1 {
		span += " to " + ShardName(cfg.Preset, cfg.Shards-1)
	}
	return fmt.Errorf("%w: %s holds %s, not among the shards this command writes (%s), and a dataset directory is read as all its *.tar files: generate into a new directory, or remove them",
		ErrOutInUse, cfg.Out, names, span)
}

// member is one file of a generated sample.
type member struct {
	name string
	data []byte
}

// Spec returns the JSON metadata of sample i of a dataset without
// rendering it: what Generate would write as its .json member.
func Spec(cfg Config, i int) ([]byte, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	p, err := sourceOf(cfg.Preset, shardOf(cfg, i))
	if err != nil {
		return nil, err
	}
	s, _ := draw(cfg, p, i)
	return json.Marshal(s)
}

// shardOf returns the shard of sample i (contiguous ranges).
func shardOf(cfg Config, i int) int {
	k := sort.Search(cfg.Shards, func(k int) bool { return (k+1)*cfg.Samples/cfg.Shards > i })
	return k
}

// draw returns the spec of sample i and the generator that continues the
// sample's seeded stream (for its text and content seeds).
func draw(cfg Config, p preset, i int) (sampleSpec, *rand.Rand) {
	r := rand.New(rand.NewPCG(cfg.Seed, uint64(i)))
	sc := scales{dur: cfg.DurationScale, size: cfg.SizeScale}
	if sc.dur == 0 {
		sc.dur = p.durScale
	}
	if sc.size == 0 {
		sc.size = 1
	}
	s := p.spec(r, sc)
	s.Preset, s.Source, s.Seed, s.Index = cfg.Preset, p.source, cfg.Seed, i
	return s, r
}

// render draws and encodes sample i.
func render(ctx context.Context, rd *renderer, cfg Config, p preset, i int) ([]member, error) {
	s, r := draw(cfg, p, i)
	key := fmt.Sprintf("%06d", i)
	texts := make([]string, len(s.Words))
	for j, n := range s.Words {
		texts[j] = words(r, n)
	}
	var ms []member
	switch s.Kind {
	case kindVideo:
		b, err := rd.video(ctx, s.Video, uint32(r.Uint64()>>33))
		if err != nil {
			return nil, fmt.Errorf("sample %s: %w", key, err)
		}
		ms = append(ms, member{key + "." + s.Video.Container, b}, member{key + ".txt", []byte(texts[0])})
	case kindImage:
		b, err := rd.image(ctx, s.Images[0], uint32(r.Uint64()>>33))
		if err != nil {
			return nil, fmt.Errorf("sample %s: %w", key, err)
		}
		ms = append(ms, member{key + "." + s.Images[0].Format, b}, member{key + ".txt", []byte(texts[0])})
	case kindDocument:
		ti, ii := 0, 0
		for pos, part := range s.Layout {
			name := key + "." + strconv.Itoa(pos)
			if part == "text" {
				ms = append(ms, member{name + ".txt", []byte(texts[ti])})
				ti++
				continue
			}
			im := s.Images[ii]
			ii++
			b, err := rd.image(ctx, im, uint32(r.Uint64()>>33))
			if err != nil {
				return nil, fmt.Errorf("sample %s image %d: %w", key, ii-1, err)
			}
			ms = append(ms, member{name + "." + im.Format, b})
		}
	case kindAudio:
		b, err := rd.audio(ctx, s.Audio, uint32(r.Uint64()>>33))
		if err != nil {
			return nil, fmt.Errorf("sample %s: %w", key, err)
		}
		ms = append(ms, member{key + "." + s.Audio.Container, b}, member{key + ".txt", []byte(texts[0])})
	case kindText:
		ms = append(ms, member{key + ".txt", []byte(texts[0])})
	}
	meta, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	return append(ms, member{key + ".json", meta}), nil
}

// epoch is the modification time of every member: fixed, so that shards
// are byte-identical across runs.
var epoch = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// writeShard writes the samples' members in order as a tar archive to
// the new file path (in the run's scratch directory).
func writeShard(path string, samples [][]member) error {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, ms := range samples {
		for _, m := range ms {
			hdr := &tar.Header{Name: m.name, Mode: 0o644, Size: int64(len(m.data)), ModTime: epoch,
				Typeflag: tar.TypeReg, Format: tar.FormatUSTAR}
			if err := tw.WriteHeader(hdr); err != nil {
				return fmt.Errorf("gen: %s: %w", path, err)
			}
			if _, err := tw.Write(m.data); err != nil {
				return fmt.Errorf("gen: %s: %w", path, err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("gen: %s: %w", path, err)
	}
	// The scratch directory is this run's own, so the name is free;
	// 0644 (less the umask), as a shard is data others read, not a
	// secret.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("gen: %w", err)
	}
	if _, err := f.Write(buf.Bytes()); err != nil {
		f.Close()
		return fmt.Errorf("gen: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("gen: %w", err)
	}
	return nil
}
