package launcher

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/datahelix/datahelix/decode"
	"github.com/datahelix/datahelix/internal/cli"
	"github.com/datahelix/datahelix/internal/decoding"
	"github.com/datahelix/datahelix/internal/shard"
	"github.com/datahelix/datahelix/internal/shardindex"
	"github.com/datahelix/datahelix/internal/tjpeg"
	"github.com/datahelix/datahelix/internal/transform"
)

// decodeCommand is datahelix decode.
var decodeCommand = cli.Command{
	Name:    "decode",
	Summary: "decode media files or shards (a directory or glob of them) into training tensors, or print per-frame MD5s (--md5)",
	Run:     runDecode,
}

func runDecode(ctx context.Context, stdout, stderr io.Writer, args []string) error {
	fs := cli.NewFlags("decode", "[--md5] [flags] FILE|SHARD.tar|DIR|GLOB...")
	md5 := fs.Bool("md5", false, "print MD5s of the full-size decoded pictures instead of tensors (with a transform flag, --resize, --hflip or --frame-sampling, "+
		"KEY<tab>I<tab>MD5 of each output tensor after the transform instead): a video file gives one per frame, "+
		"the md5 column of 'ffmpeg -i FILE -map 0:v -f framemd5 -' (turned upright as ffmpeg turns it); an image gives one of its RGB24 pixels before resizing "+
		"(JPEG: equals 'djpeg -ppm FILE', not FFmpeg's decoder; PNG and WebP: equals 'ffmpeg -i FILE -pix_fmt rgb24 -f framemd5 -', see docs/formats.md for the exceptions); "+
		"a shard gives MEMBER<tab>MD5 lines for the members decode turns into tensors (a sample's clip, or its images); "+
		"with --audio-rate, one more line MEMBER<tab>pcm:MD5 (a file: pcm:MD5) hashes the audio output, its float32 PCM little-endian channel after channel, as decode gives it for --frames")
	var frames, size, audioRate, audioChannels int
	cli.ShapeFlags(fs, &frames, &size)
	audioFlags(fs, &audioRate, &audioChannels)
	cache := cli.AddIndexCacheFlags(fs)
	verbose := fs.Bool("v", false, "also print the JPEG backend in use to stderr")
	var tf cli.TransformFlags
	tf.Register(fs)
	seed := fs.Uint64("seed", 1, "`seed` of the transforms (as run's and train's --seed)")
	epoch := fs.Int("epoch", 0, "epoch `E` the samples are decoded for, 0..2147483647: with --seed and a sample's key, it seeds its random crop, flip and segment")
	check := fs.Bool("check-hashes", false, checkHashesUsage)
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			fs.SetOutput(stdout)
			fs.Usage()
			return cli.ErrHelp
		}
		return cli.Usagef("decode: %w (see datahelix decode -h)", err)
	}
	if fs.NArg() == 0 {
		return cli.Usagef("decode: no file given (see datahelix decode -h)")
	}
	if err := cli.CheckShape(frames, size); err != nil {
		return err
	}
	spec, err := tf.Spec(size)
	if err != nil {
		return err
	}
	if *epoch < 0 || *epoch > 1<<31-1 {
		return cli.FlagErrorf("", "epoch", *epoch, "want 0..%d", 1<<31-1)
	}
	spec.Seed = *seed
	transformed := spec != (transform.Spec{Seed: *seed}).WithDefaults()
	if err := checkAudioFlags("decode", audioRate, audioChannels); err != nil {
		return err
	}
	if *verbose {
		fmt.Fprintf(stderr, "decode: JPEG backend %s\n", tjpeg.Backend)
	}
	indexDir, err := cache.Dir("decode")
	if err != nil {
		return err
	}
	paths, badArgs := decodePaths(stderr, fs.Args())
	if *md5 {
		if *check {
			return cli.Usagef("decode: --check-hashes counts damage in decoded samples; --md5 prints the pictures' MD5s without counting it")
		}
		if transformed {
			// The pictures after the transform: the output tensors.
			dec := decode.NewDecoder(decode.Options{Frames: frames, Size: size, Transform: spec})
			return eachFile(stderr, paths, badArgs, func(path string) (tally, error) {
				return printTensorMD5s(ctx, stdout, stderr, path, indexDir, dec, *epoch)
			})
		}
		named := len(paths) > 1
		opts := decode.Options{Frames: frames, Size: size, AudioRate: audioRate, AudioChannels: audioChannels}
		return eachFile(stderr, paths, badArgs, func(path string) (tally, error) {
			return printMD5s(ctx, stdout, stderr, path, indexDir, named, opts)
		})
	}
	dec := decode.NewDecoder(decode.Options{Frames: frames, Size: size, CheckHashes: *check, Transform: spec, AudioRate: audioRate, AudioChannels: audioChannels})
	damaged := 0
	show := func(s *decode.Sample) error {
		s.Epoch = *epoch
		start := time.Now()
		out, err := dec.Decode(ctx, s)
		if err != nil {
			return err
		}
		shapes := make([]string, len(out.Tensors))
		for i, t := range out.Tensors {
			shapes[i] = fmt.Sprint(t.Shape)
		}
		if out.Damaged > 0 {
			damaged++
		}
		audio := ""
		if a := out.Audio; a != nil {
			audio = fmt.Sprintf("\taudio %v at %d Hz", a.Shape(), a.Rate)
			if a.Missing {
				audio += " (no audio track: silence)"
			}
		}
		_, err = fmt.Fprintf(stdout, "%s\t%s\ttensors %s%s\ttokens %d\tdecoded frames %d\tdamaged packets %d\t%.2f ms\n", s.Key, out.Modality,
			strings.Join(shapes, " "), audio, out.Tokens, out.DecodedFrames, out.Damaged, float64(time.Since(start).Microseconds())/1000)
		return fatal(err)
	}
	err = eachFile(stderr, paths, badArgs, func(path string) (tally, error) {
		return eachSample(stderr, path, indexDir, show)
	})
	if damaged > 0 {
		// They decoded, with damage FFmpeg concealed: the data is not
		// what was encoded, which a check of a dataset should say.
		fmt.Fprintf(stderr, "decode: %s decoded with damaged data the decoder concealed (see their damaged packets)\n",
			cli.Plural(damaged, "sample", "samples"))
	}
	return err
}

