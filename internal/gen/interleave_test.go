package gen

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// tarMember is one tar member: its name and bytes.
type tarMember struct{ name, body string }

// writeTar writes the members as the tar shard at p.
func writeTar(t *testing.T, p string, ms []tarMember) {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, m := range ms {
		if err := tw.WriteHeader(&tar.Header{Name: m.name, Mode: 0o644, Size: int64(len(m.body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(m.body))
	}
	tw.Close()
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// readTar returns the members of the tar shard at p, in order.
func readTar(t *testing.T, p string) []tarMember {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var ms []tarMember
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return ms
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		ms = append(ms, tarMember{h.Name, string(b)})
	}
}

// TestInterleaveDealsSamplesInTurn: two source-homogeneous shards of four
// samples become two shards holding two samples of each source, every
// sample whole (its members together, bytes unchanged), sample n of the
// concatenation in shard n mod 2.
func TestInterleaveDealsSamplesInTurn(t *testing.T) {
	dir := t.TempDir()
	var paths []string
	var all [][]tarMember // samples in the order of the concatenation
	for s, src := range []string{"video", "text"} {
		var ms []tarMember
		for i := range 4 {
			key := string(rune('a'+s)) + string(rune('0'+i))
			sample := []tarMember{{key + ".mp4", src + "-" + key}, {key + ".txt", "caption " + key}}
			if src == "text" {
				sample = sample[1:]
			}
			ms = append(ms, sample...)
			all = append(all, sample)
		}
		p := filepath.Join(dir, src+".tar")
		writeTar(t, p, ms)
		paths = append(paths, p)
	}
	out := t.TempDir()
	got, err := Interleave(paths, out, "hdmix")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{filepath.Join(out, "hdmix-interleaved-000000.tar"), filepath.Join(out, "hdmix-interleaved-000001.tar")}; !slices.Equal(got, want) {
		t.Fatalf("wrote %v, want %v", got, want)
	}
	for k, p := range got {
		var want []tarMember
		for n := k; n < len(all); n += 2 {
			want = append(want, all[n]...)
		}
		if have := readTar(t, p); !slices.Equal(have, want) {
			t.Errorf("shard %d: %v, want %v", k, have, want)
		}
	}
}

// TestInterleaveRefusesSplitSample: a sample whose members lie apart in
// its shard is refused, naming the shard and the key.
func TestInterleaveRefusesSplitSample(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "bad.tar")
	writeTar(t, p, []tarMember{{"a.mp4", "x"}, {"b.mp4", "y"}, {"a.txt", "z"}})
	_, err := Interleave([]string{p}, t.TempDir(), "hdmix")
	if !errors.Is(err, ErrInterleave) || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), `"a"`) {
		t.Fatalf("err %v: want ErrInterleave naming %s and sample a", err, p)
	}
	if _, err := Interleave(nil, t.TempDir(), "hdmix"); !errors.Is(err, ErrInterleave) {
		t.Fatalf("no shards: err %v, want ErrInterleave", err)
	}
}
