package decode

import (
	"context"
	"errors"
	"fmt"
	"math"
)

// RecordSummary is one line of `datahelix inspect`: the record of a sample
// flattened into the fields a person checks, and its estimated cost.
type RecordSummary struct {
	Key      string `json:"key"`
	Shard    string `json:"shard"`
	Modality string `json:"modality"`
	Bytes    int64  `json:"bytes"`
	// Width and Height are the clip's, or the first image's, as stored
	// (ffprobe's width and height).
	Width  int `json:"width"`
	Height int `json:"height"`
	// Frames counts the frames of the clip's record (VideoInfo.Frames),
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
	// FramesShown counts the frames FFmpeg outputs: Frames less those an
	// MP4 edit list hides (VideoInfo.Discarded: the pre-roll of a cut, a
	// frame past an edit's end that shown ones refer to). It is ffprobe
	// -count_frames' nb_read_frames and the line count of ffmpeg -f
	// framemd5, except for frames only a decode finds undecodable (a cut
	// starting without a keyframe), which it still counts. For images it
	// is Frames.
	FramesShown int `json:"frames_shown"`
	// Rotation is the rotation of the clip's display matrix (MP4/MOV tkhd
	// and mvhd) in degrees counterclockwise, -180 to 180, as ffprobe
	// prints it in its side data; 0 when there is none. Set by Inspect,
	// which reads the clip's bytes, not by Summarize.
	Rotation int `json:"rotation,omitempty"`
	// DisplayWidth and DisplayHeight are the size of the picture as shown:
	// Width and Height, swapped when the display matrix turns the clip by
	// 90 or 270 degrees, as the ffmpeg CLI and decode turn it.
	DisplayWidth  int `json:"display_width"`
	DisplayHeight int `json:"display_height"`
}

