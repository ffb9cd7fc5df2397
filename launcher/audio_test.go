package launcher

import (
	"errors"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
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
		var fe flagError
		if err := commandErr(t, tc.args...); !errors.As(err, &fe) || fe.flag != tc.flag || !errors.Is(err, errUsage) {
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
