package inspect

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/datahelix/datahelix/decode"
	"github.com/datahelix/datahelix/internal/costmodel"
	"github.com/datahelix/datahelix/internal/decoding"
	"github.com/datahelix/datahelix/internal/shard"
)

// RecordSummary is one line of `datahelix inspect`: the record of a sample
// flattened into the fields a person checks, and its estimated cost.
type RecordSummary struct {
	Key      string `json:"key"`
	Shard    string `json:"shard"`
	Modality string `json:"modality"`
	// Bytes counts the sample's member bytes (decoding.Record.Bytes), or for a
	// sample that cannot be read, its span in the shard.
	Bytes int64 `json:"bytes"`
	// Width and Height are the clip's, or the first image's, as stored
	// (ffprobe's width and height).
	Width  int `json:"width"`
	Height int `json:"height"`
	// Frames counts the frames of the clip's record (decoding.VideoInfo.Frames),
	// those FFmpeg shows and those it decodes without showing them, or a
	// sample's images.
	Frames    int     `json:"frames"`
	DurationS float64 `json:"duration_s"`
	Codec     string  `json:"codec"` // video codec or first image's format
	Keyframes int     `json:"keyframes"`
	Tokens    int     `json:"tokens"`
	EstCostUS int64   `json:"est_cost_us"`
	Estimated bool    `json:"frames_estimated,omitempty"` // frame count from duration, not counted
	Error     string  `json:"error,omitempty"`            // why the record could not be built
	// ModelKey is the cost model key, such as "video/h264".
	ModelKey string `json:"model"`
	// FramesShown counts the frames FFmpeg outputs at a time of their
	// own, those SampleFrames may pick: Frames less decoding.VideoInfo.Discarded
	// (the frames an MP4 edit list hides: the pre-roll of a cut, a frame
	// past an edit's end that shown ones refer to; the Matroska frames
	// left without a timestamp). It is ffprobe -count_frames'
	// nb_read_frames and the line count of ffmpeg -f framemd5, except for
	// frames only a decode finds undecodable (a cut starting without a
	// keyframe), which it still counts, untimed Matroska frames FFmpeg
	// can decode (ffprobe counts them, the CLI drops them), and the
	// hidden frames of AV1, which FFmpeg 5.1 outputs. For images it is
	// Frames.
	FramesShown int `json:"frames_shown"`
	// Rotation is the rotation of the clip's display matrix (MP4/MOV tkhd
	// and mvhd, or a Matroska Projection) in degrees counterclockwise, -180 to 180, as ffprobe
	// prints it in its side data (decoding.VideoInfo.Rotation); 0 when there is none.
	Rotation int `json:"rotation,omitempty"`
	// DisplayWidth and DisplayHeight are the size of the picture as shown:
	// Width and Height, swapped when the display matrix turns the clip by
	// 90 or 270 degrees, as the ffmpeg CLI and decode turn it.
	DisplayWidth  int `json:"display_width"`
	DisplayHeight int `json:"display_height"`
}

// Summarize flattens a record into a RecordSummary, with the cost
// estimate of m (none when m is nil).
func Summarize(r *decoding.Record, m *costmodel.Model) RecordSummary {
	s := RecordSummary{Key: r.Key, Shard: r.Shard, Modality: r.Modality.String(), Bytes: r.Bytes}
	switch {
	case r.Video != nil:
		v := r.Video
		s.Width, s.Height, s.Frames, s.Codec, s.Keyframes = v.Width, v.Height, v.Frames, v.Codec, len(v.Keyframes)
		s.FramesShown = v.Frames - len(v.Discarded)
		s.Rotation = int(v.Rotation)
		s.Estimated = v.FrameCountEstimated
		if v.Timescale > 0 {
			s.DurationS = float64(v.Duration) / float64(v.Timescale)
		}
	case len(r.Images) > 0:
		im := r.Images[0]
		s.Width, s.Height, s.Frames, s.Codec = im.Width, im.Height, len(r.Images), im.Format
		s.FramesShown = s.Frames
	}
	s.DisplayWidth, s.DisplayHeight = s.Width, s.Height
	if r.Video != nil && r.Video.Turn()%180 == 90 {
		s.DisplayWidth, s.DisplayHeight = s.Height, s.Width
	}
	if r.Text != nil {
		s.Tokens = r.Text.Tokens
	}
	if m != nil {
		s.EstCostUS = m.Estimate(r)
		s.ModelKey = m.Key(r)
	}
	return s
}

