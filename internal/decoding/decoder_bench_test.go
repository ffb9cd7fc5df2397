package decoding

import (
	"bytes"
	"context"
	"image/jpeg"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/datahelix/datahelix/internal/av"
)

// benchMedia encodes a file with the ffmpeg CLI for a benchmark.
func benchMedia(b *testing.B, name string, args ...string) []byte {
	b.Helper()
	ff, err := exec.LookPath("ffmpeg")
	if err != nil {
		b.Skip("ffmpeg CLI not installed")
	}
	path := filepath.Join(b.TempDir(), name)
	out, err := exec.Command(ff, append(append([]string{"-nostdin", "-v", "error", "-y"}, args...), path)...).CombinedOutput()
	if err != nil {
		b.Fatalf("ffmpeg: %v: %s", err, out)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	return data
}

// threadCPU returns the CPU time the calling OS thread has used.
func threadCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkSampledVsFullDecode decodes 8 frames (224x224 RGB) of a 30 s
// H.264 clip (640x360, 25 fps, B-frames, a keyframe every 2 s) with
// Decoder.Decode, and the whole clip with av.DecodeAll, alternating, and
// reports how many times faster the sampled decode is (goal: >= 3), in CPU
// time and in wall time.
func BenchmarkSampledVsFullDecode(b *testing.B) {
	data := benchMedia(b, "clip30.mp4", "-f", "lavfi", "-i", "testsrc2=size=640x360:rate=25:duration=30,noise=alls=6:allf=t+u:all_seed=5",
		"-threads", "1", "-c:v", "libx264", "-preset", "superfast", "-bf", "3", "-g", "50", "-b:v", "800k", "-pix_fmt", "yuv420p")
	s := &Sample{Shard: "bench", Key: "clip", Members: []Member{{Name: "clip.mp4", Ext: "mp4", Data: data}}}
	rec, err := ParseRecord(s, Limits{})
	if err != nil {
		b.Fatal(err)
	}
	d := NewDecoder(Options{})
	cfg := d.opts.Limits.avConfig(224, 1)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var sampled, sampledCPU, full, fullCPU time.Duration
	frames := 0
	for b.Loop() {
		t, c := time.Now(), threadCPU()
		out, err := d.Decode(context.Background(), s, rec)
		if err != nil {
			b.Fatal(err)
		}
		sampled += time.Since(t)
		sampledCPU += threadCPU() - c
		frames = out.DecodedFrames
		t, c = time.Now(), threadCPU()
		if _, err := av.DecodeAll(context.Background(), data, cfg); err != nil {
			b.Fatal(err)
		}
		full += time.Since(t)
		fullCPU += threadCPU() - c
	}
	b.ReportMetric(float64(fullCPU)/float64(sampledCPU), "x_faster_cpu")
	b.ReportMetric(float64(full)/float64(sampled), "x_faster_wall")
	b.ReportMetric(float64(frames), "frames_decoded/750")
	b.ReportMetric(float64(sampledCPU.Microseconds())/1000/float64(b.N), "cpu_ms_sampled")
}

// BenchmarkImageTurboVsStdlib turns a 1920x1080 JPEG into a 224x224 RGB
// tensor through the decoder (TurboJPEG with DCT scaling, then the resize)
// and through image/jpeg plus the same conversion and resize, alternating,
// and reports the speed-up.
func BenchmarkImageTurboVsStdlib(b *testing.B) {
	data := benchMedia(b, "big.jpg", "-f", "lavfi", "-i", "testsrc2=size=1920x1080:rate=1,noise=alls=10:allf=u:all_seed=2",
		"-frames:v", "1", "-c:v", "mjpeg", "-q:v", "3", "-pix_fmt", "yuvj420p")
	d := NewDecoder(Options{})
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var turbo, std time.Duration
	dst := make([]byte, 224*224*3)
	for b.Loop() {
		c := threadCPU()
		if _, err := d.decodeImage(data); err != nil {
			b.Fatal(err)
		}
		turbo += threadCPU() - c
		c = threadCPU()
		m, err := jpeg.Decode(bytes.NewReader(data))
		if err != nil {
			b.Fatal(err)
		}
		rgb := toRGB(m)
		resizeRGB(dst, 224, 224, rgb.Pix, rgb.Width, rgb.Height)
		std += threadCPU() - c
	}
	b.ReportMetric(float64(std)/float64(turbo), "x_faster_cpu")
	b.ReportMetric(float64(turbo.Microseconds())/1000/float64(b.N), "cpu_ms_turbo")
	b.ReportMetric(float64(std.Microseconds())/1000/float64(b.N), "cpu_ms_stdlib")
}
