package launcher

import (
	"archive/tar"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/datahelix/datahelix/internal/cli"
	"github.com/datahelix/datahelix/internal/tartest"
)

// TestAudioFlagErrors: --audio-rate and --audio-channels out of range are
// usage errors naming the flag, in every command that takes them.
func TestAudioFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		flag string
	}{
		{[]string{"decode", "--audio-rate", "-1", "x.mp3"}, "audio-rate"},
		{[]string{"decode", "--audio-rate", "1000000", "x.mp3"}, "audio-rate"},
		{[]string{"decode", "--audio-channels", "2", "x.mp3"}, "audio-channels"},
		{[]string{"run", "--audio-rate", "16000", "--audio-channels", "9"}, "audio-channels"},
		{[]string{"run", "--audio-channels", "1"}, "audio-channels"},
		{[]string{"train", "--audio-rate", "-5", "--", "python3", "train.py"}, "audio-rate"},
		{[]string{"serve", "--audio-rate", "200000"}, "audio-rate"},
	} {
		usageLine(t, tc.args...)
		var fe cli.FlagError
		if err := commandErr(t, tc.args...); !errors.As(err, &fe) || fe.Flag != tc.flag || !errors.Is(err, cli.ErrUsage) {
			t.Errorf("%q: error %v, want a usage error about --%s", tc.args, err, tc.flag)
		}
	}
}

// audioMedia makes a 3 s 440 Hz tone with the ffmpeg CLI, alone or with
// a picture, into dir.
func audioMedia(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	ff, err := exec.LookPath("ffmpeg")
	if err != nil {
		t.Skip("ffmpeg CLI not installed")
	}
	out := filepath.Join(dir, name)
	cmd := append([]string{"-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=44100:duration=3",
		"-f", "lavfi", "-i", "testsrc2=size=64x48:rate=10:duration=3"}, args...)
	if msg, err := exec.Command(ff, append(cmd, "-threads", "1", out)...).CombinedOutput(); err != nil {
		t.Fatalf("ffmpeg: %v: %s", err, msg)
	}
	return out
}

// TestDecodeAudio runs decode on a clip with sound and on an MP3, with
// and without audio output, and --md5 with it.
func TestDecodeAudio(t *testing.T) {
	dir := t.TempDir()
	clip := audioMedia(t, dir, "clip.mp4", "-map", "1:v", "-map", "0:a", "-c:v", "libx264", "-preset", "ultrafast", "-c:a", "aac")
	song := audioMedia(t, dir, "song.mp3", "-map", "0:a", "-c:a", "libmp3lame")

	code, stdout, stderr := runMain("decode", "--frames", "4", "--size", "32", "--audio-rate", "16000", "--audio-channels", "2", clip, song)
	if code != 0 {
		t.Fatalf("decode with audio: exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 2 || !regexp.MustCompile(`^clip\tvideo\ttensors \[4 32 32 3\]\taudio \[2 \d+\] at 16000 Hz\t`).MatchString(lines[0]) ||
		!regexp.MustCompile(`^song\taudio\ttensors \taudio \[2 4\d{4}\] at 16000 Hz\t`).MatchString(lines[1]) {
		t.Errorf("decode with audio printed %q", stdout)
	}

	code, _, stderr = runMain("decode", song)
	if code == 0 || !strings.Contains(stderr, "file "+song) || !strings.Contains(stderr, "--audio-rate") {
		t.Errorf("decode of an MP3 without audio output: exit %d, stderr %q; want a failure naming the file and the flag", code, stderr)
	}

	md5 := func() string {
		code, stdout, stderr := runMain("decode", "--md5", "--frames", "4", "--audio-rate", "8000", clip)
		if code != 0 {
			t.Fatalf("decode --md5: exit %d: %s", code, stderr)
		}
		return stdout
	}
	out := md5()
	lines = strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 31 || !regexp.MustCompile(`^pcm:[0-9a-f]{32}$`).MatchString(lines[30]) {
		t.Errorf("decode --md5 --audio-rate printed %d lines ending %q; want 30 frames and the PCM's", len(lines), lines[len(lines)-1])
	}
	if again := md5(); again != out {
		t.Errorf("decode --md5 differs between runs")
	}
}

// TestTrainWithAudio feeds a real Python trainer a shard mixing a clip
// with sound, a clip without, and an MP3 with a transcript, with
// --audio-rate: every sample's batch["audio"] is float32 [2, T], the
// clip without sound is silence flagged missing, the MP3 an audio sample.
func TestTrainWithAudio(t *testing.T) {
	needTorch(t)
	dir := t.TempDir()
	media := t.TempDir()
	read := func(p string) string { return string(must(os.ReadFile(p))) }
	tone := read(audioMedia(t, media, "tone.mp4", "-map", "1:v", "-map", "0:a", "-c:v", "libx264", "-preset", "ultrafast", "-c:a", "aac"))
	silent := read(audioMedia(t, media, "silent.mp4", "-map", "1:v", "-c:v", "libx264", "-preset", "ultrafast"))
	song := read(audioMedia(t, media, "song.mp3", "-map", "0:a", "-c:a", "libmp3lame"))
	tartest.WriteFile(t, dir, "a.tar", tartest.Write(t, tar.FormatPAX, []tartest.File{
		{Name: "tone1.mp4", Data: tone}, {Name: "tone1.txt", Data: "a tone"},
		{Name: "silent.mp4", Data: silent},
		{Name: "song.mp3", Data: song}, {Name: "song.txt", Data: "a song"},
		{Name: "tone2.mp4", Data: tone},
	}))
	out := filepath.Join(t.TempDir(), "audio")
	args := []string{"train", "--data", dir, "--batch", "2", "--frames", "2", "--size", "32", "--quiet", "--cache-dir", t.TempDir(),
		"--steps", "4", "--audio-rate", "8000", "--audio-channels", "2", "--", pythonBin, "testdata/audio_trainer.py", "--out", out}
	if log, err := mpirunMain(t, 1, args...); err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	var steps map[string]struct {
		Stacked bool
		Rate    int
		Samples []struct {
			Key, Kind, Dtype string
			Missing          bool
			Shape            []int
			RMS              float64
		}
	}
	if err := json.Unmarshal(must(os.ReadFile(out+".0")), &steps); err != nil {
		t.Fatal(err)
	}
	t.Logf("trainer saw %+v", steps)
	if len(steps) != 4 {
		t.Fatalf("%d steps, want 4", len(steps))
	}
	seen := map[string]bool{}
	for step, st := range steps {
		if st.Rate != 8000 {
			t.Errorf("step %s: audio_rate %d", step, st.Rate)
		}
		for _, s := range st.Samples {
			seen[s.Key] = true
			wantKind, loud := "video", true
			switch s.Key {
			case "silent":
				loud = false
			case "song":
				wantKind = "audio"
			}
			if s.Kind != wantKind || s.Missing == loud || len(s.Shape) != 2 || s.Shape[0] != 2 || s.Shape[1] < 4000 || s.Dtype != "torch.float32" ||
				(loud && s.RMS < 0.05) || (!loud && s.RMS != 0) {
				t.Errorf("step %s: sample %+v", step, s)
			}
		}
	}
	if len(seen) != 4 {
		t.Errorf("samples seen %v, want all 4", seen)
	}
}
