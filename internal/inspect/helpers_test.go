package inspect

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// tarFile is one regular member written by writeTar.
type tarFile struct {
	name string
	data string
}

// writeTar returns a tar archive of files written with archive/tar in the
// given format.
func writeTar(t testing.TB, format tar.Format, files []tarFile) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.data)), Typeflag: tar.TypeReg, Format: format,
			ModTime: time.Unix(1700000000, 0)}
		if err := w.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(f.data)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// writeFile writes data to dir/name and returns the path.
func writeFile(t testing.TB, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// readImage reads a committed test image of package decode.
func readImage(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "decode", "testdata", "image", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}