// ErrSamplesFailed reports that some samples of an inspected dataset had
// no usable record; each is listed in its summary's Error.
var ErrSamplesFailed = errors.New("decode: some samples have no usable record")

// Inspect reads every sample of the datasets at paths (directories, globs
// or tar files, as decode.OpenDataset takes them; a clip or picture given alone,
// decoding.IsMediaFile, or matched by a glob, decoding.ExpandMediaGlob, is a one-member
// sample), builds its record and calls
// visit with its summary, in shard and index order. A sample whose bytes
// cannot be read or whose record cannot be built is visited with Error
// set — never skipped — and Inspect then returns an error wrapping
// ErrSamplesFailed that counts them. A shard that cannot be opened stops
// the walk with its error, as does an error from visit or ctx.
func Inspect(ctx context.Context, paths []string, cacheDir string, m *costmodel.Model, visit func(RecordSummary) error) error {
	failed, total := 0, 0
	count := func(s RecordSummary) error {
		total++
		if s.Error != "" {
			failed++
		}
		return visit(s)
	}
	for _, arg := range paths {
		for _, p := range decoding.ExpandMediaGlob(arg) {
			if decoding.IsMediaFile(p) {
				if err := inspectFile(p, m, count); err != nil {
					return err
				}
				continue
			}
			ds, err := decode.OpenDataset(p, cacheDir)
			if err != nil {
				return err
			}
			err = inspectDataset(ctx, ds, m, count)
			ds.Close()
			if err != nil {
				return err
			}
		}
	}
	if failed > 0 {
		return fmt.Errorf("%w: %d of %d samples", ErrSamplesFailed, failed, total)
	}
	return nil
}

// inspectFile visits the summary of the media file at path, read as the
// one-member sample decoding.FileSample makes of it.
func inspectFile(path string, m *costmodel.Model, visit func(RecordSummary) error) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("decode: %w", err)
	}
	return visit(summarizeSample(decoding.FileSample(path, data), path, m))
}

// summarizeSample is the summary of smp, read from shard (or file) shard:
// its record's, or an error row counting the members' bytes, as a record
// does, with why its record cannot be built.
func summarizeSample(smp *decode.Sample, shard string, m *costmodel.Model) RecordSummary {
	rec, err := decoding.ParseRecord(smp, decoding.Limits{})
	if err == nil {
		return Summarize(rec, m)
	}
	sum := RecordSummary{Key: smp.Key, Shard: shard, Modality: "error", Error: err.Error()}
	for _, mb := range smp.Members {
		sum.Bytes += int64(len(mb.Data))
	}
	return sum
}

func inspectDataset(ctx context.Context, ds *decode.Dataset, m *costmodel.Model, visit func(RecordSummary) error) error {
	for _, sh := range shard.ShardsOf(ds) {
		for i := 0; i < sh.Len(); i++ {
			if err := ctx.Err(); err != nil {
				return err
			}
			e, err := sh.Entry(i)
			var smp *decode.Sample
			if err == nil {
				smp, err = sh.ReadSample(i)
			}
			sum := RecordSummary{Key: e.Key, Shard: sh.Path(), Modality: "error", Bytes: e.Size}
			if err != nil {
				sum.Error = err.Error() // unread: its span in the shard
			} else {
				sum = summarizeSample(smp, sh.Path(), m)
			}
			if err := visit(sum); err != nil {
				return err
			}
		}
		sh.Close() // its file and index, which the walk needs no more
	}
	return nil
}
