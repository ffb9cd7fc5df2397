package decoding

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"image"
	"image/jpeg"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/datahelix/datahelix/internal/av"
	"github.com/datahelix/datahelix/internal/mp4"
	"github.com/datahelix/datahelix/internal/video"
	"github.com/datahelix/datahelix/internal/video/videotest"
)

const mediaDir = testdata + "/media"

var testClips = []string{
	"h264_bframes.mp4", "h264_odd.mp4", "h264_intra444.mp4", "h264_audio.mkv",
	"hevc.mp4", "vp9.webm", "vp8.webm", "av1.mp4",
}

func media(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(mediaDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func decSample(key string, members map[string][]byte) *Sample {
	s := &Sample{Shard: "test.tar", Key: key}
	exts := make([]string, 0, len(members))
	for e := range members {
		exts = append(exts, e)
	}
	sort.Strings(exts)
	for _, e := range exts {
		s.Members = append(s.Members, Member{Name: key + "." + e, Ext: e, Data: members[e]})
	}
	return s
}

func TestDecodeVideoMatchesSequentialDecode(t *testing.T) {
	const size = 48
	d := NewDecoder(Options{Frames: 6, Size: size})
	plane := size * size * 3
	for _, name := range testClips {
		t.Run(name, func(t *testing.T) {
			data := media(t, name)
			s := decSample("clip", map[string][]byte{lastComponent(name): data, "txt": []byte("a caption")})
			rec, err := ParseRecord(s, Limits{})
			if err != nil {
				t.Fatal(err)
			}
			v := rec.Video
			ref, byPTS := videotest.AllFrames(t, data, size)
			// The record as parsed, none (Decode parses it), and one that only
			// estimates the frames (as some WebM records do).
			est := *rec
			ev := *v
			ev.FrameCountEstimated, ev.FramePTS, ev.FrameBytes, ev.Keyframes = true, nil, nil, nil
			est.Video = &ev
			for _, r := range []*Record{rec, nil, &est} {
				out, err := d.Decode(context.Background(), s, r)
				if err != nil {
					t.Fatal(err)
				}
				if len(out.Tensors) != 1 || !slices.Equal(out.Tensors[0].Shape, []int{6, size, size, 3}) {
					t.Fatalf("got tensors %v, want one [6 %d %d 3]", decShapes(out), size, size)
				}
				if out.MissedFrames != 0 {
					t.Errorf("got %d missed frames: the record's timing disagrees with FFmpeg's", out.MissedFrames)
				}
				if out.Text != "a caption" || out.Modality != ModalityVideo {
					t.Errorf("got text %q modality %v, want %q video", out.Text, out.Modality, "a caption")
				}
				rv := v
				if r != nil {
					rv = r.Video
				}
				sampled := video.SampleFrames(rv, 6)
				if len(sampled) != 6 {
					t.Fatalf("got %d sampled frames, want 6", len(sampled))
				}
				for slot, f := range sampled {
					p, ok := byPTS[rv.FrameTime(f)]
					if !rv.PerFrame() {
						p, ok = shownAt(t, data, rv, f, byPTS)
					}
					if !ok {
						t.Fatalf("slot %d: frame %d pts %d is not a pts FFmpeg reports", slot, f, v.FrameTime(f))
					}
					if !bytes.Equal(out.Tensors[0].Data[slot*plane:(slot+1)*plane], ref[p*plane:(p+1)*plane]) {
						t.Errorf("slot %d (frame %d): differs from the sequential decode", slot, f)
					}
				}
				// Exact timing: no more than the plan's simulated decodes, plus
				// the decoder's reorder delay (non-reference frames are even
				// skipped). Estimated timing seeks by the demuxer's index and
				// may decode a GOP twice.
				limit := 2 * rv.Frames
				if rv.PerFrame() {
					limit = video.PlanTasks(rv, sampled, 1)[0].DecodeFrames + 4
				}
				if out.DecodedFrames <= 0 || out.DecodedFrames > limit {
					t.Errorf("got %d decoded frames, want 1 to %d", out.DecodedFrames, limit)
				}
			}
		})
	}
}

// shownAt returns the presentation position of the frame FFmpeg shows at
// v.FrameTime(f) (the last one at or before it), for records without
// per-frame timing.
func shownAt(t *testing.T, data []byte, v *VideoInfo, f int, byPTS map[int64]int) (int, bool) {
	_, info, err := av.Packets(context.Background(), data, av.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	want := v.FrameTime(f) * int64(info.TimeBase.Den) / (int64(v.Timescale) * int64(info.TimeBase.Num))
	pos, found := 0, false
	for p, i := range byPTS {
		if p <= want && i >= pos {
			pos, found = i, true
		}
	}
	return pos, found || len(byPTS) > 0
}

func decShapes(o *Output) [][]int {
	var s [][]int
	for _, t := range o.Tensors {
		s = append(s, t.Shape)
	}
	return s
}

// TestDecodeVideoTasksConcurrently splits a clip's targets into one task
// per target and runs them on separate goroutines into one tensor.
func TestDecodeVideoTasksConcurrently(t *testing.T) {
	d := NewDecoder(Options{Frames: 8, Size: 32})
	data := media(t, "h264_bframes.mp4")
	s := decSample("clip", map[string][]byte{"mp4": data})
	rec, err := ParseRecord(s, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	whole, err := d.Decode(context.Background(), s, rec)
	if err != nil {
		t.Fatal(err)
	}
	v := rec.Video
	dst := d.newVideoTensor()
	var wg sync.WaitGroup
	errs := make([]error, d.opts.Frames)
	for slot, f := range video.SampleFrames(v, d.opts.Frames) {
		task := video.Task{Keyframe: v.DecodeStart(f), Targets: []int{f}, Slots: []int{slot}}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[slot] = d.DecodeVideoTask(context.Background(), data, v, task, dst.Data)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(dst.Data, whole.Tensors[0].Data) {
		t.Errorf("tasks decoded concurrently differ from Decode of the whole clip")
	}
}

func TestDecodeShortClipRepeatsFrames(t *testing.T) {
	const size, frames = 16, 40
	data := media(t, "h264_intra444.mp4") // 30 frames
	d := NewDecoder(Options{Frames: frames, Size: size})
	s := decSample("clip", map[string][]byte{"mp4": data})
	rec, err := ParseRecord(s, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	out, err := d.Decode(context.Background(), s, rec)
	if err != nil {
		t.Fatal(err)
	}
	ref, byPTS := videotest.AllFrames(t, data, size)
	sampled := video.SampleFrames(rec.Video, frames)
	if len(sampled) != 30 {
		t.Fatalf("got %d sampled frames, want all 30", len(sampled))
	}
	plane := size * size * 3
	for k := range frames {
		p := byPTS[rec.Video.FramePTS[sampled[k*len(sampled)/frames]]]
		if !bytes.Equal(out.Tensors[0].Data[k*plane:(k+1)*plane], ref[p*plane:(p+1)*plane]) {
			t.Errorf("slot %d: got a frame other than presentation position %d", k, p)
		}
	}
}

// imageReference decodes with the standard library at full size and
// resizes with the dumb float reference.
func imageReference(t *testing.T, data []byte, size int) []byte {
	m, format, err := image.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	rgb := toRGB(m)
	if format == "webp" {
		rgb = webpToRGB(m) // lossy WebP is limited-range YCbCr, not JFIF
	}
	out := make([]byte, size*size*3)
	resizeReference(out, size, size, rgb.Pix, rgb.Width, rgb.Height)
	return out
}

func TestDecodeImages(t *testing.T) {
	const size = 96
	d := NewDecoder(Options{Size: size})
	tests := []struct {
		file    string
		maxDiff float64 // mean abs difference from image/jpeg|png|webp + float resize
	}{
		{"image420.jpg", 4}, // TurboJPEG decodes at 3/8 scale (DCT) and upsamples chroma differently
		{"image444.jpg", 4},
		{"image.png", 0.5},
		{"image.webp", 0.5},
	}
	for _, tc := range tests {
		data := media(t, tc.file)
		out, err := d.Decode(context.Background(), decSample("img", map[string][]byte{lastComponent(tc.file): data}), nil)
		if err != nil {
			t.Fatalf("%s: %v", tc.file, err)
		}
		if out.Modality != ModalityImage || len(out.Tensors) != 1 || !slices.Equal(out.Tensors[0].Shape, []int{size, size, 3}) {
			t.Fatalf("%s: got %v %v, want image [%d %d 3]", tc.file, out.Modality, decShapes(out), size, size)
		}
		ref := imageReference(t, data, size)
		sum := 0
		for i, v := range out.Tensors[0].Data {
			dv := int(v) - int(ref[i])
			sum += max(dv, -dv)
		}
		if mean := float64(sum) / float64(len(ref)); mean > tc.maxDiff {
			t.Errorf("%s: got mean abs diff %.2f from the reference, want <= %.1f", tc.file, mean, tc.maxDiff)
		}
	}
}

func TestDecodeDocumentAndText(t *testing.T) {
	d := NewDecoder(Options{Size: 32})
	doc := decSample("doc", map[string][]byte{
		"0.txt": []byte("first paragraph"), "1.jpg": media(t, "image420.jpg"),
		"2.txt": []byte("second paragraph"), "3.png": media(t, "image.png"),
		"4.webp": media(t, "image.webp"), "json": []byte(`{"url":"x"}`),
	})
	out, err := d.Decode(context.Background(), doc, nil)
	if err != nil {
		t.Fatal(err)
	}
	if out.Modality != ModalityDocument || len(out.Tensors) != 3 {
		t.Fatalf("got %v with %d tensors, want document with 3", out.Modality, len(out.Tensors))
	}
	if want := "first paragraph\nsecond paragraph"; out.Text != want {
		t.Errorf("got text %q, want %q", out.Text, want)
	}
	one, _ := d.Decode(context.Background(), decSample("img", map[string][]byte{"jpg": media(t, "image420.jpg")}), nil)
	if !bytes.Equal(one.Tensors[0].Data, out.Tensors[0].Data) {
		t.Errorf("document image 1 differs from the same image decoded alone")
	}
	text := decSample("t", map[string][]byte{"txt": []byte(strings.Repeat("hello world ", 50))})
	out, err = d.Decode(context.Background(), text, nil)
	if err != nil {
		t.Fatal(err)
	}
	if out.Modality != ModalityText || len(out.Tensors) != 0 || out.Tokens != estimateTokens([]byte(out.Text)) || out.Tokens < 50 {
		t.Errorf("text: got %v, %d tensors, %d tokens", out.Modality, len(out.Tensors), out.Tokens)
	}
}

func TestDecodeLimitsAndErrors(t *testing.T) {
	clip := media(t, "h264_bframes.mp4")
	jpg := media(t, "image420.jpg")
	tests := []struct {
		name   string
		lim    Limits
		sample *Sample
		want   error
		member string
	}{
		{"video pixels", Limits{MaxPixels: 1000}, decSample("k", map[string][]byte{"mp4": clip}), ErrLimit, "k.mp4"},
		{"frames", Limits{MaxFramesDecoded: 3}, decSample("k", map[string][]byte{"mp4": clip}), ErrLimit, "k.mp4"},
		{"codec", Limits{Codecs: "vp9"}, decSample("k", map[string][]byte{"mp4": clip}), ErrUnsupported, "k.mp4"},
		{"image pixels", Limits{MaxImagePixels: 1000}, decSample("k", map[string][]byte{"jpg": jpg}), ErrLimit, "k.jpg"},
		{"images per doc", Limits{MaxImages: 1}, decSample("k", map[string][]byte{"0.jpg": jpg, "1.jpg": jpg, "txt": []byte("x")}), ErrLimit, ""},
		{"no payload", Limits{}, decSample("k", map[string][]byte{"bin": []byte{1, 2}}), ErrNoPayload, ""},
		{"truncated jpeg", Limits{}, decSample("k", map[string][]byte{"jpg": jpg[:len(jpg)/3]}), ErrCorrupt, "k.jpg"},
		{"deadline video", Limits{SampleDeadline: time.Nanosecond}, decSample("k", map[string][]byte{"mp4": clip}), ErrTimeout, "k.mp4"},
		{"deadline image", Limits{SampleDeadline: time.Nanosecond}, decSample("k", map[string][]byte{"jpg": jpg}), ErrTimeout, "k.jpg"},
	}
	for _, tc := range tests {
		d := NewDecoder(Options{Size: 32, Limits: tc.lim})
		_, err := d.Decode(context.Background(), tc.sample, nil)
		var se *SampleError
		if !errors.Is(err, tc.want) || !errors.As(err, &se) {
			t.Errorf("%s: got %v, want a *SampleError wrapping %v", tc.name, err, tc.want)
			continue
		}
		if se.Member != tc.member || se.Shard != "test.tar" || se.Key != "k" {
			t.Errorf("%s: got shard %q key %q member %q, want test.tar k %q", tc.name, se.Shard, se.Key, se.Member, tc.member)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := NewDecoder(Options{}).Decode(ctx, decSample("k", map[string][]byte{"mp4": clip}), nil)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: got %v, want context.Canceled", err)
	}
}

func TestFrameMD5s(t *testing.T) {
	data := media(t, "h264_bframes.mp4")
	sums, err := frameMD5s(context.Background(), data, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	hs, _, err := av.FrameMD5s(context.Background(), data, av.DefaultConfig())
	if err != nil || len(sums) != 90 || len(hs) != 90 {
		t.Fatalf("got %d sums (err %v), want 90", len(sums), err)
	}
	if _, err := frameMD5s(context.Background(), []byte("junk"), Limits{}); !errors.Is(err, ErrCorrupt) {
		t.Errorf("junk: got %v, want ErrCorrupt", err)
	}
}

var _ = jpeg.Decode // image.Decode needs the JPEG format registered

// TestDecodeOpenGOP decodes every frame of the open-GOP clips of
// make_edits.sh (H.264 with x264's open-gop, HEVC with x265's CRA
// keyframes) whole, split into up to 4 tasks, as one task per frame, and
// as one task per frame made by hand from the frame's own keyframe.
// No frame may be missed, each slot must hold the frame FFmpeg shows at
// its pts (the sequential decode, and the ffmpeg CLI's framemd5 of that
// frame scaled to RGB when ffmpeg is installed), and each task may decode
// no more frames than video.PlanTasks counts (plus the decoder's reorder
// delay), beyond those decoded again for targets FFmpeg dropped.
//
// Before leading pictures were decoded from the keyframe before theirs,
// a seek to their own keyframe dropped them; av's seek retry then decoded
// the previous GOP again, unplanned (102 and 111 frames decoded for 75
// planned, whole). And a seek into h264_opengop.mp4's last GOP, 3 frames
// from a keyframe that is not an IDR picture, lost its last 2 frames: 2
// missed, whole or in tasks.
func TestDecodeOpenGOP(t *testing.T) {
	const size = 32
	plane := size * size * 3
	for _, name := range []string{"h264_opengop.mp4", "hevc_opengop.mp4"} {
		t.Run(name, func(t *testing.T) {
			data := videotest.Read(t, name)
			v, err := mp4.Parse(data)
			if err != nil {
				t.Fatal(err)
			}
			leading := 0
			for f := range v.Frames {
				if k := sortedKeyBefore(v, f); k > v.Keyframes[0] && v.FramePTS[f] < v.FramePTS[k] {
					leading++
				}
			}
			if len(v.Keyframes) < 5 || leading < 5 {
				t.Fatalf("%d keyframes, %d leading pictures; want an open-GOP clip with at least 5 of each", len(v.Keyframes), leading)
			}
			ref, byPTS := videotest.AllFrames(t, data, size)
			cli := framemd5RGB(t, name, size)
			if cli != nil && len(cli) != len(byPTS) {
				t.Fatalf("ffmpeg's framemd5 lists %d frames, the sequential decode %d", len(cli), len(byPTS))
			}
			// check compares a slot of tensor with the frame of pts pts.
			check := func(what string, tensor []byte, slot int, pts int64) {
				t.Helper()
				p, ok := byPTS[pts]
				if !ok {
					t.Fatalf("%s: pts %d is not one FFmpeg shows", what, pts)
				}
				got := tensor[slot*plane : (slot+1)*plane]
				if !bytes.Equal(got, ref[p*plane:(p+1)*plane]) {
					t.Errorf("%s: slot %d is not the frame of pts %d", what, slot, pts)
				}
				if sum := md5.Sum(got); cli != nil && hex.EncodeToString(sum[:]) != cli[p] {
					t.Errorf("%s: slot %d (pts %d) has MD5 %x, ffmpeg's framemd5 %s", what, slot, pts, sum, cli[p])
				}
			}
			n := v.Frames
			d := NewDecoder(Options{Frames: n, Size: size})
			sampled := video.SampleFrames(v, n)
			if len(sampled) != n {
				t.Fatalf("sampling %d frames picks %d", n, len(sampled))
			}
			out, err := d.Decode(context.Background(), decSample("k", map[string][]byte{"mp4": data}), nil)
			if err != nil {
				t.Fatal(err)
			}
			if out.MissedFrames != 0 || out.Damaged != 0 {
				t.Errorf("whole: %d missed, %d damaged; want 0, 0", out.MissedFrames, out.Damaged)
			}
			for slot, f := range sampled {
				check("whole", out.Tensors[0].Data, slot, v.FramePTS[f])
			}
			seq := video.PlanTasks(v, sampled, 1)[0]
			runTasks := func(what string, tasks []video.Task) []byte {
				t.Helper()
				tensor := d.newVideoTensor()
				for _, task := range tasks {
					st, err := d.videoTask(context.Background(), d.cfg, data, v, task, tensor.Data)
					if err != nil {
						t.Fatalf("%s: task at keyframe %d: %v", what, task.Keyframe, err)
					}
					if st.missed != 0 || st.damaged != 0 {
						t.Errorf("%s: task at keyframe %d: %d missed, %d damaged; want 0, 0", what, task.Keyframe, st.missed, st.damaged)
					}
					if task.DecodeFrames > 0 && st.frames-st.refed > task.DecodeFrames+4 {
						t.Errorf("%s: task at keyframe %d decoded %d frames (%d again), planned %d", what, task.Keyframe, st.frames, st.refed, task.DecodeFrames)
					}
				}
				return tensor.Data
			}
			tasks := video.PlanTasks(v, sampled, 4)
			if len(tasks) < 2 {
				t.Fatalf("%d task for 4 workers, want several", len(tasks))
			}
			sum := 0
			for _, task := range tasks {
				sum += task.DecodeFrames
			}
			if sum < seq.DecodeFrames || sum > seq.DecodeFrames+len(tasks)*4 {
				t.Errorf("tasks decode %d frames, the sequential plan %d: want a few more, for the keyframes tasks start at", sum, seq.DecodeFrames)
			}
			whole := runTasks("sequential", []video.Task{seq})
			split := runTasks("split", tasks)
			var single []video.Task
			for slot, f := range sampled {
				task := video.PlanTasks(v, []int{f}, 1)[0]
				task.Slots = []int{slot}
				single = append(single, task)
			}
			one := runTasks("one per frame", single)
			// Tasks made by hand with a leading picture's own keyframe.
			var own []video.Task
			for slot, f := range sampled {
				own = append(own, video.Task{Keyframe: sortedKeyBefore(v, f), Targets: []int{f}, Slots: []int{slot}})
			}
			byHand := runTasks("own keyframe", own)
			for slot, f := range sampled {
				check("own keyframe", byHand, slot, v.FramePTS[f])
				check("sequential", whole, slot, v.FramePTS[f])
				check("split", split, slot, v.FramePTS[f])
				check("one per frame", one, slot, v.FramePTS[f])
			}
		})
	}
}

// sortedKeyBefore returns the last keyframe at or before decode-order
// frame f (0 when none is).
func sortedKeyBefore(v *VideoInfo, f int) int {
	i := sort.SearchInts(v.Keyframes, f+1) - 1
	if i < 0 {
		return 0
	}
	return v.Keyframes[i]
}

// framemd5RGB returns the md5 column of `ffmpeg -threads 1 -i FILE -vf
// scale=S:S:flags=bilinear -pix_fmt rgb24 -f framemd5 -` for a clip of
// testdata/video, one per frame in presentation order: the MD5s of the
// S x S RGB pictures Decode writes. It returns nil without ffmpeg.
func framemd5RGB(t *testing.T, name string, size int) []string {
	t.Helper()
	if _, err := exec.LookPath("ffmpeg"); err != nil {
		t.Log("ffmpeg not installed: compared with the sequential decode only")
		return nil
	}
	scale := fmt.Sprintf("scale=%d:%d:flags=bilinear", size, size)
	raw, err := exec.Command("ffmpeg", "-nostdin", "-v", "error", "-threads", "1", "-i", filepath.Join(testdata, "video", name),
		"-map", "0:v", "-vf", scale, "-pix_fmt", "rgb24", "-f", "framemd5", "-").Output()
	if err != nil {
		t.Fatalf("ffmpeg framemd5 of %s: %v", name, err)
	}
	var sums []string
	for _, line := range strings.Split(string(raw), "\n") {
		if f := strings.Split(line, ","); len(f) == 6 && !strings.HasPrefix(line, "#") {
			sums = append(sums, strings.TrimSpace(f[5]))
		}
	}
	return sums
}

// TestRedecodeSharesFrameLimit checks that the second pass for missed
// targets (redecodeMissed) decodes within what the first left of
// Limits.MaxFramesDecoded: a clip must not decode twice the limit.
func TestRedecodeSharesFrameLimit(t *testing.T) {
	data := videotest.Read(t, "h264_opengop.mp4")
	v, err := mp4.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	d := NewDecoder(Options{Frames: v.Frames, Size: 16})
	full, err := d.Decode(context.Background(), decSample("k", map[string][]byte{"mp4": data}), nil)
	if err != nil {
		t.Fatal(err)
	}
	// Every frame sampled: the first pass decodes each frame once, the
	// second the last GOP's again (FFmpeg's H.264 drops them after a seek).
	if full.DecodedFrames <= v.Frames {
		t.Fatalf("unlimited: %d frames decoded for %d; want a second pass", full.DecodedFrames, v.Frames)
	}
	limit := v.Frames + 2
	d = NewDecoder(Options{Frames: v.Frames, Size: 16, Limits: Limits{MaxFramesDecoded: limit}})
	out, err := d.Decode(context.Background(), decSample("k", map[string][]byte{"mp4": data}), nil)
	if err != nil {
		t.Fatal(err)
	}
	// As a single pass does, the second stops at the frame past the limit.
	if out.DecodedFrames > limit+1 {
		t.Errorf("MaxFramesDecoded %d: %d frames decoded (%d unlimited)", limit, out.DecodedFrames, full.DecodedFrames)
	}
}