// fatalError is an error that ends decode, such as a failure to write
// its output, instead of counting as a bad sample or file.
type fatalError struct{ err error }

func (e *fatalError) Error() string { return e.err.Error() }

func (e *fatalError) Unwrap() error { return e.err }

// fatal marks err (when not nil) as ending decode.
func fatal(err error) error {
	if err == nil {
		return nil
	}
	return &fatalError{err}
}

// isFatal reports whether err ends decode: a cancelled context or a
// failed write.
func isFatal(err error) bool {
	var fe *fatalError
	return errors.Is(err, context.Canceled) || errors.As(err, &fe)
}

// tally counts what decode did with one path: the samples (a plain
// file being one) that decoded and those that failed, each printed
// already.
type tally struct{ ok, failed int }

// eachFile runs decode on one path at a time: do returns its tally and
// the error that stopped it. A path that fails (a shard that cannot be
// opened, a sample that does not decode) is printed and counted, and the
// next path still runs, as a bad sample within a shard is counted and
// skipped; failedFiles counts the arguments that named no path
// (decodePaths). eachFile returns nil when every path decoded, a fatal error
// (isFatal) at once, and otherwise the total. It counts the files
// decoded whole, plain files and the shards that failed before a sample
// ("decode: 2 files decoded, 1 failed"), apart from the samples of the
// shards it read ("decode: 1 shard: 2 samples decoded, 1 failed"), the
// two joined by "; " when both occur; a shard an error stopped after
// some samples is counted in the second.
func eachFile(stderr io.Writer, paths []string, failedFiles int, do func(path string) (tally, error)) error {
	var okFiles, shards, stoppedShards, okSamples, failedSamples int
	for _, path := range paths {
		n, err := do(path)
		if isFatal(err) {
			var fe *fatalError
			if errors.As(err, &fe) {
				return fe.err
			}
			return err
		}
		if err != nil {
			fmt.Fprintln(stderr, err)
		}
		switch {
		case shardindex.IsShardName(path) && n.ok+n.failed > 0:
			shards++
			okSamples += n.ok
			failedSamples += n.failed
			if err != nil {
				stoppedShards++
			}
		case err != nil || n.failed > 0:
			failedFiles++
		default:
			okFiles++
		}
	}
	if failedFiles == 0 && failedSamples == 0 && stoppedShards == 0 {
		return nil
	}
	var parts []string
	if failedFiles > 0 {
		parts = append(parts, fmt.Sprintf("%s decoded, %d failed", cli.Plural(okFiles, "file", "files"), failedFiles))
	} else if okFiles > 0 {
		parts = append(parts, cli.Plural(okFiles, "file", "files")+" decoded")
	}
	if shards > 0 {
		p := fmt.Sprintf("%s: %s decoded, %d failed", cli.Plural(shards, "shard", "shards"), cli.Plural(okSamples, "sample", "samples"), failedSamples)
		if stoppedShards > 0 {
			p += ", " + cli.Plural(stoppedShards, "shard", "shards") + " stopped by an error"
		}
		parts = append(parts, p)
	}
	return errors.New("decode: " + strings.Join(parts, "; "))
}

