package decoding

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/datahelix/datahelix/internal/shardindex"
)

// testdata is the directory of the committed test media and shards,
// kept with the decode package, whose shard tests read them too.
const testdata = "../../decode/testdata"

// shardSamples indexes the tar archive data as a shard named name and
// returns its samples, as shard.Shard.ReadSample reads them, and the
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
