package decoding

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/datahelix/datahelix/internal/video"
	"github.com/datahelix/datahelix/internal/video/videotest"
)

// damageFrames is the sampled frame count of the damage tests: more than
// any clip they use has, so that every frame is decoded and the damaged one
// with it.
const damageFrames = 750

// countDamage decodes the clip in data (a member with extension ext) whole
// with Decode and again split into up to four tasks with DecodeVideoTask,
// and returns the damage each reported and the number of tasks.
func countDamage(t *testing.T, d *Decoder, name, ext string, data []byte) (whole, tasks, ntasks int) {
	t.Helper()
	out, err := d.Decode(context.Background(), decSample("k", map[string][]byte{ext: data}), nil)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	rec, err := ParseRecord(decSample("k", map[string][]byte{ext: data}), Limits{})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	tensor := d.newVideoTensor()
	plan := video.PlanTasks(rec.Video, video.SampleFrames(rec.Video, damageFrames), 4)
	for _, task := range plan {
		n, err := d.DecodeVideoTask(context.Background(), data, rec.Video, task, tensor.Data)
		if err != nil {
			t.Fatalf("%s: task at keyframe %d: %v", name, task.Keyframe, err)
		}
		tasks += n
	}
	return out.Damaged, tasks, len(plan)
}

// TestDamageIsCounted flips 16 bytes inside the compressed data of clips
// that FFmpeg 5.1 then decodes, concealing the damage, which left no sign
// that the dataset is damaged. Decode must count it, whole or split into
// tasks; the intact clip has none. The sign FFmpeg gives differs:
//
//   - H.264 flags the concealed frame (decode_error_flags);
//   - HEVC flags nothing and fails no packet, but logs an error, which only
//     the decoder's error messages count: here, 345 bytes into the slice
//     data of the last keyframe (packet 47 of 50), "The cu_qp_delta 28 is
//     outside the valid range";
//   - HEVC with a decoded-picture-hash SEI (hevc_md5.mp4, made by
//     testdata/media/make.sh), decoded with Options.CheckHashes, logs an
//     MD5 mismatch for a damaged picture it decodes in full: here a
//     keyframe in the middle of the clip and the pictures that refer to
//     it (without CheckHashes this damage goes unseen:
//     TestHashChecksAreAskedFor);
//   - VP9 gives a sign only when it rejects packets: here the first
//     keyframe's compressed header size, then the frames that refer to it.
//     Damage inside VP9 tile data decodes with no sign in FFmpeg 5.1, so
//     this case, unlike the HEVC ones, already passed before.
//
// With two threads FFmpeg decodes on frame threads, whose messages must
// reach the call too. H.264 is left out there: with frame threads FFmpeg
// may hand out a frame before the thread decoding it flags it, so whether
// its damage counts depends on timing.
func TestDamageIsCounted(t *testing.T) {
	for _, threads := range []int{1, 2} {
		t.Run(fmt.Sprintf("threads=%d", threads), func(t *testing.T) {
			testDamageIsCounted(t, threads)
		})
	}
}

func testDamageIsCounted(t *testing.T, threads int) {
	for _, tt := range []struct {
		name     string // under testdata
		at       int    // first of the 16 damaged bytes; -1: the middle of the file
		threaded bool   // the sign reaches the call on frame threads
		check    bool   // Options.CheckHashes
	}{
		{"video/h264_30s.mp4", -1, false, false},
		{"video/hevc.mp4", 10164, true, false},
		{"media/hevc_md5.mp4", -1, true, true},
		{"video/vp9.webm", 493, true, false},
	} {
		if threads > 1 && !tt.threaded {
			continue
		}
		d := NewDecoder(Options{Frames: damageFrames, Size: 16, Threads: threads, CheckHashes: tt.check})
		clip, err := os.ReadFile(filepath.Join(testdata, tt.name))
		if err != nil {
			t.Fatal(err)
		}
		at := tt.at
		if at < 0 {
			at = len(clip) / 2
		}
		damaged := bytes.Clone(clip)
		for k := at; k < at+16; k++ {
			damaged[k] ^= 0x5a
		}
		ext := strings.TrimPrefix(filepath.Ext(tt.name), ".")
		for _, c := range []struct {
			what string
			data []byte
			want bool
		}{{"intact", clip, false}, {"damaged", damaged, true}} {
			whole, tasks, ntasks := countDamage(t, d, tt.name, ext, c.data)
			if ntasks < 2 {
				t.Fatalf("%s: %d video task, want several, which seek", tt.name, ntasks)
			}
			if got := whole > 0; got != c.want {
				t.Errorf("%s %s: Decode counts %d damaged, want damage %v", c.what, tt.name, whole, c.want)
			}
			if got := tasks > 0; got != c.want {
				t.Errorf("%s %s: tasks count %d damaged, want damage %v", c.what, tt.name, tasks, c.want)
			}
		}
	}
}

