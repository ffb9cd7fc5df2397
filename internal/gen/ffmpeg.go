package gen

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"strconv"

	"github.com/datahelix/datahelix/internal/tjpeg"
)

// renderer encodes specs into real media with the ffmpeg CLI: one
// single-threaded process per item with bit-exact flags, so that the bytes
// depend only on the spec, the seed and the FFmpeg build.
type renderer struct {
	ffmpeg string
	tmp    string // scratch directory for containers that need seeking
}

// exact are the output options that make FFmpeg's output reproducible.
var exact = []string{"-threads", "1", "-fflags", "+bitexact", "-flags:v", "+bitexact", "-flags:a", "+bitexact", "-map_metadata", "-1", "-map_chapters", "-1"}

func (rd *renderer) run(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, rd.ffmpeg, append([]string{"-nostdin", "-hide_banner", "-loglevel", "error", "-y"}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w: %v: %s", ErrFFmpeg, err, bytes.TrimSpace(stderr.Bytes()))
	}
	return stdout.Bytes(), nil
}

// source returns the lavfi graph of a picture source with seeded noise.
// Every source here is deterministic for its seed (FFmpeg 5.1's gradients
// source is not, so it is not used).
func source(content string, w, h, fps, noise int, seed uint32, temporal bool) string {
	size := fmt.Sprintf("size=%dx%d:rate=%d", w, h, fps)
	var src string
	switch content {
	case "life":
		src = fmt.Sprintf("life=%s:seed=%d:ratio=0.25:mold=8:life_color=#D8A040:death_color=#183050:mold_color=#60A060", size, seed)
	case "cellauto":
		src = fmt.Sprintf("cellauto=%s:seed=%d:rule=110:random_fill_ratio=0.5,format=rgb24", size, seed)
	case "mandelbrot":
		src = fmt.Sprintf("mandelbrot=%s:maxiter=256:start_x=%f:start_y=%f", size, -0.75+float64(seed%1000)/4000, float64(seed/1000%1000)/4000)
	case "testsrc":
		src = "testsrc=" + size
	default:
		// testsrc2 draws even sizes only: draw one larger and crop.
		src = fmt.Sprintf("testsrc2=size=%dx%d:rate=%d,crop=%d:%d:0:0:exact=1", w+w%2, h+h%2, fps, w, h)
	}
	flags := "u"
	if temporal {
		flags = "t+u"
	}
	return fmt.Sprintf("%s,noise=alls=%d:allf=%s:all_seed=%d", src, noise, flags, seed)
}

// video encodes one clip and returns its bytes. It goes through a file,
// as the MP4 muxer writes the moov box (and moves it ahead of mdat for
// faststart) and the Matroska muxer the duration and cues at the end.
func (rd *renderer) video(ctx context.Context, v *videoSpec, seed uint32) ([]byte, error) {
	args := []string{"-f", "lavfi", "-i", source(v.Content, v.Width, v.Height, v.FPS, v.Noise, seed, true)}
	if v.Audio {
		args = append(args, "-f", "lavfi", "-i", fmt.Sprintf("sine=frequency=%d:sample_rate=44100", 200+seed%800))
	}
	args = append(args, "-t", strconv.FormatFloat(v.Seconds, 'f', 2, 64), "-map", "0:v")
	if v.Audio {
		args = append(args, "-map", "1:a", "-c:a", "aac", "-b:a", "64k", "-ac", "1")
	}
	args = append(args, exact...)
	k := strconv.Itoa(v.KbitRate)
	rate := []string{"-b:v", k + "k", "-maxrate", strconv.Itoa(v.KbitRate*3/2) + "k", "-bufsize", strconv.Itoa(v.KbitRate*2) + "k"}
	gop := strconv.Itoa(v.GOP)
	switch v.Codec {
	case "h264":
		args = append(args, "-c:v", "libx264", "-preset", "superfast", "-profile:v", "high", "-bf", strconv.Itoa(v.BFrames), "-g", gop)
	case "hevc":
		args = append(args, "-c:v", "libx265", "-preset", "ultrafast", "-tag:v", "hvc1",
			"-x265-params", fmt.Sprintf("pools=none:frame-threads=1:log-level=error:keyint=%d:bframes=%d", v.GOP, v.BFrames))
	case "vp9":
		args = append(args, "-c:v", "libvpx-vp9", "-deadline", "realtime", "-cpu-used", "8", "-row-mt", "0", "-g", gop)
	case "av1":
		args = append(args, "-c:v", "libaom-av1", "-usage", "realtime", "-cpu-used", "8", "-row-mt", "0", "-g", gop)
	default:
		return nil, fmt.Errorf("gen: unknown codec %q", v.Codec)
	}
	args = append(args, rate...)
	args = append(args, "-pix_fmt", "yuv420p")
	if v.FastStart {
		args = append(args, "-movflags", "+faststart")
	}
	return rd.toFile(ctx, v.Container, args)
}

