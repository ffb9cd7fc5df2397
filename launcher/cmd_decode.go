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

func runDecode(ctx context.Context, stdout, stderr io.Writer, args []string) error {
	fs := newFlags("decode", "[--md5] [flags] FILE|SHARD.tar...")
	md5 := fs.Bool("md5", false, "print one MD5 per decoded frame, in output order, as `ffmpeg -i FILE -f framemd5 -` hashes them")
	frames := fs.Int("frames", decode.DefaultFrames, "frames `F` sampled per clip")
	size := fs.Int("size", decode.DefaultSize, "output side `S` in pixels")
	cache := fs.String("cache", "", "`directory` for shard index caches (default: beside each shard)")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			fs.SetOutput(stdout)
			fs.Usage()
			return errHelp
		}
		return usagef("%s: %v", fs.Name(), err)
	}
	if fs.NArg() == 0 {
		return usagef("decode: no file given")
	}
	if *frames < 1 || *size < 1 {
		return usagef("decode: --frames and --size must be positive")
	}
	if *md5 {
		for _, path := range fs.Args() {
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			sums, err := decode.FrameMD5s(ctx, data, decode.DefaultLimits())
			if err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			for _, s := range sums {
				fmt.Fprintln(stdout, s)
			}
		}
		return nil
	}
	dec := decode.NewDecoder(decode.Options{Frames: *frames, Size: *size})
	failed := 0
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
		_, err = fmt.Fprintf(stdout, "%s\t%s\ttensors %s\ttokens %d\tdecoded frames %d\t%.2f ms\n", s.Key, out.Modality,
			strings.Join(shapes, " "), out.Tokens, out.DecodedFrames, float64(time.Since(start).Microseconds())/1000)
		return err
	}
	fmt.Fprintf(stderr, "decode: JPEG backend %s\n", tjpeg.Backend)
	for _, path := range fs.Args() {
		if strings.HasSuffix(path, ".tar") {
			sh, err := decode.OpenShard(path, *cache)
			if err != nil {
				return err
			}
			for i := range sh.Len() {
				s, err := sh.ReadSample(i)
				if err == nil {
					err = show(s)
				}
				if err != nil {
					sh.Close()
					return err
				}
			}
			sh.Close()
			continue
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		base := filepath.Base(path)
		key, ext, _ := strings.Cut(base, ".")
		if err := show(&decode.Sample{Shard: path, Key: key,
			Members: []decode.Member{{Name: base, Ext: strings.ToLower(ext), Data: data}}}); err != nil {
			return err
		}
	}
	if failed > 0 {
		return fmt.Errorf("decode: %d samples failed", failed)
	}
	return nil
}