// TestHashChecksAreAskedFor decodes the damaged hevc_md5.mp4 of
// TestDamageIsCounted without Options.CheckHashes: its damage shows only
// in the picture hashes, which cost an MD5 per picture and are checked
// only when asked for.
func TestHashChecksAreAskedFor(t *testing.T) {
	clip, err := os.ReadFile(filepath.Join(testdata, "media", "hevc_md5.mp4"))
	if err != nil {
		t.Fatal(err)
	}
	for k := len(clip) / 2; k < len(clip)/2+16; k++ {
		clip[k] ^= 0x5a
	}
	d := NewDecoder(Options{Frames: damageFrames, Size: 16})
	if whole, tasks, _ := countDamage(t, d, "hevc_md5.mp4", "mp4", clip); whole != 0 || tasks != 0 {
		t.Errorf("without CheckHashes: %d damaged whole, %d in tasks; want 0 (the hashes unchecked)", whole, tasks)
	}
}

// TestIntactClipsHaveNoDamage decodes every clip under testdata, whole and
// in tasks that seek, on one thread and on frame threads: a damage count on
// intact data would make every operator's run look damaged.
func TestIntactClipsHaveNoDamage(t *testing.T) {
	var clips []string
	for _, dir := range []string{"video", "media"} {
		for _, ext := range []string{"mp4", "mov", "mkv", "webm"} {
			m, err := filepath.Glob(filepath.Join(testdata, dir, "*."+ext))
			if err != nil {
				t.Fatal(err)
			}
			clips = append(clips, m...)
		}
	}
	if len(clips) < 20 {
		t.Fatalf("found %d clips under testdata, want at least 20", len(clips))
	}
	for _, threads := range []int{1, 2} {
		d := NewDecoder(Options{Frames: damageFrames, Size: 16, Threads: threads, CheckHashes: true})
		for _, name := range clips {
			data, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			whole, tasks, _ := countDamage(t, d, name, strings.TrimPrefix(filepath.Ext(name), "."), data)
			if whole != 0 || tasks != 0 {
				t.Errorf("%s, %d threads: intact clip counts %d damaged whole and %d in tasks, want 0",
					name, threads, whole, tasks)
			}
		}
	}
}

