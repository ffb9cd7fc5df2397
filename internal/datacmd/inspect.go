package datacmd

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/datahelix/datahelix/decode"
	"github.com/datahelix/datahelix/internal/cli"
	"github.com/datahelix/datahelix/internal/costmodel"
	"github.com/datahelix/datahelix/internal/decoding"
	"github.com/datahelix/datahelix/internal/inspect"
	"github.com/datahelix/datahelix/internal/shard"
)

// Inspect is datahelix inspect.
var Inspect = cli.Command{
	Name:    "inspect",
	Summary: "print the lightweight record and estimated cost of every sample of WebDataset shards (a directory or glob of them) or of media files",
	Run:     runInspect,
}

func runInspect(ctx context.Context, stdout, stderr io.Writer, args []string) error {
	fs := cli.NewFlags("inspect", "[--json] [--cache DIR | --cache-dir DIR] PATH...")
	asJSON := fs.Bool("json", false, "print one JSON object per sample instead of a table")
	cache := cli.AddIndexCacheFlags(fs)
	var frames, size int
	cli.ShapeFlags(fs, &frames, &size) // for the cost estimate
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			fs.SetOutput(stdout)
			fs.Usage()
			return cli.ErrHelp
		}
		return cli.Usagef("%s: %w", fs.Name(), err)
	}
	if fs.NArg() == 0 {
		return cli.Usagef("inspect: no shard, directory, glob or media file given")
	}
	if err := cli.CheckShape(frames, size); err != nil {
		return err
	}
	indexDir, err := cache.Dir("inspect")
	if err != nil {
		return err
	}
	empty := printShardWarnings(stderr, fs.Args(), indexDir)
	m := costmodel.New(nil)
	m.SetOptions(costmodel.Options{Frames: frames, Size: size})
	if *asJSON {
		enc := json.NewEncoder(stdout)
		err := inspect.Inspect(ctx, fs.Args(), indexDir, m, func(s inspect.RecordSummary) error { return enc.Encode(s) })
		return emptyShardsError(err, empty)
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "key\tshard\tmodality\tbytes\twidth\theight\tframes\tduration_s\tcodec\tkeyframes\test_cost_us\tdisplay")
	rows := 0
	err = inspect.Inspect(ctx, fs.Args(), indexDir, m, func(s inspect.RecordSummary) error {
		rows++
		if s.Error != "" {
			fmt.Fprintf(stderr, "%s\n", s.Error)
		}
		_, err := fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%s\t%.3f\t%s\t%d\t%d\t%s\n",
			s.Key, s.Shard, s.Modality, s.Bytes, s.Width, s.Height, frameCount(s), s.DurationS, s.Codec, s.Keyframes, s.EstCostUS, display(s))
		if err == nil && rows%inspectBlock == 0 {
			// The table is aligned a block of rows at a time, so that a
			// dataset of millions of samples is printed as it is read,
			// not held in memory to the end.
			err = tw.Flush()
		}
		return err
	})
	if err != nil && rows == 0 {
		return err // a missing path or an unreadable shard: no empty table first
	}
	if ferr := tw.Flush(); err == nil {
		err = ferr
	}
	return emptyShardsError(err, empty)
}

// inspectBlock is how many rows of inspect's table are aligned together
// and printed at once.
const inspectBlock = 1000

// frameCount is inspect's frames cell: the frames FFmpeg shows, as
// ffprobe -count_frames counts them, and those an edit list hides (which
// FFmpeg decodes without showing them) when there are any, "37 (+13
// hidden)"; "~50" for a count estimated from the duration.
func frameCount(s inspect.RecordSummary) string {
	switch {
	case s.Estimated:
		return fmt.Sprintf("~%d", s.Frames)
	case s.FramesShown != s.Frames:
		return fmt.Sprintf("%d (+%d hidden)", s.FramesShown, s.Frames-s.FramesShown)
	}
	return fmt.Sprint(s.Frames)
}

// display is inspect's display cell, empty unless the clip's display
// matrix turns it: the size it is shown at and the turn, with
// ffprobe's rotation ("48x64 (rotated 90° counterclockwise)" where
// ffprobe says rotation=90, width=64, height=48).
func display(s inspect.RecordSummary) string {
	var turn string
	switch r := s.Rotation; {
	case r == 0:
		return ""
	case r == 180 || r == -180:
		turn = "rotated 180°"
	case r > 0:
		turn = fmt.Sprintf("rotated %d° counterclockwise", r)
	default:
		turn = fmt.Sprintf("rotated %d° clockwise", -r)
	}
	return fmt.Sprintf("%dx%d (%s)", s.DisplayWidth, s.DisplayHeight, turn)
}

// printShardWarnings prints to w the index warnings of the shards of
// every dataset in paths (members the index skipped or grouped oddly,
// which inspect's table cannot show) and returns the shards without a
// sample. A path that cannot be opened is skipped: Inspect reports it.
func printShardWarnings(w io.Writer, paths []string, indexDir string) (empty []string) {
	for _, arg := range paths {
		for _, p := range decoding.ExpandMediaGlob(arg) {
			if !decoding.IsMediaFile(p) {
				empty = append(empty, shardWarnings(w, p, indexDir)...)
			}
		}
	}
	return empty
}

// shardWarnings prints the index warnings of the shards of the dataset
// path p and returns those without a sample; nothing when it cannot be
// opened (Inspect then reports it).
func shardWarnings(w io.Writer, p, indexDir string) (empty []string) {
	ds, err := decode.OpenDataset(p, indexDir)
	if err != nil {
		return nil
	}
	defer ds.Close()
	for _, sh := range shard.ShardsOf(ds) {
		cli.PrintWarningLines(w, sh.Path(), sh.Warnings())
		if sh.Len() == 0 {
			empty = append(empty, sh.Path())
		}
	}
	return empty
}

// emptyShardsError is inspect's error: err, else an error naming the
// shards without a sample, which run refuses.
func emptyShardsError(err error, empty []string) error {
	if err != nil || len(empty) == 0 {
		return err
	}
	return fmt.Errorf("inspect: %s %s no samples (run refuses such a shard): %s",
		cli.Plural(len(empty), "shard", "shards"), map[bool]string{true: "has", false: "have"}[len(empty) == 1], strings.Join(empty, " "))
}