// audio encodes one audio file and returns its bytes.
func (rd *renderer) audio(ctx context.Context, a *audioSpec, seed uint32) ([]byte, error) {
	src := fmt.Sprintf("sine=frequency=%d:sample_rate=%d,volume=0.5[s];anoisesrc=color=pink:amplitude=0.05:seed=%d:sample_rate=%d[n];[s][n]amix=inputs=2:duration=first",
		a.Freq, a.SampleRate, seed, a.SampleRate)
	args := []string{"-f", "lavfi", "-i", src, "-t", strconv.FormatFloat(a.Seconds, 'f', 2, 64), "-ac", strconv.Itoa(a.Channels)}
	args = append(args, exact...)
	switch a.Codec {
	case "aac":
		args = append(args, "-c:a", "aac", "-b:a", "96k")
	case "mp3":
		args = append(args, "-c:a", "libmp3lame", "-b:a", "128k")
	case "flac":
		args = append(args, "-c:a", "flac")
	case "opus":
		args = append(args, "-c:a", "libopus", "-b:a", "64k")
	default:
		return nil, fmt.Errorf("gen: unknown audio codec %q", a.Codec)
	}
	return rd.toFile(ctx, a.Container, args)
}

// image encodes one image and returns its bytes.
func (rd *renderer) image(ctx context.Context, im imageSpec, seed uint32) ([]byte, error) {
	args := []string{"-f", "lavfi", "-i", source(im.Content, im.Width, im.Height, 1, im.Noise, seed, false), "-frames:v", "1"}
	args = append(args, exact...)
	switch im.Format {
	case "jpg":
		pix := map[string]string{"420": "yuvj420p", "422": "yuvj422p", "444": "yuvj444p"}[im.Subsampling]
		args = append(args, "-c:v", "mjpeg", "-q:v", strconv.Itoa(im.Quality), "-pix_fmt", pix, "-f", "image2pipe", "-")
	case "png":
		args = append(args, "-c:v", "png", "-pix_fmt", "rgb24", "-f", "image2pipe", "-")
	case "webp":
		// To a file, not a pipe: the WebP muxer seeks back to write the
		// RIFF size when it finishes, and on a pipe it cannot, so any
		// image larger than FFmpeg's 32 KB output buffer kept a size of
		// 0, which decoders other than FFmpeg reject.
		args = append(args, "-c:v", "libwebp", "-quality", strconv.Itoa(im.Quality), "-f", "webp")
		b, err := rd.toFile(ctx, "webp", args)
		if err != nil {
			return nil, err
		}
		return b, checkRIFF(b)
	default:
		return nil, fmt.Errorf("gen: unknown image format %q", im.Format)
	}
	b, err := rd.run(ctx, args...)
	if err != nil || !im.Progressive {
		return b, err
	}
	// FFmpeg writes baseline JPEG: rewrite it losslessly with progressive
	// scans (TurboJPEG).
	return tjpeg.Progressive(b)
}

// toFile runs ffmpeg with args and a fresh file in the scratch directory
// as its output, for muxers that seek back to finish their header, and
// returns the file's bytes.
func (rd *renderer) toFile(ctx context.Context, ext string, args []string) ([]byte, error) {
	f, err := os.CreateTemp(rd.tmp, "item-*."+ext)
	if err != nil {
		return nil, fmt.Errorf("gen: %w", err)
	}
	out := f.Name()
	f.Close()
	defer os.Remove(out)
	if _, err := rd.run(ctx, append(args, out)...); err != nil {
		return nil, err
	}
	return os.ReadFile(out)
}

// checkRIFF checks that b is a RIFF WEBP file whose RIFF size field
// covers exactly the rest of the file: a safeguard against writing a file
// that decoders other than FFmpeg's reject.
func checkRIFF(b []byte) error {
	if len(b) < 12 || string(b[:4]) != "RIFF" || string(b[8:12]) != "WEBP" {
		return fmt.Errorf("%w: output is not a RIFF WEBP file", ErrFFmpeg)
	}
	if n := binary.LittleEndian.Uint32(b[4:8]); int64(n) != int64(len(b))-8 {
		return fmt.Errorf("%w: WebP RIFF size %d, want %d (file length %d less 8)", ErrFFmpeg, n, len(b)-8, len(b))
	}
	return nil
}
