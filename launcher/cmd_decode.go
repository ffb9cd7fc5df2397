package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/datahelix/datahelix/decode"
	"github.com/datahelix/datahelix/decode/tjpeg"
)

func init() {
	register(command{
		name:    "decode",
		summary: "decode media files or shards into training tensors, or print per-frame MD5s (--md5)",
		run:     runDecode,
	})
}

// shapeFlags registers --frames and --size (run, decode, costmodel), with
// decode's bounds in their help; checkShape checks them.
func shapeFlags(fs *flag.FlagSet, frames, size *int) {
	fs.IntVar(frames, "frames", decode.DefaultFrames, fmt.Sprintf("frames `F` sampled per clip, 1..%d", decode.MaxFrames))
	fs.IntVar(size, "size", decode.DefaultSize, fmt.Sprintf("output side `S` in pixels, %d..%d: frames and images become S x S RGB (one clip, F x S x S x 3 bytes, at most %d GiB)",
		decode.MinSize, decode.MaxSize, decode.MaxClipBytes>>30))
}

// checkShape checks --frames and --size (run, decode, costmodel) and the
// size of one decoded clip with decode.CheckShape, as a usage error naming
// the flags.
func checkShape(frames, size int) error {
	if err := decode.CheckShape(frames, size, "--frames", "--size"); err != nil {
		return usagef("%v", err)
	}
	return nil
}

func runDecode(ctx context.Context, stdout, stderr io.Writer, args []string) error {
	fs := newFlags("decode", "[--md5] [flags] FILE|SHARD.tar...")
	md5 := fs.Bool("md5", false, "print MD5s of the full-size decoded pictures instead of tensors: a video file gives one per frame, "+
		"the md5 column of 'ffmpeg -i FILE -map 0:v -f framemd5 -'; an image gives one of its RGB24 pixels before resizing "+
		"(JPEG: equals 'djpeg -ppm FILE', not FFmpeg's decoder; PNG: equals 'ffmpeg -i FILE -pix_fmt rgb24 -f framemd5 -'); "+
		"a shard gives MEMBER<tab>MD5 lines for the members decode turns into tensors (a sample's clip, or its images)")
	var frames, size int
	shapeFlags(fs, &frames, &size)
	cache := fs.String("cache", "", "`directory` for shard index caches (default: beside each shard)")
	verbose := fs.Bool("v", false, "also print the JPEG backend in use to stderr")
	check := fs.Bool("check-hashes", false, checkHashesUsage)
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			fs.SetOutput(stdout)
			fs.Usage()
			return errHelp
		}
		return usagef("decode: %v (see datahelix decode -h)", err)
	}
	if fs.NArg() == 0 {
		return usagef("decode: no file given (see datahelix decode -h)")
	}
	if err := checkShape(frames, size); err != nil {
		return err
	}
	if *verbose {
		fmt.Fprintf(stderr, "decode: JPEG backend %s\n", tjpeg.Backend)
	}
	if *md5 {
		if *check {
			return usagef("decode: --check-hashes counts damage in decoded samples; --md5 prints the pictures' MD5s without counting it")
		}
		for _, path := range fs.Args() {
			if err := printMD5s(ctx, stdout, path, *cache); err != nil {
				return err
			}
		}
		return nil
	}
	dec := decode.NewDecoder(decode.Options{Frames: frames, Size: size, CheckHashes: *check})
	failed, damaged := 0, 0
	show := func(s *decode.Sample) error {
		start := time.Now()
		out, err := dec.Decode(ctx, s, nil)
		if errors.Is(err, context.Canceled) {
			return err
		}
		if err != nil {
			failed++
			fmt.Fprintln(stderr, err)
			return nil
		}
		shapes := make([]string, len(out.Tensors))
		for i, t := range out.Tensors {
			shapes[i] = fmt.Sprint(t.Shape)
		}
		if out.Damaged > 0 {
			damaged++
		}
		_, err = fmt.Fprintf(stdout, "%s\t%s\ttensors %s\ttokens %d\tdecoded frames %d\tdamaged packets %d\t%.2f ms\n", s.Key, out.Modality,
			strings.Join(shapes, " "), out.Tokens, out.DecodedFrames, out.Damaged, float64(time.Since(start).Microseconds())/1000)
		return err
	}
	for _, path := range fs.Args() {
		if err := eachSample(path, *cache, show); err != nil {
			return err
		}
	}
	if damaged > 0 {
		// They decoded, with damage FFmpeg concealed: the data is not
		// what was encoded, which a check of a dataset should say.
		fmt.Fprintf(stderr, "decode: %d %s decoded with damaged data the decoder concealed (see their damaged packets)\n",
			damaged, map[bool]string{true: "sample", false: "samples"}[damaged == 1])
	}
	if failed > 0 {
		return fmt.Errorf("decode: %d samples failed", failed)
	}
	return nil
}

// checkHashesUsage is the help of run's and decode's --check-hashes.
const checkHashesUsage = "check HEVC pictures against the MD5 hashes an encoder may write in the stream (x265 --hash 1) and count a mismatch as damage; " +
	"costs an MD5 of every such picture (about twice the decode CPU time of a cheap clip)"

// eachSample calls fn on every sample of a shard (a path ending in .tar),
// or on a bare media file as a one-member sample.
func eachSample(path, cache string, fn func(*decode.Sample) error) error {
	if strings.HasSuffix(path, ".tar") {
		sh, err := decode.OpenShard(path, cache)
		if err != nil {
			return err
		}
		defer sh.Close()
		for i := range sh.Len() {
			s, err := sh.ReadSample(i)
			if err != nil {
				return err
			}
			if err := fn(s); err != nil {
				return err
			}
		}
		return nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	base := filepath.Base(path)
	key, ext, _ := strings.Cut(base, ".")
	return fn(&decode.Sample{Shard: path, Key: key, Members: []decode.Member{{Name: base, Ext: strings.ToLower(ext), Data: data}}})
}

// printMD5s prints the MD5s of one file: bare lines for a video or image
// file, MEMBER<tab>MD5 lines for a shard.
func printMD5s(ctx context.Context, w io.Writer, path, cache string) error {
	if strings.HasSuffix(path, ".tar") {
		return eachSample(path, cache, func(s *decode.Sample) error {
			ms, err := decode.SampleMD5s(ctx, s, decode.DefaultLimits())
			if err != nil {
				return err
			}
			for _, m := range ms {
				for _, sum := range m.MD5s {
					if _, err := fmt.Fprintf(w, "%s\t%s\n", m.Member, sum); err != nil {
						return err
					}
				}
			}
			return nil
		})
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var sums []string
	if _, herr := decode.ParseImageHeader(data); herr == nil {
		var sum string
		sum, _, _, err = decode.ImageMD5(data, decode.DefaultLimits())
		sums = []string{sum}
	} else {
		sums, err = decode.FrameMD5s(ctx, data, decode.DefaultLimits())
	}
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	for _, s := range sums {
		if _, err := fmt.Fprintln(w, s); err != nil {
			return err
		}
	}
	return nil
}
