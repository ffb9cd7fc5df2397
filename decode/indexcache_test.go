package decode

import (
	"archive/tar"
	"os"
	"path/filepath"
	"testing"
)

// TestIndexCacheDirIsCreated checks that a cache directory that does not
// exist yet (run passes <cache>/index on a fresh machine) is made, so the
// second open reads the index from it instead of the whole tar again.
func TestIndexCacheDirIsCreated(t *testing.T) {
	data := writeTar(t, tar.FormatPAX, []tarFile{{name: "000001.txt", data: "one"}, {name: "000002.txt", data: "two"}})
	p := writeFile(t, t.TempDir(), "s.tar", data)
	cache := filepath.Join(t.TempDir(), "datahelix", "index")
	s1, err := OpenShard(p, cache)
	if err != nil {
		t.Fatal(err)
	}
	if s1.FromCache() || s1.CacheError() != nil {
		t.Fatalf("first open: FromCache %v, CacheError %v; want false, nil", s1.FromCache(), s1.CacheError())
	}
	files, err := filepath.Glob(filepath.Join(cache, "s.tar.*.dhidx"))
	if err != nil || len(files) != 1 {
		t.Fatalf("index files in %s: %v, %v; want one", cache, files, err)
	}
	if _, err := os.Stat(p + ".dhidx"); !os.IsNotExist(err) {
		t.Errorf("an index was written beside the shard too (stat: %v)", err)
	}
	s2, err := OpenShard(p, cache)
	if err != nil {
		t.Fatal(err)
	}
	if !s2.FromCache() || s2.Len() != 2 {
		t.Errorf("second open: FromCache %v, %d samples; want the cached index of 2", s2.FromCache(), s2.Len())
	}
}
