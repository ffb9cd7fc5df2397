package gen

import (
	"context"
	"os"
	"os/exec"
	"syscall"
	"testing"
)

// TestShardsAreWorldReadable checks that generated shards get mode 0644
// less the umask, as files made by os.Create do, so that a dataset
// generated into a shared directory can be read by teammates and jobs of
// other accounts (os.CreateTemp made them 0600).
func TestShardsAreWorldReadable(t *testing.T) {
	if _, err := exec.LookPath("ffmpeg"); err != nil {
		t.Skip("ffmpeg CLI not installed")
	}
	umask := syscall.Umask(0)
	syscall.Umask(umask)
	want := os.FileMode(0o644) &^ os.FileMode(umask)
	paths, err := Generate(context.Background(), Config{Preset: "imagenet", Samples: 2, Shards: 2, Out: t.TempDir(), Seed: 1, SizeScale: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := st.Mode().Perm(); got != want {
			t.Errorf("%s: got mode %v, want %v (0644 less umask %#o)", p, got, want, umask)
		}
	}
}