// Summarize flattens a record into a RecordSummary, with the cost
// estimate of m (none when m is nil).
func Summarize(r *Record, m *CostModel) RecordSummary {
	s := RecordSummary{Key: r.Key, Shard: r.Shard, Modality: r.Modality.String(), Bytes: r.Bytes}
	switch {
	case r.Video != nil:
		v := r.Video
		s.Width, s.Height, s.Frames, s.Codec, s.Keyframes = v.Width, v.Height, v.Frames, v.Codec, len(v.Keyframes)
		s.FramesShown = v.Frames - len(v.Discarded)
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
// or tar files, as OpenDataset takes them), builds its record and calls
// visit with its summary, in shard and index order. A sample whose bytes
// cannot be read or whose record cannot be built is visited with Error
// set — never skipped — and Inspect then returns an error wrapping
// ErrSamplesFailed that counts them. A shard that cannot be opened stops
// the walk with its error, as does an error from visit or ctx.
func Inspect(ctx context.Context, paths []string, cacheDir string, m *CostModel, visit func(RecordSummary) error) error {
	failed, total := 0, 0
	for _, p := range paths {
		ds, err := OpenDataset(p, cacheDir)
		if err != nil {
			return err
		}
		err = inspectDataset(ctx, ds, m, func(s RecordSummary) error {
			total++
			if s.Error != "" {
				failed++
			}
			return visit(s)
		})
		ds.Close()
		if err != nil {
			return err
		}
	}
	if failed > 0 {
		return fmt.Errorf("%w: %d of %d samples", ErrSamplesFailed, failed, total)
	}
	return nil
}

func inspectDataset(ctx context.Context, ds *Dataset, m *CostModel, visit func(RecordSummary) error) error {
	for _, sh := range ds.Shards {
		for i := 0; i < sh.Len(); i++ {
			if err := ctx.Err(); err != nil {
				return err
			}
			e := sh.Entry(i)
			sum := RecordSummary{Key: e.Key, Shard: sh.Path(), Modality: "error", Bytes: e.Size}
			smp, err := sh.ReadSample(i)
			var rec *Record
			if err == nil {
				rec, err = ParseRecord(smp)
			}
			if err != nil {
				sum.Error = err.Error()
			} else {
				sum = Summarize(rec, m)
				addRotation(&sum, smp, rec)
			}
			if err := visit(sum); err != nil {
				return err
			}
		}
	}
	return nil
}

// addRotation sets s.Rotation and the displayed size from the display
// matrix of the sample's clip when it is an MP4/MOV file.
func addRotation(s *RecordSummary, smp *Sample, r *Record) {
	v := r.Video
	if v == nil || v.Container != "mp4" && v.Container != "mov" || v.Member < 0 || v.Member >= len(smp.Members) {
		return
	}
	ccw, turn := mp4Rotation(smp.Members[v.Member].Data)
	s.Rotation = ccw
	if turn == 90 || turn == 270 {
		s.DisplayWidth, s.DisplayHeight = s.Height, s.Width
	}
}

// mp4Rotation reads the display matrix of the first video track of an
// MP4/MOV file as FFmpeg 5.1's mov demuxer builds it (the tkhd matrix
// times the mvhd matrix read before it) and returns its rotation as
// ffprobe prints it (av_display_rotation_get: degrees counterclockwise,
// truncated to an integer) and the clockwise turn, 0, 90, 180 or 270
// degrees, that shows the picture upright, as the ffmpeg 5.1 CLI and
// package av read it (av.StreamInfo.Rotation). A file without a matrix,
// or with an identity or degenerate one, has neither.
func mp4Rotation(data []byte) (ccw, turn int) {
	var movie, track [9]int32 // row-major, as in the file; movie is zero without an mvhd, as in FFmpeg
	found := false
	it := boxIter{b: child(data, "moov")}
	for !found {
		typ, body, ok := it.next()
		if !ok {
			return 0, 0
		}
		switch string(typ[:]) {
		case "mvhd":
			if v, _, p, ok := fullBox(body); ok {
				readMatrix(&movie, p, v, 32, 44)
			}
		case "trak":
			if _, _, p, ok := fullBox(child(child(body, "mdia"), "hdlr")); !ok || len(p) < 8 || string(p[4:8]) != "vide" {
				continue
			}
			found = true
			v, _, p, ok := fullBox(child(body, "tkhd"))
			if !ok || !readMatrix(&track, p, v, 36, 48) {
				return 0, 0
			}
		}
	}
	// mov_read_tkhd: res[i][j] = sum over e of track[i][e]*movie[e][j],
	// shifted by the fixed point of row e (16.16, 16.16, 2.30).
	var m [9]int32
	shift := [3]uint{16, 16, 30}
	for i := range 3 {
		for j := range 3 {
			var sum int64
			for e := range 3 {
				sum += int64(track[3*i+e]) * int64(movie[3*e+j]) >> shift[e]
			}
			m[3*i+j] = int32(sum)
		}
	}
	if m == [9]int32{0x10000, 0, 0, 0, 0x10000, 0, 0, 0, 1 << 30} {
		return 0, 0 // FFmpeg exports no matrix
	}
	// av_display_rotation_get.
	fp := func(k int) float64 { return float64(m[k]) / 0x10000 }
	s0, s1 := math.Hypot(fp(0), fp(3)), math.Hypot(fp(1), fp(4))
	if s0 == 0 || s1 == 0 {
		return 0, 0
	}
	rot := -math.Atan2(fp(1)/s1, fp(0)/s0) * 180 / math.Pi
	// The ffmpeg CLI's get_rotation, as av.c's read_rotation.
	theta := -math.Round(rot)
	theta -= 360 * math.Floor(theta/360+0.9/360)
	angle := int(theta)
	if angle < 0 || angle >= 360 {
		angle = 0
	}
	return int(rot), (angle + 45) / 90 % 4 * 90
}

// readMatrix reads into m the 3x3 matrix of a full box of version v
// whose payload is p, at offset off0 of a version 0 payload or off1 of a
// version 1 one; it reports false for another version or a payload too
// short.
func readMatrix(m *[9]int32, p []byte, v uint8, off0, off1 int) bool {
	off := off0
	if v == 1 {
		off = off1
	}
	if v > 1 || len(p) < off+36 {
		return false
	}
	for k := range m {
		m[k] = int32(be32(p, off+4*k))
	}
	return true
}