// decodePaths expands decode's arguments: a directory or a glob (one
// that names no file) into its shards as run and inspect read them
// (shardindex.Paths), any other path left as it is. An argument that
// expands to nothing is printed to stderr and counted in failed.
func decodePaths(stderr io.Writer, args []string) (paths []string, failed int) {
	for _, a := range args {
		st, err := os.Stat(a)
		if (err == nil && !st.IsDir()) || (err != nil && !shardindex.IsGlob(a)) {
			paths = append(paths, a)
			continue
		}
		list, err := shardindex.Paths(a)
		if err != nil {
			fmt.Fprintln(stderr, err)
			failed++
			continue
		}
		paths = append(paths, list...)
	}
	return paths, failed
}

// checkHashesUsage is the help of run's and decode's --check-hashes.
const checkHashesUsage = "check HEVC pictures against the MD5 hashes an encoder may write in the stream (x265 --hash 1) and count a mismatch as damage; " +
	"costs an MD5 of every such picture (about twice the decode CPU time of a cheap clip)"

// eachSample calls fn on every sample of a shard (shardindex.IsShardName),
// after printing the shard's index warnings (members it skipped) to
// stderr, or on a plain media file as a one-member sample
// (decoding.FileSample). A sample that fails (fn's error, or a sample too
// large to read) is printed to stderr, counted in n.failed and skipped;
// one that does not is counted in n.ok. A fatal error of fn (isFatal), a
// shard that cannot be opened and a shard that cannot be read stop the
// file with err, n counting the samples before.
func eachSample(stderr io.Writer, path, cache string, fn func(*decode.Sample) error) (n tally, err error) {
	run := func(s *decode.Sample, err error) error {
		if err == nil {
			err = fn(s)
		}
		switch {
		case err == nil:
			n.ok++
		case isFatal(err):
			return err
		default:
			n.failed++
			fmt.Fprintln(stderr, err)
		}
		return nil
	}
	if !shardindex.IsShardName(path) {
		data, err := os.ReadFile(path)
		if err != nil {
			return n, fmt.Errorf("decode: %w", err)
		}
		// run counts into n: call it before n is read.
		err = run(decoding.FileSample(path, data), nil)
		return n, err
	}
	sh, err := shard.Open(path, cache)
	if err != nil {
		return n, err
	}
	defer sh.Close()
	cli.PrintWarningLines(stderr, path, sh.Warnings())
	if sh.Len() == 0 {
		return n, fmt.Errorf("decode: shard %s has no samples", path)
	}
	for i := range sh.Len() {
		s, err := sh.ReadSample(i)
		if err != nil && !errors.Is(err, decode.ErrSampleTooLarge) {
			return n, err
		}
		if err := run(s, err); err != nil {
			return n, err
		}
	}
	return n, nil
}

// printMD5s prints the MD5s of one file: bare lines for a video or image
// file (PATH<tab>MD5 when named, decode being given several paths, so
// that each line says whose it is), MEMBER<tab>MD5 lines for a shard,
// whose failing samples are printed to stderr, counted and skipped. A
// plain file is hashed as the one-member sample decode makes of it
// (eachSample), so that its errors are those of a shard's sample, naming
// the file once.
func printMD5s(ctx context.Context, w, stderr io.Writer, path, cache string, named bool, opts decode.Options) (tally, error) {
	file := !shardindex.IsShardName(path)
	return eachSample(stderr, path, cache, func(s *decode.Sample) error {
		opts.Limits = decode.DefaultLimits()
		ms, err := decoding.SampleMD5sFor(ctx, s, opts)
		if err != nil {
			return err
		}
		if file && len(ms) == 0 {
			// Not an error (a shard's text samples print nothing
			// either), but an empty output alone would puzzle.
			fmt.Fprintf(stderr, "decode: file %s has no pictures to hash\n", path)
		}
		for _, m := range ms {
			for _, sum := range m.MD5s {
				if m.Audio {
					sum = "pcm:" + sum
				}
				line := m.Member + "\t" + sum
				switch {
				case file && named:
					line = path + "\t" + sum
				case file:
					line = sum
				}
				if _, err := fmt.Fprintln(w, line); err != nil {
					return fatal(err)
				}
			}
		}
		return nil
	})
}
