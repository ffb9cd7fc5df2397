package av

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// benchClips caches the clips the benchmarks encode with the ffmpeg CLI:
// H.264 High with B-frames, 25 fps, a keyframe every 2 s (the long end of
// web video's 1-2 s), 640x360 at ~800 kbit/s, seeded moving content.
var benchClips sync.Map

func benchClip(b *testing.B, seconds int) (path string, data []byte) {
	b.Helper()
	ff := needFFmpeg(b)
	key := strconv.Itoa(seconds)
	if p, ok := benchClips.Load(key); ok {
		path = p.(string)
	} else {
		dir, err := os.MkdirTemp("", "avbench")
		if err != nil {
			b.Fatal(err)
		}
		path = filepath.Join(dir, "clip"+key+".mp4")
		src := "testsrc2=size=640x360:rate=25:duration=" + key + ",noise=alls=6:allf=t+u:all_seed=5"
		out, err := exec.Command(ff, "-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", src, "-threads", "1",
			"-c:v", "libx264", "-preset", "superfast", "-bf", "3", "-g", "50", "-b:v", "800k", "-pix_fmt", "yuv420p", path).CombinedOutput()
		if err != nil {
			b.Fatalf("ffmpeg: %v: %s", err, out)
		}
		benchClips.Store(key, path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	return path, data
}

var benchRE = regexp.MustCompile(`utime=([0-9.]+)s stime=([0-9.]+)s rtime=([0-9.]+)s`)

// threadCPU returns the CPU time the calling OS thread has used.
func threadCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func seconds(b []byte) time.Duration {
	s, _ := strconv.ParseFloat(string(b), 64)
	return time.Duration(s * float64(time.Second))
}

// BenchmarkFullDecodeVsFFmpeg decodes a 10 s clip fully through DecodeAll
// and through `ffmpeg -threads 1 -i FILE -f null -`, alternating, and
// reports the ratio of our time to ffmpeg's. ffmpeg's side is what it
// times itself with -benchmark (its decode loop: no process start, no
// probing). x_ffmpeg_cpu compares CPU time (our thread's against ffmpeg's
// utime+stime), which a shared machine disturbs least; x_ffmpeg_wall
// compares wall time; x_ffmpeg_process compares against the whole ffmpeg
// process, start-up included.
func BenchmarkFullDecodeVsFFmpeg(b *testing.B) {
	path, data := benchClip(b, 10)
	ff := needFFmpeg(b)
	cfg := DefaultConfig()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var ours, oursCPU, loop, loopCPU, process time.Duration
	for b.Loop() {
		t, c := time.Now(), threadCPU()
		st, err := DecodeAll(context.Background(), data, cfg)
		if err != nil || st.FramesDecoded != 250 {
			b.Fatalf("decoded %d frames: %v", st.FramesDecoded, err)
		}
		ours += time.Since(t)
		oursCPU += threadCPU() - c
		t = time.Now()
		out, err := exec.Command(ff, "-nostdin", "-benchmark", "-threads", "1", "-i", path, "-f", "null", "-").CombinedOutput()
		process += time.Since(t)
		m := benchRE.FindSubmatch(out)
		if err != nil || m == nil {
			b.Fatalf("ffmpeg: %v: %s", err, bytes.TrimSpace(out))
		}
		loopCPU += seconds(m[1]) + seconds(m[2])
		loop += seconds(m[3])
	}
	b.ReportMetric(float64(oursCPU)/float64(loopCPU), "x_ffmpeg_cpu")
	b.ReportMetric(float64(ours)/float64(loop), "x_ffmpeg_wall")
	b.ReportMetric(float64(ours)/float64(process), "x_ffmpeg_process")
	b.ReportMetric(float64(oursCPU.Milliseconds())/float64(b.N), "cpu_ms_ours")
}