// TestUndecodableStartIsCounted decodes damaged/h264_nokey.mp4
// (make_edits.sh), a cut copied from a P-frame on: FFmpeg decodes its
// first 17 frames, which refer to frames cut away, but outputs nothing
// before the keyframe that follows (25 of its 42 frames, as
// `ffmpeg -f framemd5` lists). Of 8 sampled frames, 3 lie before that
// keyframe; their slots hold its picture, as FFmpeg delivers them, with
// no damage counted: nothing told the user. Decode, whole or in tasks,
// must count them, and deliver the same frames as before.
func TestUndecodableStartIsCounted(t *testing.T) {
	const size, n, key = 32, 8, 17
	data, err := os.ReadFile(filepath.Join(testdata, "video", "damaged", "h264_nokey.mp4"))
	if err != nil {
		t.Fatal(err)
	}
	rec, err := ParseRecord(decSample("k", map[string][]byte{"mp4": data}), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	v := rec.Video
	if v.Frames != 42 || !slices.Equal(v.Keyframes, []int{key}) {
		t.Fatalf("%d frames, keyframes %v; want 42, [%d] (has the clip changed?)", v.Frames, v.Keyframes, key)
	}
	targets := video.SampleFrames(v, n)
	before := 0
	for _, f := range targets {
		if f < key {
			before++
		}
	}
	d := NewDecoder(Options{Frames: n, Size: size})
	out, err := d.Decode(context.Background(), decSample("k", map[string][]byte{"mp4": data}), rec)
	if err != nil {
		t.Fatal(err)
	}
	if before != 3 || out.Damaged != before {
		t.Errorf("Decode counts %d damaged; want the %d sampled frames before the keyframe (3)", out.Damaged, before)
	}
	tensor := d.newVideoTensor()
	tasks := 0
	plan := video.PlanTasks(v, targets, 4)
	for _, task := range plan {
		damaged, err := d.DecodeVideoTask(context.Background(), data, v, task, tensor.Data)
		if err != nil {
			t.Fatal(err)
		}
		tasks += damaged
	}
	if len(plan) < 2 || tasks != before {
		t.Errorf("%d tasks count %d damaged; want several tasks counting %d", len(plan), tasks, before)
	}
	ref, byPTS := videotest.AllFrames(t, data, size)
	plane := size * size * 3
	for slot, f := range targets {
		want := byPTS[v.FramePTS[max(f, key)]] // the keyframe's picture before it
		for _, got := range [][]byte{out.Tensors[0].Data, tensor.Data} {
			if !bytes.Equal(got[slot*plane:(slot+1)*plane], ref[want*plane:(want+1)*plane]) {
				t.Errorf("slot %d (frame %d): not the frame FFmpeg shows at its time", slot, f)
			}
		}
	}
	// All 42 frames sampled: the 17 before the keyframe.
	whole, split, _ := countDamage(t, NewDecoder(Options{Frames: damageFrames, Size: 16}), "h264_nokey.mp4", "mp4", data)
	if whole != key || split != key {
		t.Errorf("every frame sampled: %d damaged whole, %d in tasks; want %d", whole, split, key)
	}
}

// TestOpenGOPStartIsNotDamage decodes, every frame sampled, clips that
// `ffmpeg -ss 1 -c copy -avoid_negative_ts make_zero` cuts from an
// open-GOP H.264 stream (x264 open-gop=1) without an edit list: each
// starts with an I-frame whose two leading B-frames refer to the GOP cut
// away. FFmpeg decodes them without output, as the standard lets a decoder
// starting there; the clip is intact, and counting them as damage (as a
// cut starting without a keyframe is counted) made it look damaged. The
// slots of those two frames hold the I-frame: MissedFrames counts them.
func TestOpenGOPStartIsNotDamage(t *testing.T) {
	ff, err := exec.LookPath("ffmpeg")
	if err != nil {
		t.Skip("ffmpeg not installed")
	}
	dir := t.TempDir()
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(ff, append([]string{"-nostdin", "-v", "error", "-y"}, args...)...).CombinedOutput(); err != nil {
			t.Skipf("ffmpeg %v: %v: %s", args, err, out)
		}
	}
	src := filepath.Join(dir, "open.mp4")
	run("-f", "lavfi", "-i", "testsrc2=size=96x64:rate=25:duration=3", "-c:v", "libx264", "-threads", "1",
		"-g", "12", "-bf", "3", "-x264-params", "open-gop=1", "-pix_fmt", "yuv420p", src)
	cut := []string{"-ss", "1", "-i", src, "-c", "copy", "-avoid_negative_ts", "make_zero"}
	for _, c := range []struct {
		ext  string
		args []string
	}{{"mkv", nil}, {"mp4", []string{"-use_editlist", "0"}}} {
		file := filepath.Join(dir, "cut."+c.ext)
		run(append(append(cut, c.args...), file)...)
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		d := NewDecoder(Options{Frames: damageFrames, Size: 16})
		out, err := d.Decode(context.Background(), decSample("k", map[string][]byte{c.ext: data}), nil)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		whole, tasks, _ := countDamage(t, d, file, c.ext, data)
		if out.MissedFrames < 2 || whole != 0 || tasks != 0 {
			t.Errorf("cut.%s: %d missed, %d damaged whole, %d in tasks; want the 2 leading B-frames missed, no damage",
				c.ext, out.MissedFrames, whole, tasks)
		}
	}
}
