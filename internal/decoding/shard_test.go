package decoding

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/datahelix/datahelix/internal/shardindex"
)

// testdata is the directory of the committed test media and shards,
// kept with the decode package, whose shard tests read them too.
const testdata = "../../decode/testdata"

// tarFile is one member of a test tar archive.
type tarFile struct {
	name string
	data string
}

// writeTar returns a tar archive of regular files written with
// archive/tar in the given format.
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

// shardSamples indexes the tar archive data as a shard named name and
// returns its samples, as decode.Shard.ReadSample reads them, and the
// index's warnings.
func shardSamples(t testing.TB, name string, data []byte) ([]*Sample, []string) {
	t.Helper()
	idx, err := shardindex.Build(name, bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	var out []*Sample
	for _, e := range idx.Entries {
		s := &Sample{Shard: name, Key: e.Key}
		for _, m := range e.Members {
			s.Members = append(s.Members, Member{Name: m.Name, Ext: m.Ext, Data: data[m.Offset : m.Offset+m.Size]})
		}
		out = append(out, s)
	}
	return out, idx.Warnings
}

// readTestdata returns the committed test file at path under testdata.
func readTestdata(t testing.TB, path ...string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(append([]string{testdata}, path...)...))
	if err != nil {
		t.Fatal(err)
	}
	return data
}
