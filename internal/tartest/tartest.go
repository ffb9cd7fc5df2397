// Package tartest writes the tar shards and files that the tests of the
// shard index, the dataset, decoding and inspect read: members of any
// type in any tar format, written with archive/tar.
package tartest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// File is one member Write writes.
type File struct {
	Name string
	Data string
	// Type is the member's type, tar.TypeReg when zero; members of other
	// types than TypeReg and TypeCont have no data (a link's target is
	// "target").
	Type byte
}

// Write returns a tar archive of files in the given format.
func Write(tb testing.TB, format tar.Format, files []File) []byte {
	tb.Helper()
	var buf bytes.Buffer
	w := tar.NewWriter(&buf)
	for _, f := range files {
		typ := f.Type
		if typ == 0 {
			typ = tar.TypeReg
		}
		h := &tar.Header{Name: f.Name, Mode: 0o644, Size: int64(len(f.Data)), Typeflag: typ, Format: format,
			ModTime: time.Unix(1700000000, 0)}
		hasData := typ == tar.TypeReg || typ == tar.TypeCont
		if !hasData {
			h.Size = 0
			h.Linkname = "target"
		}
		if err := w.WriteHeader(h); err != nil {
			tb.Fatal(err)
		}
		if hasData {
			if _, err := w.Write([]byte(f.Data)); err != nil {
				tb.Fatal(err)
			}
		}
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// WriteFile writes data to dir/name and returns the path.
func WriteFile(tb testing.TB, dir, name string, data []byte) string {
	tb.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		tb.Fatal(err)
	}
	return p
}

// Gzip returns data gzip-compressed.
func Gzip(tb testing.TB, data []byte) []byte {
	tb.Helper()
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	if _, err := w.Write(data); err != nil {
		tb.Fatal(err)
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}
